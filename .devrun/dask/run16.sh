#!/bin/bash
# Issue 29 (a) and (c) on a 16-core host (helper dask29).  From the repository root:
#   bash .devrun/dask/run16.sh                  (results in $OUT, else /tmp/dask16)
# Device call: carry [".devrun/dask/wheels"] (dask, distributed and their missing deps as
# wheels; the device has no network), no GPU needed (any kind), timeout_s 600.
# Budget: ~5 minutes wall: benchmarks/dask.py stops starting new parts after DEADLINE s.
#  - persisted cases (box3x3 and softmax 2.4 GB each in 64 / 32 chunks, matmul 3072^2 in
#    1024^2 blocks): workers 8,1,2,4,16 (8 and 1 first, so a slow host still gives the 8-vs-1
#    numbers), kdsl vs numpy chunks, chunk-task seconds from the task stream (8 and 1);
#  - the out-of-core workload: 64 GB float32 generated chunk by chunk inside the graph (never
#    persisted), box3x3 and row-wise softmax, each reduced by .sum(), on 8 workers; 4 GB on one
#    worker (weak scaling in GB/s);
#  - .devrun/dask/first_task.py: first task on a fresh worker, cold and warm shared cache.
# SMALL=1 runs the same steps scaled down (what was run on the 2-core dev host).
set -u
OUT=${OUT:-/tmp/dask16}
mkdir -p "$OUT"
W=${WHEELS:-.devrun/dask/wheels}
[ -d "$W" ] || W=.whl
if ! python3 -c "import distributed" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "$W"/*.whl || { echo "no wheels under $W"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
# kdsl installed as a user has it (its dask.sizeof entry point is then loaded by Dask)
python3 -c "import kdsl_cpu, importlib.metadata as m; m.version('kdsl')" 2>/dev/null || \
  python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu >/dev/null 2>&1 || \
  echo "kdsl not pip-installed: running from PYTHONPATH"
unset PYTHONDONTWRITEBYTECODE
export PYTHONUNBUFFERED=1
{ nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2
  python3 -c "import dask, distributed, numpy; print('dask', dask.__version__, 'distributed', distributed.__version__, 'numpy', numpy.__version__)"; } 2>&1 | tee "$OUT/host.txt"
if [ "${SMALL:-0}" = 1 ]; then
  sizes="--workers 2,1 --stream-workers 1 --big-workers 2 --size 4096 --chunk 2048 --mm-size 1024 --mm-chunk 512 --big-gb 1 --big-weak-gb 0.5 --big-chunk 2048 --big-cols 8192"
  DEADLINE=${DEADLINE:-200}
else
  sizes="--workers 8,1,2,4,16 --stream-workers 8,1 --big-workers 8 --size 24576 --chunk 3072 --mm-size 3072 --mm-chunk 1024 --big-gb 64 --big-weak-gb 4 --big-chunk 8192 --big-cols 16384"
  DEADLINE=${DEADLINE:-270}
fi
timeout 450 python3 benchmarks/dask.py $sizes --repeat 1 --deadline-s "$DEADLINE" \
    --no-fresh-worker --json "$OUT/dask16.json" 2>&1 | grep -v "^\s*$" | tee "$OUT/dask16.txt"
timeout 120 python3 .devrun/dask/first_task.py --runs 3 --json "$OUT/first_task.json" 2>&1 \
    | tee "$OUT/first_task.txt"
