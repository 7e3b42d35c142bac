#!/bin/bash
# Issue 29 (b): kdsl on Dask with CuPy chunks on 2 GPUs (helper dask29).  From the repository
# root on a 2-GPU machine (kind nvidia-h100-x2 or nvidia-h200-x2), results in $OUT:
#   bash .devrun/dask/gpu2.sh
# Device call: carry [".devrun/dask/wheels"] (dask, distributed, dask-cuda and their missing
# deps as wheels: the device has no network; CuPy, pynvml, cuda-core are there), timeout_s 600.
# ~2-3 minutes: correctness of each mapping on 2 GPUs, 1 vs 2 GPUs, an array 1.2x one GPU's
# memory across both (.devrun/dask/gpu2.py says what each part checks).
set -u
OUT=${OUT:-/tmp/dask_gpu2}
mkdir -p "$OUT"
W=${WHEELS:-.devrun/dask/wheels}
[ -d "$W" ] || W=.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$W"/*.whl || { echo "no wheels under $W"; exit 1; }
export PYTHONPATH=$PWD:/tmp/site
# kdsl, kdsl-cpu, kdsl-cuda installed (entry points: the workers find the cuda backend)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda \
    >"$OUT/pip.txt" 2>&1 || echo "pip install -e failed (see pip.txt): PYTHONPATH only"
unset PYTHONDONTWRITEBYTECODE
export PYTHONUNBUFFERED=1
export KDSL_CACHE_DIR=${KDSL_CACHE_DIR:-/tmp/kdsl-cache-gpu2}     # shared by the workers
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
  python3 -c "import dask, distributed, dask_cuda, cupy; print('dask', dask.__version__, 'distributed', distributed.__version__, 'dask_cuda', dask_cuda.__version__, 'cupy', cupy.__version__)"
  python3 -c "import kdsl as kd; print('kdsl backends', kd.backends())"; } 2>&1 | tee "$OUT/host.txt"
timeout 500 python3 .devrun/dask/gpu2.py --repeat 3 ${GPU2_ARGS:-} --json "$OUT/gpu2.json" 2>&1 \
    | tee "$OUT/gpu2.txt"
