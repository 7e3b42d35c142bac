#!/bin/sh
# Issue 10 item 4, the Python cost of a cached cuda call, on a GPU machine (from the repo root):
#   sh notes/prototypes/launch_bench.sh            # ~2-3 min on an H100 host (+ tests: -t)
# 1. benchmarks/cuda.py's launch-cost rows: kdsl on torch tensors against CuPy RawKernel,
#    torch and Triton, and kdsl on the same CuPy arrays as CuPy's RawKernel;
# 2. benchmarks/launch_host.py --real-torch: the same call split (fast launcher alone, normal
#    path with stream=, torch's getters and allocators, the launch alone, CuPy in-process), with
#    the compiled launch helper and without it (KDSL_CUDA_NATIVE_LAUNCH=0: ctypes
#    cuLaunchKernelEx), and --real-cupy (kdsl on CuPy arrays; CuPy's getters, allocators,
#    RawKernel in-process);  3. with -t: the cuda tests (fake-driver and device ones).
set -e
export PYTHONUNBUFFERED=1 KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-/tmp/kdsl-gpu-cache}"
OUTDIR="${OUT:-/tmp}"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda 2>&1 | tail -2
python3 benchmarks/cuda.py --only overhead --json "$OUTDIR/launch_overhead.json" 2>&1 | tee "$OUTDIR/launch_overhead.txt"
python3 benchmarks/launch_host.py --real-torch 2>&1 | tee "$OUTDIR/launch_host.txt"
KDSL_CUDA_NATIVE_LAUNCH=0 python3 benchmarks/launch_host.py --real-torch 2>&1 | tee "$OUTDIR/launch_host_ctypes.txt"
python3 benchmarks/launch_host.py --real-cupy 2>&1 | tee "$OUTDIR/launch_host_cupy.txt"
if [ "$1" = "-t" ]; then
    python3 -m pytest -q -x tests/cuda_runtime tests/cuda 2>&1 | tail -15 | tee "$OUTDIR/launch_tests.txt"
fi
