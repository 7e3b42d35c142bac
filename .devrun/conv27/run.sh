#!/bin/bash
# conv27's device run (one H200, < 5 minutes): install kdsl editable, compile the benchmark's
# kernels in parallel into a disk cache, run the conv device tests, then
# benchmarks/cuda_conv.py (kdsl vs cuDNN, defaults and calibration variants) and a
# compute-sanitizer memcheck of two small convolutions.  Results: $OUT/all.tgz (log.txt,
# cuda_conv.json).   usage: bash .devrun/conv27/run.sh
set -u
OUT=${OUT:-/tmp/conv27_out}
mkdir -p "$OUT/res"
LOG="$OUT/res/log.txt"
cd "$(dirname "$0")/../.."
{
echo "# $(date -u) $(git rev-parse --short HEAD 2>/dev/null) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
timeout 40 python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda 2>&1 | tail -3
export KDSL_CACHE_DIR=/tmp/conv27_cache     # (outside $OUT: only results go back)
T0=$(date +%s)
timeout 65 python3 .devrun/conv27/warm.py --jobs 14 --variants 2>&1 | tail -20
echo "# warm done after $(( $(date +%s) - T0 )) s"
# the device tests in four processes at once (their compiles dominate), no xdist needed
i=0
for sel in "float32_3x3" "float32_other" "float16_3x3" "1x1 or bfloat16"; do
  timeout 45 python3 -m pytest -q -p no:cacheprovider -m cuda -k "$sel" \
      tests/cuda_schedules/test_conv_device.py > "$OUT/res/devtests_$i.txt" 2>&1 &
  i=$((i + 1))
done
wait
tail -n 4 "$OUT"/res/devtests_*.txt
echo "# device tests done after $(( $(date +%s) - T0 )) s"
timeout 90 python3 benchmarks/cuda_conv.py --variants --json "$OUT/res/cuda_conv.json" 2>&1
echo "# benchmark rc $? after $(( $(date +%s) - T0 )) s"
cat > /tmp/conv27_memcheck.py <<'PY'
import numpy as np, kdsl as kd, sys
sys.path.insert(0, "tests/cuda_schedules")
from test_conv_default import conv3, conv3_16, conv1_16, check, ref, half
rng = np.random.default_rng(0)
X = rng.standard_normal((2, 19, 11, 37)).astype(np.float32); W = rng.standard_normal((21, 19, 3, 3)).astype(np.float32)
check(kd.kernel(conv3)(X, W, backend="cuda"), ref(X, W), 1e-5)
X, W = half(rng, (2, 19, 11, 37), "float16"), half(rng, (21, 19, 3, 3), "float16")
check(kd.kernel(conv3_16)(X, W, backend="cuda"), ref(X, W), 1e-2)
W1 = half(rng, (21, 19), "float16")
check(kd.kernel(conv1_16)(X, W1, backend="cuda"), ref(X, W1), 1e-2)
print("memcheck script ok")
PY
timeout 25 python3 /tmp/conv27_memcheck.py 2>&1 | tail -3      # (compiles into the cache)
if command -v compute-sanitizer >/dev/null; then
  timeout 30 compute-sanitizer --tool memcheck python3 /tmp/conv27_memcheck.py 2>&1 | tail -6
fi
echo "# all done after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$LOG"
tar -C "$OUT" -czf "$OUT/all.tgz" res 2>/dev/null
