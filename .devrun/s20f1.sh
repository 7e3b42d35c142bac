#!/bin/bash
# session 20 final, call 1: GPU suite, flash default timing + racecheck/memcheck, cpu attention
# on 16 pinned cores.  Everything lands in $OUT/all.tgz (few files come back).
set -u
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda >/dev/null 2>&1
R=$OUT/r; mkdir -p $R/flash $R/cpuattn
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc; grep -m1 "model name" /proc/cpuinfo; } | tee $R/host.txt
export PYTHONUNBUFFERED=1
KDSL_CACHE_DIR=/tmp/kc_suite timeout 230 python3 -m pytest -q -rs -n 8 -m cuda tests/cuda tests/cuda_codegen \
   tests/cuda_schedules tests/cuda_runtime tests/cuda_attention tests/fuzz/test_fuzz_slice_cuda.py > $R/gpu_suite.txt 2>&1
echo "gpu suite rc=$?: $(tail -1 $R/gpu_suite.txt)"; grep -E "^(FAILED|ERROR)" $R/gpu_suite.txt | head -20
OUT=$R/flash timeout 110 bash .devrun/flash/run.sh --default 2>&1 | tail -22
OUT=$R/flash timeout 130 bash .devrun/flash/run.sh racecheck 2>&1 | tail -14
(export OUT=$R/cpuattn THREADS=16; timeout 160 taskset -c 0-15 bash .devrun/cpuattn2/run.sh 2>&1 | tail -24)
tar czf $OUT/all.tgz -C $R . && rm -rf $R
