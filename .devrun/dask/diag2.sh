#!/bin/bash
# Issue 29: diagnose 2-GPU scaling (bash .devrun/dask/diag2.sh on nvidia-h200-x2; carry .devrun/dask/wheels)
set -u
OUT=${OUT:-/tmp/diag2}; mkdir -p "$OUT"
W=.devrun/dask/wheels
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$W"/*.whl
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda > "$OUT/pip.txt" 2>&1
export PYTHONPATH=$PWD:$PWD/.devrun/dask:/tmp/site
unset PYTHONDONTWRITEBYTECODE
export PYTHONUNBUFFERED=1 KDSL_CACHE_DIR=/tmp/kdsl-cache-diag2
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
timeout 420 python3 .devrun/dask/diag2.py "$OUT" ${K:-16384} 2>&1 | grep -v "^$" | tee "$OUT/diag2.txt"
