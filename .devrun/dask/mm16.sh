#!/bin/bash
# Issue 29 session 21: the compute-bound scaling target on the 16-core host (8 workers vs 1 on a
# matmul whose block products dominate: 6144^2 in 1536^2 blocks, 64 products of 7.2 GFLOP), plus
# numpy's memory bandwidth in k processes (why memory-bound graphs scale less).  Results in $OUT.
set -u
OUT=${OUT:-/tmp/mm16}; mkdir -p "$OUT"
W=.devrun/dask/wheels
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$W"/*.whl
export PYTHONPATH=$PWD:/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu >/dev/null 2>&1
unset PYTHONDONTWRITEBYTECODE
export PYTHONUNBUFFERED=1 KDSL_CACHE_DIR=/tmp/kdsl-cache-mm16
{ nproc; grep -m1 "model name" /proc/cpuinfo; } | tee "$OUT/host16.txt"
timeout 300 python3 benchmarks/dask.py --workers 8,1,2,4 --stream-workers 8,1 --size 6144 --chunk 1536 \
   --mm-size 6144 --mm-chunk 1536 --repeat 1 --deadline-s 240 --no-fresh-worker --json "$OUT/mm16.json" 2>&1 \
   | grep -v "^\s*$" | tee "$OUT/mm16.txt"
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/bw16.txt"
import multiprocessing as mp, time, numpy as np
def work(q, n):
    a = np.ones(n, np.float32); b = np.ones(n, np.float32); c = np.empty_like(a)
    np.add(a, b, out=c); q.get()
    t = time.perf_counter(); reps = 10
    for _ in range(reps): np.add(a, b, out=c)
    return
def run(k, n=1 << 26):
    # k processes, each streaming 3 x 256 MB per add (read a, b, write c), started together
    ctx = mp.get_context("fork"); q = ctx.Queue(); ev = []
    ps = [ctx.Process(target=work, args=(q, n)) for _ in range(k)]
    for p in ps: p.start()
    time.sleep(2.0)
    t = time.perf_counter()
    for _ in ps: q.put(1)
    for p in ps: p.join()
    dt = time.perf_counter() - t
    return k * 10 * 3 * n * 4 / dt / 1e9
base = None
for k in (1, 2, 4, 8, 16):
    gb = run(k); base = base or gb
    print(f"numpy a+b, {k:2d} processes: {gb:6.1f} GB/s aggregate ({gb / base:4.2f}x one process)", flush=True)
PY
