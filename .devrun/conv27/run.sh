#!/bin/bash
# conv27's device run (H200): install kdsl editable, run the device tests of the conv recipes,
# then benchmarks/cuda_conv.py (kdsl vs cuDNN); everything under $OUT (all.tgz + log).
# usage: bash .devrun/conv27/run.sh [bench args...]   (default: the full benchmark)
set -u
OUT=${OUT:-/tmp/conv27_out}
mkdir -p "$OUT/res"
LOG="$OUT/log.txt"
exec > >(tee -a "$LOG") 2>&1
cd "$(dirname "$0")/../.."
echo "# $(date -u) $(git rev-parse --short HEAD 2>/dev/null) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
timeout 120 python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda || echo "pip install failed (rc $?)"
export KDSL_CACHE_DIR="$OUT/cache"
if [ "${CONV27_TESTS:-1}" = 1 ]; then
  timeout 150 python3 -m pytest -q -x -m cuda tests/cuda_schedules/test_conv_device.py 2>&1 | tail -25
  echo "# device tests rc ${PIPESTATUS[0]}"
fi
timeout ${CONV27_BENCH_S:-200} python3 benchmarks/cuda_conv.py --json "$OUT/res/cuda_conv.json" "$@"
echo "# benchmark rc $?"
tar -C "$OUT" -czf "$OUT/all.tgz" res log.txt 2>/dev/null
