#!/bin/bash
# kernel.tune on a GPU host (helper tune27). From the repository root on the device machine:
#   bash .devrun/tune27/run.sh        (about 8 minutes; results under $OUT)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda >/dev/null 2>&1
export PYTHONUNBUFFERED=1 KDSL_CACHE_DIR=/tmp/kc_tune27
OUT=${OUT:-/tmp/out_tune27}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "=== tests/tune"; timeout 120 python3 -m pytest -q tests/tune 2>&1 | tail -3
echo "=== cuda: search (60 s a kernel), then a fresh process times the persisted winners"
timeout 330 python3 benchmarks/tune.py cuda --budget 60 --json $OUT/tune_cuda.json 2>$OUT/tune_cuda.err
tail -5 $OUT/tune_cuda.err
echo "=== cpu on this (quiet) host: 20 s a kernel"
timeout 150 python3 benchmarks/tune.py cpu --budget 20 --json $OUT/tune_cpu.json 2>$OUT/tune_cpu.err
tail -3 $OUT/tune_cpu.err
echo "=== KDSL_AUTOTUNE=1 on a fresh cache, then a second process uses the winner"
rm -rf /tmp/kc_auto
cat > /tmp/auto.py <<'PY'
import time, torch, kdsl as kd
from kdsl.tune import store
@kd.kernel
def rowsum(A):
    return A.sum(axis=1)
A = torch.randn(8192, 2048, device="cuda")
t = time.perf_counter(); r = rowsum(A); torch.cuda.synchronize()
print(f"first call {time.perf_counter() - t:.1f} s; winners: {[e['hints'] for e in store.entries()]}; "
      f"max err {(r - A.sum(1)).abs().max().item():.2e}")
PY
KDSL_CACHE_DIR=/tmp/kc_auto KDSL_AUTOTUNE=1 timeout 60 python3 /tmp/auto.py 2>&1 | tail -2
KDSL_CACHE_DIR=/tmp/kc_auto timeout 60 python3 /tmp/auto.py 2>&1 | tail -2
