#!/usr/bin/env bash
# The softmax and layernorm rows of issue 10 (benchmarks/cuda.py, default cuda schedules,
# checked against float64 then timed; Triton's fused softmax at 8 and 16 warps in the same run).
# About 20 s on one GPU.  Extra arguments go to benchmarks/cuda.py (e.g. --json PATH).
#   bash notes/prototypes/softmax_bench.sh
# Hand-written variants of the kernel (row in registers, cp.async, exp once, reciprocal):
#   python3 notes/prototypes/softmax/variants.py
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 benchmarks/cuda.py --only softmax,layernorm "$@"
