"""kdsl on Dask (issue 29 item 6): kdsl chunks against numpy chunks under the same Dask graph,
and scaling over 1/2/4/8 process workers of one thread each.

    python benchmarks/dask.py [--workers 1,2,4,8] [--size 8192] [--chunk 1024]
                              [--mm-size 4096] [--mm-chunk 1024] [--repeat 3] [--backend cpu]
                              [--threads-check] [--big-gb 64 --big-workers 8 --big-chunk 8192]
                              [--deadline-s 330] [--no-fresh-worker] [--json out.json]

Cases (inputs generated chunk by chunk on the workers, ``dask.array.random`` uniform [0, 1)
float32, then persisted so that the timed part is the computation):

- ``box3x3``: a 3x3 box stencil (valid: ``(n-2, n-2)``), kdsl through ``kdsl.dask`` (halo of 2
  after each block) against ``map_overlap``-style numpy blocks over the same overlapped array;
- ``softmax``: a row-wise softmax over row blocks (kdsl: blockwise) against numpy blocks;
- ``matmul``: ``A @ B`` with square blocks: kdsl's contraction (a kdsl chunk kernel per block
  pair and a tree of kdsl sums) against ``dask.array``'s ``@`` on numpy blocks (BLAS, one
  thread per worker: the nanny sets OMP/OPENBLAS/MKL_NUM_THREADS=1).

Each result is reduced to a scalar by the same ``.sum()`` in both versions (no transfer of
the array to the client); the two scalars must agree (``ok``).

``--big-gb G``: the issue's out-of-core workload, never persisted: a ``G`` GB float32 array
generated chunk by chunk inside the graph (``--big-cols`` wide; square ``--big-chunk`` chunks
for ``box3x3``, row blocks of whole rows for ``softmax``), reduced by ``.sum()``, on
``--big-workers`` workers (one run each: kdsl, numpy, and ``gen``: the generation and the sum
alone, which both versions pay); and on one worker (``--big-weak-gb``, default
``G / big-workers`` GB: weak scaling, ``weak_speedup``: GB/s on w workers over GB/s on one, w
ideal).  ``net`` times subtract ``gen``.

Reports per worker count: seconds (median of ``--repeat``), kdsl / numpy speed-up, the chunk
tasks' compute seconds (task stream, one more run with the graph unfused), and scaling
efficiency ``T(1) / (w T(w))``.  Then ``fresh worker``: a worker
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
import math  # noqa: E402
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
    from dask.base import tokenize
    ext = overlap(X, depth={0: (0, 2), 1: (0, 2)}, boundary="none")
    chunks = tuple(c[:-1] + (c[-1] - 2,) for c in X.chunks)
    return da.map_blocks(np_box3x3, ext, chunks=chunks, dtype=X.dtype,
                         name="np_box3x3-" + tokenize(ext))


def _numpy_softmax(R):
    """The numpy version of ``softmax`` under the same graph: blocks of whole rows."""
    from dask.base import tokenize
    return R.map_blocks(np_softmax, name="np_softmax-" + tokenize(R))


def _time(fn, repeat, first=None, tasks=None):
    """Median seconds of ``repeat`` runs after a warm one (its value appended to ``first``);
    ``tasks``: a dict that gets the workers' compute seconds per task name, from one more run
    with the graph unfused (``optimize_graph=False``: the kernel tasks apart from the overlap
    copies and the sum that Dask fuses with them)."""
    v = fn()    # compiles (kdsl) / warms the workers
    if first is not None:
        first.append(float(v))
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    if tasks is not None:
        with _stream(tasks):
            fn(optimize_graph=False)
    return statistics.median(ts)


class _stream:
    """Collects the task stream of the runs inside: compute seconds per task name (the key's
    prefix: ``box3x3-blocks`` for kdsl's kernel tasks, ``np_box3x3`` for numpy's), / runs."""

    def __init__(self, into, runs=1):
        self.into, self.runs = into, runs

    def __enter__(self):
        if self.into is not None:
            from distributed import get_task_stream
            self.cm = get_task_stream()
            self.ts = self.cm.__enter__()
        return self

    def __exit__(self, *exc):
        if self.into is None:
            return False
        self.cm.__exit__(*exc)
        from dask.utils import key_split
        for t in self.ts.data:
            name = key_split(t["key"])
            d = sum(ss["stop"] - ss["start"] for ss in t["startstops"]
                    if ss["action"] == "compute")
            self.into[name] = self.into.get(name, 0.0) + d / self.runs
        return False


def _kernel_tasks(tasks, prefix):
    """Compute seconds of the tasks whose name starts with ``prefix`` (the chunk kernels)."""
    return sum(v for k, v in tasks.items() if k.startswith(prefix))


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


def _host():
    """CPU facts that explain scaling: logical CPUs, physical cores (SMT), the model."""
    info = {"cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0))}
    try:
        text = open("/proc/cpuinfo").read()
        cores, model = set(), None
        for block in text.strip().split("\n\n"):
            kv = dict(ln.split(":", 1) for ln in block.splitlines() if ":" in ln)
            kv = {k.strip(): v.strip() for k, v in kv.items()}
            cores.add((kv.get("physical id"), kv.get("core id")))
            model = model or kv.get("model name")
        info.update(physical_cores=len(cores), model=model)
    except OSError:
        pass
    return info


def _check(a, b, rtol=1e-4):
    """Whether two scalars from the kdsl and numpy graphs agree."""
    return bool(abs(a - b) <= rtol * max(abs(a), abs(b), 1.0))


def _once(fn):
    t = time.perf_counter()
    v = fn()
    return time.perf_counter() - t, float(v)


def _big(args, gb, be):
    """The out-of-core cases over a ``gb`` GB float32 array generated chunk by chunk inside
    the graph (never persisted, never held whole): seconds and results, one run each."""
    import dask.array as da
    c = args.big_chunk
    n_el = gb * 1e9 / 4
    cols = args.big_cols
    # box3x3: rows of big-cols, square chunks; softmax: row blocks of whole rows, as large as
    # the square chunks; both at least ``gb`` (a whole number of chunks)
    n = cols
    rb = math.ceil(n_el / cols / c) * c
    rc = max(1, (c * c) // cols)
    rows = math.ceil(n_el / cols / rc) * rc
    X = da.random.default_rng(7).random((rb, n), chunks=(c, c), dtype=np.float32)
    R = da.random.default_rng(8).random((rows, cols), chunks=(rc, cols), dtype=np.float32)
    out = {"box3x3": {"shape": [rb, n], "chunk": [c, c], "gb": rb * n * 4 / 1e9},
           "softmax": {"shape": [rows, cols], "chunk": [rc, cols], "gb": rows * cols * 4 / 1e9}}
    # warm: the same kernels on a small array of the same chunk layout (compiled or loaded
    # from the disk cache in every worker before the timed runs)
    Xs = da.random.default_rng(9).random((2 * c, 2 * c), chunks=(c, c), dtype=np.float32)
    Rs = da.random.default_rng(9).random((2 * rc, cols), chunks=(rc, cols), dtype=np.float32)
    box3x3(Xs, backend=be).sum().compute()
    softmax(Rs, backend=be).sum().compute()
    for name, arr, fk, fn in [
            ("box3x3", X, lambda: box3x3(X, backend=be).sum().compute(),
             lambda: _numpy_box(X).sum().compute()),
            ("softmax", R, lambda: softmax(R, backend=be).sum().compute(),
             lambda: _numpy_softmax(R).sum().compute())]:
        r = out[name]
        r["gen_s"], _ = _once(lambda: arr.sum().compute())
        r["kdsl_s"], vk = _once(fk)
        r["numpy_s"], vn = _once(fn)
        r["kdsl_value"], r["numpy_value"] = vk, vn
        r["ok"] = _check(vk, vn) and (name != "softmax" or _check(vk, rows, 1e-3))
        r["kdsl_net_s"] = r["kdsl_s"] - r["gen_s"]
        r["numpy_net_s"] = r["numpy_s"] - r["gen_s"]
        print(f"  big {name:8s} {r['gb']:6.1f} GB: gen {r['gen_s']:7.2f} s  kdsl "
              f"{r['kdsl_s']:7.2f} s  numpy {r['numpy_s']:7.2f} s  kdsl/numpy "
              f"{r['numpy_s'] / r['kdsl_s']:5.2f}x (net of gen "
              f"{r['numpy_net_s'] / max(r['kdsl_net_s'], 1e-9):5.2f}x)"
              f"{'' if r['ok'] else '  RESULTS DISAGREE'}", flush=True)
    return out


def run(args) -> dict:
    from distributed import Client, LocalCluster, wait
    import dask.array as da
    t_start = time.perf_counter()
    results = {"host": platform.node(), **_host(), "args": vars(args), "cases": {},
               "big": {}, "skipped": []}

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1, default=str)

    def late(what):
        if args.deadline_s and time.perf_counter() - t_start > args.deadline_s:
            results["skipped"].append(what)
            print(f"deadline: skipped {what}", flush=True)
            return True
        return False
    n, c = args.size, args.chunk
    env = {"PYTHONPATH": _ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    be = args.backend
    bw = args.big_workers or max(args.workers)
    for w in args.workers:
        if late(f"workers={w}"):
            continue
        with LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                          dashboard_address=None, env=env) as cl, Client(cl) as client:
            results.setdefault("kdsl_threads_per_worker", {})[w] = sorted(
                set(client.run(_threads).values()))
            if n:
                rng = da.random.default_rng(1)
                X = rng.random((n, n), chunks=(c, c), dtype=np.float32).persist()
                R = rng.random((n * 4, n // 4), chunks=(c, n // 4), dtype=np.float32).persist()
                A = rng.random((args.mm_size,) * 2, chunks=args.mm_chunk,
                               dtype=np.float32).persist()
                B = rng.random((args.mm_size,) * 2, chunks=args.mm_chunk,
                               dtype=np.float32).persist()
                wait([X, R, A, B])
                cases = {
                    "box3x3": (lambda **kw: box3x3(X, backend=be).sum().compute(**kw),
                               lambda **kw: _numpy_box(X).sum().compute(**kw)),
                    "softmax": (lambda **kw: softmax(R, backend=be).sum().compute(**kw),
                                lambda **kw: _numpy_softmax(R).sum().compute(**kw)),
                    "matmul": (lambda **kw: matmul(A, B, backend=be).sum().compute(**kw),
                               lambda **kw: (A @ B).sum().compute(**kw)),
                }
                for name, (fk, fn) in cases.items():
                    vals = []
                    ktasks = ntasks = None
                    if args.stream_workers is None or w in args.stream_workers:
                        ktasks, ntasks = {}, {}
                    tk = _time(fk, args.repeat, vals, ktasks)
                    tn = _time(fn, args.repeat, vals, ntasks)
                    ok = _check(*vals, 1e-3)
                    kc = _kernel_tasks(ktasks or {}, f"{name}-blocks")
                    nc = _kernel_tasks(ntasks or {}, f"np_{name}")
                    results["cases"].setdefault(name, {})[w] = {
                        "kdsl_s": tk, "numpy_s": tn, "ok": ok, "kdsl_tasks_s": ktasks,
                        "numpy_tasks_s": ntasks, "kdsl_chunks_s": kc, "numpy_chunks_s": nc}
                    chunks = (f"  chunk tasks: kdsl {kc:7.3f} s numpy {nc:7.3f} s "
                              f"({nc / kc:5.2f}x)" if kc and nc else "")
                    print(f"{name:8s} workers={w}: kdsl {tk:8.3f} s  numpy {tn:8.3f} s  "
                          f"kdsl/numpy {tn / tk:5.2f}x{chunks}"
                          f"{'' if ok else '  RESULTS DISAGREE'}", flush=True)
                del X, R, A, B
            # the out-of-core workload: G GB on bw workers, G / bw GB on one (weak scaling)
            if args.big_gb and w in (1, bw) and not late(f"big workers={w}"):
                gb = args.big_gb if w == bw else (args.big_weak_gb or args.big_gb / bw)
                results["big"][w] = _big(args, gb, be)
            save()
    if args.threads_check and args.workers and n and not late("threads check"):
        # oversubscription: the largest cluster again, each worker's kdsl given every core
        # (KDSL_NUM_THREADS overrides the nanny's OMP_NUM_THREADS=1)
        w = max(args.workers)
        env2 = dict(env, KDSL_NUM_THREADS=str(os.cpu_count()))
        with LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                          dashboard_address=None, env=env2) as cl, Client(cl) as client:
            seen = sorted(set(client.run(_threads).values()))
            X = da.random.default_rng(1).random((n, n), chunks=(c, c),
                                                dtype=np.float32).persist()
            wait([X])
            t_over = _time(lambda: box3x3(X, backend=be).sum().compute(), args.repeat)
        t_one = results["cases"]["box3x3"][w]["kdsl_s"]
        results["threads_check"] = {"workers": w, "kdsl_threads": seen, "oversubscribed_s": t_over,
                                    "budget_s": t_one}
        print(f"\nthreads: {w} workers, kdsl threads per worker {seen} (KDSL_NUM_THREADS="
              f"{os.cpu_count()}): box3x3 {t_over:.3f} s against {t_one:.3f} s with the "
              "workers' budget (one kdsl thread per worker thread)")
    print("\nscaling T(1) / T(w) (efficiency T(1) / (w T(w))):")
    for name, per in results["cases"].items():
        if 1 not in per:
            continue
        for w, r in sorted(per.items()):
            r["kdsl_eff"] = per[1]["kdsl_s"] / (w * r["kdsl_s"])
            r["numpy_eff"] = per[1]["numpy_s"] / (w * r["numpy_s"])
            print(f"  {name:8s} w={w:2d}: kdsl {per[1]['kdsl_s'] / r['kdsl_s']:5.2f}x "
                  f"({r['kdsl_eff']:.2f})  numpy {per[1]['numpy_s'] / r['numpy_s']:5.2f}x "
                  f"({r['numpy_eff']:.2f})")
    if 1 in results["big"] and bw in results["big"] and bw != 1:
        print(f"\nout of core, weak scaling: one worker on {results['big'][1]['box3x3']['gb']:.1f}"
              f" GB against {bw} workers on {results['big'][bw]['box3x3']['gb']:.1f} GB "
              f"(throughput in GB/s, {bw} workers over one):")
        for name in ("box3x3", "softmax"):
            one, many = results["big"][1][name], results["big"][bw][name]
            for k in ("kdsl", "numpy", "gen"):
                sp = (many["gb"] / many[f"{k}_s"]) / (one["gb"] / one[f"{k}_s"])
                many[f"{k}_weak_speedup"] = sp
                print(f"  {name:8s} {k:5s}: {sp:5.2f}x (efficiency {sp / bw:.2f}); "
                      f"{many['gb'] / many[f'{k}_s']:6.2f} GB/s on {bw} workers")
    save()
    if args.fresh_worker and not late("fresh worker"):
        _fresh_worker(args, env, results)
    save()
    return results


def _fresh_worker(args, env, results):
    """A fresh worker, warm shared disk cache: the first task's kdsl time (the clusters above
    warmed the cache for this kernel and signature).  kdsl is already imported there: the
    spawned worker re-imports this script; .devrun/dask/first_task.py measures a worker that
    imports kdsl for its first task."""
    from distributed import Client, LocalCluster
    for _ in range(2):      # the first fills the cache for the 64 x 64 call
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                          dashboard_address=None, env=env) as cl, Client(cl) as client:
            got = client.submit(_first_task, args.backend, pure=False).result()
    results["fresh_worker"] = got
    # the same first call in a fresh plain process, for reference
    import subprocess
    src = ("import sys, time; sys.path.insert(0, %r); t0 = time.perf_counter()\n"
           "import numpy as np, kdsl as kd\nt1 = time.perf_counter()\n"
           "@kd.kernel\ndef rowsoftmax(A):\n"
           "    e = np.exp(A - A.max(axis=1, keepdims=True))\n"
           "    return e / e.sum(axis=1, keepdims=True)\n"
           "x = np.ones((64, 64), np.float32); t2 = time.perf_counter()\n"
           "rowsoftmax(x, backend=%r); t3 = time.perf_counter()\n"
           "print(t1 - t0, t3 - t2)\n") % (_ROOT, args.backend)
    penv = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=penv)
    imp, first = (float(v) for v in out.stdout.split())
    results["fresh_process"] = {"import_kdsl_s": imp, "first_call_s": first}
    print(f"\nfirst task on a fresh worker, warm cache: first call {got['first_call_s'] * 1e3:.1f}"
          f" ms (kdsl already imported by the spawned worker: "
          f"{got['import_kdsl_s'] * 1e3:.1f} ms); a fresh plain process: import kdsl "
          f"{imp * 1e3:.1f} ms, first call {first * 1e3:.1f} ms "
          "(target: <= 50 ms of kdsl time in the first task)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,2,4,8",
                    type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--size", type=int, default=8192, help="box3x3 arrays are size x size; "
                    "softmax 4*size x size/4 (0: no persisted cases)")
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--mm-size", type=int, default=4096)
    ap.add_argument("--mm-chunk", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--threads-check", action="store_true",
                    help="also run box3x3 on the largest cluster with KDSL_NUM_THREADS=all "
                    "cores in every worker (oversubscribed), against the default")
    ap.add_argument("--stream-workers", default=None,
                    type=lambda s: [int(x) for x in s.split(",")],
                    help="worker counts that get the unfused run with the task stream "
                    "(default: all)")
    ap.add_argument("--big-gb", type=float, default=0.0, help="out-of-core cases over an "
                    "array of this many GB generated chunk by chunk (0: none)")
    ap.add_argument("--big-workers", type=int, default=0,
                    help="workers for --big-gb (default: the most in --workers)")
    ap.add_argument("--big-weak-gb", type=float, default=0.0, help="GB for the one-worker "
                    "run of --big-gb (default: big-gb / big-workers)")
    ap.add_argument("--big-chunk", type=int, default=8192)
    ap.add_argument("--big-cols", type=int, default=16384)
    ap.add_argument("--deadline-s", type=float, default=0.0, help="skip what would start "
                    "after this many seconds (the JSON says what was skipped)")
    ap.add_argument("--no-fresh-worker", dest="fresh_worker", action="store_false")
    ap.add_argument("--json", default=None, help="where to write the results (default: "
                    "benchmarks/results/dask-<time>.json)")
    args = ap.parse_args(argv)
    args.json = args.json or os.path.join(_HERE, "results", f"dask-{int(time.time())}.json")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    run(args)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
