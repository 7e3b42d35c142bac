"""Issue 29 (c): the first task on a fresh Dask worker with a warm shared disk cache, kdsl's
time only (trace, key, disk-cache load: not the computation).  Rerun it after a change to
kdsl's warm path; it needs dask[array] and distributed, no GPU.

    python3 .devrun/dask/first_task.py [--backend cpu] [--runs 3] [--json out.json]

What it does (this driver imports neither kdsl nor the kernels: a spawned worker re-imports
the driver, and must not find kdsl imported before its first task):
1. cold: a fresh one-worker LocalCluster, an empty KDSL_CACHE_DIR: the worker's first
   ``rowsoftmax`` call (``ft_kernels.direct``: first call minus a warm call = kdsl's time);
2. the kdsl.dask graphs below once on a fresh worker (cold: this fills the cache for their
   kernels, the derived step kernels too);
3. ``--runs`` times each: a fresh worker's first direct call (``direct``); a fresh worker's
   first kdsl.dask graphs: ``rowsoftmax`` blockwise and ``rowsum``'s tree (chunk kernel and
   aggregate derived from the graph), from the task stream: per step, the first task's
   compute time minus the median of the later ones (a step with one task: all of it);
4. the direct call in a fresh plain process, for reference; a profile of a fresh worker's
   first call (cProfile, cumulative).
The import of kdsl (when the worker unpickles its first task) is reported apart.
Target: <= 50 ms of kdsl time in the first task.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ROWS, COLS, CHUNK, CCHUNK = 2048, 1000, 256, 500   # 8 x 2 blocks of 256 x 500 float32

def _data():
    import numpy as np
    return np.random.default_rng(0).random((ROWS, COLS), dtype=np.float32)


def _cluster(env):
    from distributed import Client, LocalCluster
    cl = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, env=env)
    return cl, Client(cl)


def _direct(env, backend, fn="direct"):
    """A fresh worker's first direct call (``ft_kernels.direct``, or ``profiled``)."""
    import importlib
    cl, client = _cluster(env)
    try:
        mod = importlib.import_module("ft_kernels")     # here only to name the function:
        return client.submit(getattr(mod, fn), _data(), backend, pure=False).result()
    finally:
        client.close()
        cl.close()


def _steps(ts, prefixes):
    """Per task name prefix: first task's compute seconds, median of the rest, overhead."""
    from dask.utils import key_split
    per = {}
    for t in ts:
        name = key_split(t["key"])
        for p in prefixes:
            if name.startswith(p):
                for ss in t["startstops"]:
                    if ss["action"] == "compute":
                        per.setdefault(name, []).append((ss["start"], ss["stop"] - ss["start"]))
    out = {}
    for name, v in per.items():
        v.sort()
        first, rest = v[0][1], [d for _, d in v[1:]]
        med = statistics.median(rest) if rest else 0.0
        out[name] = {"tasks": len(v), "first_s": first, "rest_median_s": med,
                     "kdsl_first_s": first - med}
    return out


def _graphs(env, backend):
    """A fresh worker's first kdsl.dask graphs (blockwise, then a tree reduction)."""
    import dask.array as da
    from distributed import get_task_stream
    import importlib
    cl, client = _cluster(env)
    try:
        k = importlib.import_module("ft_kernels")
        x = _data()
        X = da.from_array(x, chunks=(CHUNK, COLS))
        Xc = da.from_array(x, chunks=(CHUNK, CCHUNK))      # rowsum across chunks: a tree
        # unfused graphs: the kernels' tasks keep their names in the task stream
        t0 = time.perf_counter()
        with get_task_stream() as ts:
            s = float(k.rowsoftmax(X, backend=backend).sum().compute(optimize_graph=False))
        t1 = time.perf_counter()
        with get_task_stream() as ts2:
            r = k.rowsum(Xc, backend=backend).compute(optimize_graph=False)
        t2 = time.perf_counter()
        ok = abs(s - ROWS) < 1e-2 * ROWS and float(abs(r - x.sum(1)).max()) < 1e-2
        steps = _steps(ts.data, ["rowsoftmax-"])
        steps.update(_steps(ts2.data, ["rowsum-"]))
        imp = client.run(k.imports)
        return {"ok": ok, "steps": steps, "softmax_graph_s": t1 - t0, "rowsum_graph_s": t2 - t1,
                "kdsl_first_s": sum(v["kdsl_first_s"] for v in steps.values()),
                "imports": next(iter(imp.values())),
                "loaded": next(iter(client.run(k.loaded).values())),
                "cache_stats": next(iter(client.run(k.stats, backend).values()))}
    finally:
        client.close()
        cl.close()


def _kdsl_import_under_dask():
    """Seconds spent importing kdsl's modules inside ``import distributed`` in a fresh process
    (Dask loads kdsl's ``dask.sizeof`` entry point): the sum of their own times from
    ``-X importtime``; 0 when none is imported."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import distributed"],
                         capture_output=True, text=True, timeout=120)
    total = 0
    for ln in out.stderr.splitlines():
        parts = [p.strip() for p in ln.split("|")]
        if len(parts) == 3 and parts[2].split(".")[0] in ("kdsl", "kdsl_cpu", "kdsl_cuda"):
            total += int(parts[0].split()[-1])
    return total / 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)     # timings need bytecode
    sys.path[:0] = [ROOT, HERE]
    cache = tempfile.mkdtemp(prefix="kdsl-first-task-")
    path = os.pathsep.join([ROOT, HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    os.environ["PYTHONPATH"] = path
    os.environ["KDSL_CACHE_DIR"] = cache
    env = {"PYTHONPATH": path, "KDSL_CACHE_DIR": cache}
    res = {"backend": args.backend, "cache_dir": cache, "python": sys.version.split()[0]}
    try:
        res["cold_direct"] = _direct(env, args.backend)
        # warms the cache for the graphs' kernels as workers see their blocks (a block sent
        # to a worker arrives contiguous; on the synchronous scheduler it would be a view)
        res["cold_graphs"] = _graphs(env, args.backend)
        res["direct"] = [_direct(env, args.backend) for _ in range(args.runs)]
        res["graphs"] = [_graphs(env, args.backend) for _ in range(args.runs)]
        res["profile"] = _direct(env, args.backend, "profiled")
        src = (f"import sys, json; sys.path[:0] = [{ROOT!r}, {HERE!r}]\n"
               "import numpy as np, ft_kernels as k\n"
               f"x = np.random.default_rng(0).random(({ROWS}, {COLS}), dtype=np.float32)\n"
               f"print(json.dumps(k.direct(x, {args.backend!r})))\n")
        res["plain_process"] = [json.loads(subprocess.run(
            [sys.executable, "-c", src], capture_output=True, text=True, timeout=300,
            check=True).stdout) for _ in range(args.runs)]
        res["import_via_dask_s"] = _kdsl_import_under_dask()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    med = statistics.median
    c = res["cold_direct"]
    d = med(r["kdsl_first_s"] for r in res["direct"])
    di = med(r["import_kdsl_s"] for r in res["direct"])
    g = med(r["kdsl_first_s"] for r in res["graphs"])
    p = med(r["kdsl_first_s"] for r in res["plain_process"])
    pi = med(r["import_kdsl_s"] for r in res["plain_process"])
    res["summary"] = {"cold_first_call_kdsl_s": c["kdsl_first_s"], "warm_first_call_kdsl_s": d,
                      "warm_worker_import_kdsl_s": di, "warm_first_graphs_kdsl_s": g,
                      "plain_process_first_call_kdsl_s": p, "plain_process_import_kdsl_s": pi,
                      "graphs_ok": all(r["ok"] for r in res["graphs"])}
    print(f"backend {args.backend}, medians of {args.runs} fresh workers (kdsl time = first call "
          "minus a warm call):")
    print(f"  cold cache, first call in a fresh worker:   {c['kdsl_first_s'] * 1e3:8.1f} ms")
    print(f"  warm cache, first call in a fresh worker:   {d * 1e3:8.1f} ms "
          f"(+ import kdsl {di * 1e3:.1f} ms when the worker unpickles the task)")
    per = ", ".join("%s %.1f" % (n, v["kdsl_first_s"] * 1e3)
                    for n, v in res["graphs"][-1]["steps"].items())
    print(f"  warm cache, first kdsl.dask graphs' tasks:  {g * 1e3:8.1f} ms in all ({per} ms)")
    print(f"  warm cache, a fresh plain process:          {p * 1e3:8.1f} ms (+ import kdsl "
          f"{pi * 1e3:.1f} ms)")
    print(f"  heavy modules after a fresh worker's first call (warm cache): "
          f"{res['direct'][-1]['loaded_after_first']}; after four: "
          f"{res['direct'][-1]['loaded_after_four']}; calls (ms): "
          f"{[round(v * 1e3, 1) for v in res['direct'][-1]['calls_s']]}")
    print(f"  kdsl imported by Dask before the first task (dask.sizeof entry point): "
          f"{res['direct'][-1]['kdsl_preloaded']}; import distributed -> kdsl costs "
          f"{res['import_via_dask_s'] * 1e3:.1f} ms in a fresh process (-X importtime)")
    print(f"  target: <= 50 ms of kdsl time in the first task -> "
          f"{'met' if d <= 0.05 else 'NOT met'} (direct call)"
          f"{'' if res['summary']['graphs_ok'] else '; GRAPH RESULTS WRONG'}")
    print("\nprofile of a fresh worker's first call (warm cache; cProfile adds its own time):")
    print(res["profile"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
