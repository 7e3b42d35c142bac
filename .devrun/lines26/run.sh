#!/bin/bash
# lines26 (issue 26, the call path's lines): a check on one H200 with torch and CuPy.
# Run from the repository root; writes under $OUT.  The old tree (main at 1c00547) is expected
# in .devrun/lines26/old (kdsl, kdsl_cpu, kdsl_cuda, benchmarks, tests/cuda_runtime).
OUT=${OUT:-/tmp/lines26-out}; mkdir -p "$OUT"
export KDSL_CACHE_DIR=$(mktemp -d) PYTHONDONTWRITEBYTECODE=
{ nvidia-smi -L; python3 -c "import sys, numpy, torch; print(sys.version); print('torch', torch.__version__, 'exchange api', getattr(torch.Tensor, '__dlpack_c_exchange_api__', None) is not None)"
  python3 -c "import cupy; print('cupy', cupy.__version__)"; } > "$OUT/env.txt" 2>&1
# the launch path: fakes, the real DLPack reader (torch >= 2.10), and GPU tests of launches
timeout 280 python3 -m pytest -q -x -p no:cacheprovider tests/cuda_runtime tests/cuda/test_cuda_interop.py \
    tests/cuda/test_cuda_numpy.py tests/cuda/test_cuda_streams.py tests/cuda/test_cuda_device_array.py \
    tests/cuda/test_cuda_dynamic_shared.py > "$OUT/tests.txt" 2>&1
echo "rc $?" >> "$OUT/tests.txt"
# host cost of a cached call on real torch tensors: old and new alternated, 3 rounds
for r in 1 2 3; do
  for t in .devrun/lines26/old .; do
    name=$([ "$t" = . ] && echo new || echo old)
    (cd "$t" && timeout 100 python3 benchmarks/launch_host.py --real-torch) > "$OUT/launch_torch_${r}_$name.txt" 2>&1
  done
done
for t in .devrun/lines26/old .; do
  name=$([ "$t" = . ] && echo new || echo old)
  (cd "$t" && timeout 100 python3 benchmarks/launch_host.py --real-cupy) > "$OUT/launch_cupy_$name.txt" 2>&1
done
