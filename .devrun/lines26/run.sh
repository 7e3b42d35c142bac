#!/bin/bash
# lines26 (issue 26, the call path's lines): a check on one H200 with torch and CuPy.
# Run from the repository root of the branch h/lines26 (or main after its merge); writes under
# $OUT.  main at 1c00547 (the tree before) measured 4.0-5.9 us (min) for add(a, b, out=c) with
# --real-torch on the H200 of session 21 (notes/callpath_lines.md); where an old tree is in
# .devrun/lines26/old (kdsl, kdsl_cpu, kdsl_cuda, benchmarks) it is measured alternately.
OUT=${OUT:-/tmp/lines26-out}; mkdir -p "$OUT"
export KDSL_CACHE_DIR=$(mktemp -d); unset PYTHONDONTWRITEBYTECODE
{ nvidia-smi -L; python3 -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'exchange api', getattr(torch.Tensor, '__dlpack_c_exchange_api__', None) is not None)"
  python3 -c "import cupy; print('cupy', cupy.__version__)"; } > "$OUT/env.txt" 2>&1
# the launch path: fakes, the real DLPack reader (torch >= 2.10), GPU tests of launches
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/cuda_runtime tests/cuda/test_cuda_interop.py \
    tests/cuda/test_cuda_numpy.py tests/cuda/test_cuda_streams.py tests/cuda/test_cuda_device_array.py \
    tests/cuda/test_cuda_dynamic_shared.py tests/cuda/test_cuda_core.py > "$OUT/tests.txt" 2>&1
echo "rc $?" >> "$OUT/tests.txt"
trees=.; [ -d .devrun/lines26/old/kdsl ] && trees=".devrun/lines26/old ."
for r in 1 2 3; do
  for t in $trees; do
    name=$([ "$t" = . ] && echo new || echo old)
    (cd "$t" && timeout 100 python3 benchmarks/launch_host.py --real-torch) > "$OUT/torch_${r}_$name.txt" 2>&1
  done
done
for t in $trees; do
  name=$([ "$t" = . ] && echo new || echo old)
  (cd "$t" && timeout 100 python3 benchmarks/launch_host.py --real-cupy) > "$OUT/cupy_$name.txt" 2>&1
  (cd "$t" && KDSL_CUDA_NATIVE_LAUNCH=0 timeout 100 python3 benchmarks/launch_host.py --real-torch) \
      > "$OUT/torch_ctypes_$name.txt" 2>&1
done
tail -3 "$OUT/tests.txt"; head -8 "$OUT"/torch_*_new.txt
