"""kdsl's ``cpu`` backend next to numpy's BLAS and torch (issue 27 item 6).

    python benchmarks/cpu_neighbours.py [--quick] [--out FILE]

For each workload (matmul 64^3..1024^3, an elementwise add, a row softmax; float32,
default schedules, the default thread count) it times, as medians:

- ``quiet``: the kdsl call back to back (nothing else ran since the last call);
- ``after busy``: right after ~the same time of single-threaded Python work (the control:
  what running anything before costs on this machine -- caches, preemption by other
  processes -- without foreign worker threads);
- ``after numpy``: right after numpy's 1024^3 SGEMM (OpenBLAS, whose workers spin for a while
  after each call);
- ``after torch``: right after torch's 1024^3 SGEMM (its OpenMP workers spin too);
- ``numpy quiet`` / ``numpy after kdsl``: numpy's own version of the workload back to back and
  right after the kdsl call (does kdsl leave spinning threads behind?).

Ratios are time / quiet time (1.0: no cost; the issue's goal is at most 1.2); ``vs busy`` divides
by the control instead.  The JSON (``--out``, default benchmarks/results/cpu_neighbours-<host>.json)
has every time in seconds.  ``--quick`` shrinks sizes and repetitions (a smoke test);
``--launchers workers,omp --rounds 3`` compares kdsl's launchers (kdsl_cpu.parallel) in one
process, alternating them so that a change in the machine's load hits both.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# this checkout's kdsl and kdsl_cpu; not benchmarks/ itself (its cuda.py would shadow the
# cuda package that torch imports)
sys.path[:] = [ROOT, os.path.join(ROOT, "kdsl_cpu")] + [
    p for p in sys.path if os.path.abspath(p or ".") != HERE]

import kdsl as kd  # noqa: E402

try:
    import torch
except ImportError:   # the torch rows say "not installed"
    torch = None


@kd.kernel
def k_matmul(A, B):
    return A @ B


@kd.kernel
def k_add(a, b):
    return a + b


@kd.kernel
def k_softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def workloads(quick: bool):
    """``(name, kdsl call, numpy call, float64 check)`` for each size, tiny to large."""
    rng = np.random.default_rng(27)
    mm = (64, 128) if quick else (64, 128, 256, 512, 1024)
    adds = (1000, 100_000) if quick else (1000, 100_000, 1_000_000, 10_000_000)
    soft = ((64, 64),) if quick else ((64, 64), (256, 256), (1024, 1024), (4096, 1024))
    for n in mm:
        A, B = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        yield (f"matmul {n}^3", lambda be, A=A, B=B: k_matmul(A, B, backend=be),
               lambda A=A, B=B: A @ B,
               lambda A=A, B=B: A.astype(np.float64) @ B)
    for n in adds:
        a, b = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
        yield (f"add {n}", lambda be, a=a, b=b: k_add(a, b, backend=be), lambda a=a, b=b: a + b,
               lambda a=a, b=b: a.astype(np.float64) + b)
    for shape in soft:
        X = rng.standard_normal(shape, dtype=np.float32)
        yield (f"softmax {shape[0]}x{shape[1]}", lambda be, X=X: k_softmax(X, backend=be),
               lambda X=X: np_softmax(X), lambda X=X: np_softmax(X.astype(np.float64)))


def quiet_s(fn, reps: int) -> float:
    """Median seconds of ``fn()`` called back to back (after one untimed call)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def after_s(first, fn, reps: int) -> float:
    """Median seconds of ``fn()`` timed right after an untimed ``first()`` each time."""
    first(), fn()
    times = []
    for _ in range(reps):
        first()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def neighbours(quick: bool):
    """``{name: before-call}``: numpy's and torch's SGEMM, and busy Python of their length."""
    n = 256 if quick else 1024
    big = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    out = {"numpy": lambda: big @ big}
    if torch is not None:
        tbig = torch.from_numpy(big)
        out["torch"] = lambda: torch.mm(tbig, tbig)
    length = quiet_s(out["numpy"], 5)

    def busy():   # one thread, no worker threads left behind: the control
        end = time.perf_counter() + length
        while time.perf_counter() < end:
            pass
    out["busy"] = busy
    return out, length


def measure(kfn, nfn, before, reps):
    """One row's times (seconds) for the kdsl call ``kfn`` and numpy's ``nfn``."""
    row = {"quiet_s": quiet_s(kfn, reps)}
    for who, first in before.items():
        row[f"after_{who}_s"] = after_s(first, kfn, reps)
    row["numpy_quiet_s"] = quiet_s(nfn, reps)
    row["numpy_after_kdsl_s"] = after_s(kfn, nfn, reps)
    return row


def run(quick: bool, launchers=("auto",), rounds: int = 1):
    """Every workload on every launcher (kdsl_cpu.CPUBackend(threading=...)); with several
    rounds the launchers alternate and each time is the median over the rounds."""
    import kdsl_cpu
    backends = {name: kdsl_cpu.CPUBackend(threading=name) for name in launchers}
    before, length = neighbours(quick)
    reps = 5 if quick else 11
    rows = []
    for name, kfn, nfn, ref in workloads(quick):
        want = ref()
        for lname, be in backends.items():
            got = kfn(be)
            if not np.allclose(got, want, rtol=1e-3,
                               atol=1e-3 * max(1.0, float(np.abs(want).max()))):
                raise SystemExit(f"{name} ({lname}): kdsl's result is wrong")
        runs = {lname: [] for lname in backends}
        for _ in range(rounds):
            for lname, be in backends.items():
                runs[lname].append(measure(lambda: kfn(be), nfn, before, reps))
        for lname, got in runs.items():
            row = {"workload": name, "launcher": lname,
                   **{k: statistics.median(r[k] for r in got) for k in got[0]}}
            rows.append(row)
            print_row(row, flush=True)
    return {"host": platform.node(), "cpus": len(os.sched_getaffinity(0)),
            "threads": kd.get_num_threads(), "neighbour_s": length, "rounds": rounds,
            "launchers": list(launchers), "blas": _blas(), "rows": rows}


def _blas():
    try:
        from threadpoolctl import threadpool_info
        return [{k: p.get(k) for k in ("internal_api", "num_threads", "version")}
                for p in threadpool_info()]
    except ImportError:
        return None


def _ms(t):
    return "-" if t is None else f"{t * 1e3:9.3f}"


HEADER = (f"{'workload':<18}{'launcher':<9}{'quiet ms':>10}{'busy':>7}{'numpy':>7}{'torch':>7}"
          f"{'vs busy':>9}{'np quiet':>10}{'np/kdsl':>8}")


def print_row(row, flush=False):
    q = row["quiet_s"]

    def ratio(key, base=q):
        t = row.get(key)
        return "    -  " if t is None else f"{t / base:6.2f}x"
    worst = max(row.get(f"after_{w}_s") or 0 for w in ("numpy", "torch"))
    print(f"{row['workload']:<18}{row['launcher']:<9}{_ms(q):>10}{ratio('after_busy_s'):>7}{ratio('after_numpy_s'):>7}"
          f"{ratio('after_torch_s'):>7}{worst / row['after_busy_s']:8.2f}x"
          f"{_ms(row['numpy_quiet_s']):>10}"
          f"{row['numpy_after_kdsl_s'] / row['numpy_quiet_s']:7.2f}x", flush=flush)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--launchers", default="auto",
                    help="comma-separated CPUBackend(threading=...) values, e.g. workers,omp")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds per workload")
    args = ap.parse_args()
    print(f"threads {kd.get_num_threads()}; ratios: time after X / quiet time; 'vs busy': the "
          "worse of numpy/torch over the busy-Python control; np/kdsl: numpy after kdsl / quiet")
    print(HEADER)
    res = run(args.quick, tuple(args.launchers.split(",")), args.rounds)
    out = args.out or os.path.join(ROOT, "benchmarks", "results",
                                   f"cpu_neighbours-{platform.node()}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
