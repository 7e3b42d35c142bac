#!/bin/bash
# session 20, call A: cold/warm start (issue 26) and the per-module fast compile's kernel speed
set -u
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda > $OUT/pip.txt 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $OUT/gpu.txt
unset PYTHONDONTWRITEBYTECODE
export PYTHONUNBUFFERED=1
timeout 240 python3 benchmarks/warm_start.py --runs 7 2>&1 | tail -40 | tee $OUT/warm_start.txt
cp benchmarks/results/warm_start*.json $OUT/ 2>/dev/null
timeout 300 python3 .devrun/nvrtc/ofc.py --quick --reps 7 --variants default,full \
   --only softmax,softmax_odd,layernorm,gelu_add,gelu_view,cumsum,transpose,conv3x3 2>&1 | tail -40 | tee $OUT/ofc.txt
