"""kdsl on Dask (issue 29 item 6): kdsl chunks against numpy chunks under the same Dask graph,
and scaling over 1/2/4/8 process workers of one thread each.

    python benchmarks/dask.py [--workers 1,2,4,8] [--size 8192] [--chunk 1024]
                              [--mm-size 4096] [--mm-chunk 1024] [--repeat 3] [--backend cpu]
                              [--threads-check]

Cases (inputs generated chunk by chunk on the workers, ``dask.array.random``, then persisted
so that the timed part is the computation):

- ``box3x3``: a 3x3 box stencil (valid: ``(n-2, n-2)``), kdsl through ``kdsl.dask`` (halo of 2
  after each block) against ``map_overlap``-style numpy blocks over the same overlapped array;
- ``softmax``: a row-wise softmax over row blocks (kdsl: blockwise) against numpy blocks;
- ``matmul``: ``A @ B`` with square blocks: kdsl's contraction (a kdsl chunk kernel per block
  pair and a tree of kdsl sums) against ``dask.array``'s ``@`` on numpy blocks (BLAS, one
  thread per worker: the nanny sets OMP/OPENBLAS/MKL_NUM_THREADS=1).

Each result is reduced to a scalar by the same ``.sum()`` in both versions (no transfer of
the array to the client).  Reports per worker count: seconds (median of ``--repeat``), kdsl /
numpy speed-up, and scaling efficiency ``T(1) / (w T(w))``.  Then ``fresh worker``: a worker
started after the disk cache is warm runs one kdsl task; the task reports the time of
``import kdsl`` and of the first call in the worker (the kdsl time of the first task).
Targets (16-core host): 8 workers >= 6x one worker on compute-bound cases; kdsl chunks >= 3x
numpy chunks; first task on a fresh worker with a warm shared cache <= 50 ms of kdsl time.
Writes JSON under benchmarks/results/.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path.pop(0)     # this file is named dask.py: `import dask` must find the library
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _ROOT)

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import kdsl as kd  # noqa: E402


@kd.kernel
def box3x3(A):
    n, m = A.shape
    return kd.compute((n - 2, m - 2), lambda i, j: (
        A[i, j] + A[i, j + 1] + A[i, j + 2] + A[i + 1, j] + A[i + 1, j + 1] + A[i + 1, j + 2]
        + A[i + 2, j] + A[i + 2, j + 1] + A[i + 2, j + 2]))


@kd.kernel
def softmax(A):
    e = np.exp(A - A.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def matmul(A, B):
    return A @ B


def np_box3x3(b):
    return (b[:-2, :-2] + b[:-2, 1:-1] + b[:-2, 2:] + b[1:-1, :-2] + b[1:-1, 1:-1]
            + b[1:-1, 2:] + b[2:, :-2] + b[2:, 1:-1] + b[2:, 2:])


def np_softmax(b):
    e = np.exp(b - b.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _numpy_box(X):
    """The numpy version under the graph kdsl.dask builds: halo of 2 after each block."""
    import dask.array as da
    from dask.array.overlap import overlap
    ext = overlap(X, depth={0: (0, 2), 1: (0, 2)}, boundary="none")
    chunks = tuple(c[:-1] + (c[-1] - 2,) for c in X.chunks)
    return da.map_blocks(np_box3x3, ext, chunks=chunks, dtype=X.dtype)


def _time(fn, repeat):
    fn()        # compiles (kdsl) / warms the workers
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _threads():
    from kdsl import threads
    return threads.get_num_threads()


def _first_task(backend):
    """In a fresh worker: seconds of ``import kdsl`` and of the first kdsl call."""
    t0 = time.perf_counter()
    import kdsl as kd_
    t1 = time.perf_counter()

    @kd_.kernel
    def rowsoftmax(A):      # the same graph as ``softmax``: its disk cache entry is warm
        e = np.exp(A - A.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    x = np.ones((64, 64), np.float32)
    t2 = time.perf_counter()
    rowsoftmax(x, backend=backend)
    t3 = time.perf_counter()
    return {"import_kdsl_s": t1 - t0, "first_call_s": t3 - t2, "kdsl": kd_.__file__}


def run(args) -> dict:
    import dask.array as da
    from distributed import Client, LocalCluster, wait
    results = {"host": platform.node(), "cpus": os.cpu_count(), "args": vars(args), "cases": {}}
    n, c = args.size, args.chunk
    env = {"PYTHONPATH": _ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rows = []
    for w in args.workers:
        with LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                          dashboard_address=None, env=env) as cl, Client(cl) as client:
            rng = da.random.default_rng(1)
            X = rng.standard_normal((n, n), chunks=(c, c), dtype=np.float32).persist()
            R = rng.standard_normal((n * 4, n // 4), chunks=(c, n // 4),
                                    dtype=np.float32).persist()
            A = rng.standard_normal((args.mm_size,) * 2, chunks=args.mm_chunk,
                                    dtype=np.float32).persist()
            B = rng.standard_normal((args.mm_size,) * 2, chunks=args.mm_chunk,
                                    dtype=np.float32).persist()
            wait([X, R, A, B])
            be = args.backend
            cases = {
                "box3x3": (lambda: box3x3(X, backend=be).sum().compute(),
                           lambda: _numpy_box(X).sum().compute()),
                "softmax": (lambda: softmax(R, backend=be).sum().compute(),
                            lambda: R.map_blocks(np_softmax).sum().compute()),
                "matmul": (lambda: matmul(A, B, backend=be).sum().compute(),
                           lambda: (A @ B).sum().compute()),
            }
            results.setdefault("kdsl_threads_per_worker", {})[w] = sorted(
                set(client.run(_threads).values()))
            for name, (fk, fn) in cases.items():
                tk, tn = _time(fk, args.repeat), _time(fn, args.repeat)
                results["cases"].setdefault(name, {})[w] = {"kdsl_s": tk, "numpy_s": tn}
                rows.append((name, w, tk, tn))
                print(f"{name:8s} workers={w}: kdsl {tk:8.3f} s  numpy {tn:8.3f} s  "
                      f"kdsl/numpy {tn / tk:5.2f}x", flush=True)
    if args.threads_check and args.workers:
        # oversubscription: the largest cluster again, each worker's kdsl given every core
        # (KDSL_NUM_THREADS overrides the nanny's OMP_NUM_THREADS=1)
        w = max(args.workers)
        env2 = dict(env, KDSL_NUM_THREADS=str(os.cpu_count()))
        with LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                          dashboard_address=None, env=env2) as cl, Client(cl) as client:
            seen = sorted(set(client.run(_threads).values()))
            X = da.random.default_rng(1).standard_normal(
                (n, n), chunks=(c, c), dtype=np.float32).persist()
            wait([X])
            t_over = _time(lambda: box3x3(X, backend=args.backend).sum().compute(), args.repeat)
        t_one = results["cases"]["box3x3"][w]["kdsl_s"]
        results["threads_check"] = {"workers": w, "kdsl_threads": seen, "oversubscribed_s": t_over,
                                    "budget_s": t_one}
        print(f"\nthreads: {w} workers, kdsl threads per worker {seen} (KDSL_NUM_THREADS="
              f"{os.cpu_count()}): box3x3 {t_over:.3f} s against {t_one:.3f} s with the "
              "workers' budget (one kdsl thread per worker thread)")
    print("\nscaling efficiency T(1) / (w T(w)):")
    for name, per in results["cases"].items():
        if 1 not in per:
            continue
        for w, r in sorted(per.items()):
            r["kdsl_eff"] = per[1]["kdsl_s"] / (w * r["kdsl_s"])
            r["numpy_eff"] = per[1]["numpy_s"] / (w * r["numpy_s"])
            print(f"  {name:8s} w={w}: kdsl {r['kdsl_eff']:.2f} "
                  f"({per[1]['kdsl_s'] / r['kdsl_s']:.2f}x)  numpy {r['numpy_eff']:.2f}")
    # a fresh worker, warm shared disk cache: the first task's kdsl time (the first cluster
    # warms the cache for this kernel and signature)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, env=env) as cl, Client(cl) as client:
        client.submit(_first_task, args.backend, pure=False).result()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, env=env) as cl, Client(cl) as client:
        got = client.submit(_first_task, args.backend, pure=False).result()
    results["fresh_worker"] = got
    # the same first call in a fresh plain process, for reference (a spawned worker has kdsl
    # imported already: multiprocessing's spawn re-imports this script, which imports kdsl)
    import subprocess
    src = ("import sys, time; sys.path.insert(0, %r); t0 = time.perf_counter()\n"
           "import numpy as np, kdsl as kd\nt1 = time.perf_counter()\n"
           "@kd.kernel\ndef rowsoftmax(A):\n"
           "    e = np.exp(A - A.max(axis=1, keepdims=True))\n"
           "    return e / e.sum(axis=1, keepdims=True)\n"
           "x = np.ones((64, 64), np.float32); t2 = time.perf_counter()\n"
           "rowsoftmax(x, backend=%r); t3 = time.perf_counter()\n"
           "print(t1 - t0, t3 - t2)\n") % (_ROOT, args.backend)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env)
    imp, first = (float(v) for v in out.stdout.split())
    results["fresh_process"] = {"import_kdsl_s": imp, "first_call_s": first}
    print(f"\nfirst task on a fresh worker, warm cache: first call {got['first_call_s'] * 1e3:.1f}"
          f" ms (kdsl already imported by the spawned worker: "
          f"{got['import_kdsl_s'] * 1e3:.1f} ms); a fresh plain process: import kdsl "
          f"{imp * 1e3:.1f} ms, first call {first * 1e3:.1f} ms "
          "(target: <= 50 ms of kdsl time in the first task)")
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,2,4,8",
                    type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--size", type=int, default=8192, help="box3x3 arrays are size x size; "
                    "softmax 4*size x size/4")
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--mm-size", type=int, default=4096)
    ap.add_argument("--mm-chunk", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--threads-check", action="store_true",
                    help="also run box3x3 on the largest cluster with KDSL_NUM_THREADS=all "
                    "cores in every worker (oversubscribed), against the default")
    ap.add_argument("--json", default=None, help="where to write the results (default: "
                    "benchmarks/results/dask-<time>.json)")
    args = ap.parse_args(argv)
    res = run(args)
    path = args.json or os.path.join(_HERE, "results", f"dask-{int(time.time())}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1, default=str)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
