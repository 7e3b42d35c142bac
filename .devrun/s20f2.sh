#!/bin/bash
# session 20 final, call 2 (2-GPU machine): Dask on 2 GPUs (compute-bound matmul, per-worker
# tasks), warm start, the cuda launch cost old (4f91041) vs new.
set -u
R=$OUT/r; mkdir -p $R
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda >/dev/null 2>&1
OUT=$R timeout 130 bash .devrun/ab_overhead.sh
GPU2_ARGS="--mm-k 16384 --mm-blocks 32 --skip correctness,big" OUT=$R timeout 120 bash .devrun/dask/gpu2.sh 2>&1 \
   | grep -E "W held|per worker|gpu |over 1|matmul|softmax|box3x3" | tail -20
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda >/dev/null 2>&1
unset PYTHONDONTWRITEBYTECODE
timeout 100 python3 benchmarks/warm_start.py --runs 3 2>&1 | tail -18
cp benchmarks/results/warm_start*.json $R/ 2>/dev/null
tar czf $OUT/all.tgz -C $R . && rm -rf $R
