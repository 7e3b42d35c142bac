#!/bin/bash
# flash28: attention forward (the online-softmax fusion) against torch SDPA.
# Run from the repository root on the device machine (16 cores + H200), kdsl, kdsl_cpu,
# kdsl_cuda and torch installed; writes to stdout (and $OUT/attention.txt when OUT is set).
set -u
cd "$(dirname "$0")/../.."
log=${OUT:-/tmp}/attention.txt
{
echo "== cpu, $(nproc) cores, float32 (issue 28 target: N=2048 D=64 >= 1.0x torch) =="
timeout 900 python3 benchmarks/attention.py --device cpu --n 1024,2048 --d 64,128 \
    --dtype float32 --causal both --reps 3
echo "== cuda, float16/bfloat16 (no tensor-core schedule yet: the default CUDA-core one) =="
timeout 900 python3 benchmarks/attention.py --device cuda --n 1024,4096 --d 64,128 \
    --dtype float16,bfloat16 --causal both --reps 3
} 2>&1 | tee "$log"
