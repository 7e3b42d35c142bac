"""kernel.tune against the default schedules: what a search finds, and what it costs.

    python3 benchmarks/tune.py cpu  [--budget 20] [--json out.json]
    python3 benchmarks/tune.py cuda [--budget 60] [--json out.json]   # torch (else CuPy) arrays

For each kernel (row sums, softmax, an elementwise chain, a matrix product) it tunes on the
backend with ``--budget`` seconds, then, in a fresh process sharing the cache
(``--fresh``, run automatically after the search), times the kernel as compiled from the
persisted winner against the default schedule (winners switched off with
``kdsl.tune.store.searching``), both checked against numpy.  Each line: default time, tuned
time, speedup, candidates tried / correct, search seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kdsl as kd  # noqa: E402
from kdsl.tune import search, store  # noqa: E402


def rowsum(A):
    return A.sum(axis=1)


def softmax(x):
    e = kd.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def chain(x, y):
    return kd.tanh(x * 0.5 + y) * x


def matmul(A, B):
    return A @ B


def cases(backend):
    rng = np.random.default_rng(0)
    big = backend != "cpu"
    n = 4096 if big else 1024
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    m = 1024 if big else 256
    return [("rowsum", rowsum, (f(n, n),)),
            ("softmax", softmax, (f(n, 1024),)),
            ("chain", chain, (f(n * 1024), f(n * 1024))),
            ("matmul", matmul, (f(m, m), f(m, m)))]


def device_args(args, backend):
    if backend != "cuda":
        return args
    try:
        import torch
        return tuple(torch.from_numpy(a).cuda() for a in args)
    except ImportError:
        import cupy
        return tuple(cupy.asarray(a) for a in args)


def search_all(backend, budget):
    out = {}
    for name, fn, args in cases(backend):
        k = kd.kernel(fn)
        dargs = device_args(args, backend)
        t0 = time.perf_counter()
        res = k.tune(*dargs, backend=backend, budget_s=budget, progress=True)
        ok = sum(t.status == "ok" for t in res.trials)
        out[name] = {"best": res.best, "best_s": res.best_s, "default_s": res.default_s,
                     "tried": len(res.trials), "correct": ok,
                     "failed": [(t.hints, t.status, t.detail[:200]) for t in res.trials
                                if t.status != "ok"],
                     "search_s": time.perf_counter() - t0, "device": res.device}
        print(f"{name:8} search: best {res.best} {res.best_s * 1e3:.3f} ms, default "
              f"{(res.default_s or float('nan')) * 1e3:.3f} ms, {ok}/{len(res.trials)} correct, "
              f"{out[name]['search_s']:.1f} s", flush=True)
    return out


def fresh(backend):
    """In a new process: time the persisted winners against the default schedules."""
    out = {}
    for name, fn, args in cases(backend):
        dargs = device_args(args, backend)
        ref = kd.kernel(fn)(*args, backend="numpy")
        be = kd.get_backend(backend)
        sync = search._sync_for(dargs, be)
        tuned = kd.kernel(fn)
        r = tuned(*dargs, backend=backend)
        assert not search.agree(r, ref), (name, search.agree(r, ref))
        with store.searching():           # winners off: the default schedule
            default = kd.kernel(fn)
            r = default(*dargs, backend=backend)
        assert not search.agree(r, ref), name
        deadline = time.perf_counter() + 30
        td = search.measure(lambda: default(*dargs, backend=backend), sync, 7, deadline)
        tt = search.measure(lambda: tuned(*dargs, backend=backend), sync, 7, deadline)
        td2 = search.measure(lambda: default(*dargs, backend=backend), sync, 7, deadline)
        td = min(td, td2)                 # alternated: default, tuned, default
        out[name] = {"default_s": td, "tuned_s": tt, "speedup": td / tt}
        print(f"{name:8} fresh process: default {td * 1e3:.3f} ms, tuned {tt * 1e3:.3f} ms, "
              f"{td / tt:.2f}x", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("backend", choices=["cpu", "cuda"])
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--json")
    ap.add_argument("--fresh", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.fresh:
        print(json.dumps(fresh(a.backend)))
        return
    print(f"kdsl tune benchmark on {a.backend} ({store.device_model(kd.get_backend(a.backend))}), "
          f"budget {a.budget} s per kernel", flush=True)
    res = {"search": search_all(a.backend, a.budget)}
    p = subprocess.run([sys.executable, __file__, a.backend, "--fresh"], capture_output=True,
                       text=True)
    sys.stdout.write(p.stdout.rsplit("\n", 2)[0] + "\n" if p.stdout else "")
    if p.returncode:
        sys.stderr.write(p.stderr)
        sys.exit(p.returncode)
    res["fresh"] = json.loads(p.stdout.strip().splitlines()[-1])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=repr)


if __name__ == "__main__":
    main()
