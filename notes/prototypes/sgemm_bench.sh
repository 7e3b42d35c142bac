#!/bin/bash
# Issue 11 (SGEMM odd shapes), helper h/sgemm, session 13: what to run on the GPU after merging.
# From the repository root:  bash notes/prototypes/sgemm_bench.sh   (about 3 minutes on an H100)
# Results go to $OUT (or /tmp) as sgemm_*.txt / .json.
set -o pipefail
out=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee $out/sgemm_bench.txt
# 1. the benchmark rows (compare with notes/measurements/cuda_gemm_h100_session13.txt)
python3 benchmarks/cuda_gemm.py --only sgemm_ref,sgemm_odd,sgemm4096,sgemm8192 \
    --json $out/sgemm_gemm.json 2>&1 | tee -a $out/sgemm_bench.txt
# 2. the factors of the odd-shape slowdown, and the unroll hint (LDS.128 over k, 1 block/SM)
python3 notes/prototypes/sgemm_shapes.py --json $out/sgemm_shapes.json 2>&1 | tee -a $out/sgemm_bench.txt
# 3. correctness on the device: the GEMM and interior-block tests
python3 -m pytest -q -x -m cuda tests/cuda -k "gemm or matmul" -n 4 2>&1 | tail -3 | tee -a $out/sgemm_bench.txt
