"""kdsl's ``cpu`` backend against Numba and numpy, in one run (issue #3's target table).

    python benchmarks/cpu.py [--quick] [--only NAME[,NAME]] [--threads N]

Every workload runs kdsl's *default* schedule (no hints) with all threads,
Numba as an expert writes it (``@njit(parallel=True, fastmath=True)`` with
``prange``: kdsl reassociates float reductions too) and numpy (OpenBLAS for
matmul), on the same fresh random inputs.  Each result is checked against
float64 numpy before it is timed.  The table shows medians, the ratio
peer-time / kdsl-time (above 1: kdsl is faster) and the target; the JSON
lands in benchmarks/results/cpu-<host>-<threads>t.json.

Cold compile runs in fresh subprocesses (kdsl with ``KDSL_CACHE=0``; Numba
without its cache) and times the first call of the row sum on a tiny array.
Overhead is the median cost of a cached call of ``a + b`` on 8 float32s.

Two cases measure how kdsl shares the machine (``pool``, ``interleaved``):

- ``pool``: one ``multiprocessing.Pool`` worker per usable core, each running an
  axpy in a loop, with kdsl's default threads against ``KDSL_NUM_THREADS=1``
  (and against libgomp's own spinning default, ``GOMP_SPINCOUNT=300000``);
  ratio = one-thread time / default time (below 1: the default loses);
- ``interleaved``: kdsl's SGEMM right after numpy's matmul in one process, and
  numpy's right after kdsl's, against the same call once the other library's
  idle workers have parked (``QUIET_S``); ratio = quiet / interleaved.  kdsl's
  idle workers sleep (kdsl_cpu.parallel), so numpy after kdsl should not lose;
  OpenBLAS's spin for ~0.1 s after each call (its ``OPENBLAS_THREAD_TIMEOUT``,
  read when numpy loads it, shortens that), which kdsl right after numpy pays;
  the same two rows follow from a fresh process with ``OPENBLAS_THREAD_TIMEOUT=4``.

``--quick`` shrinks every size (a smoke test of the harness, not a measurement).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# this checkout's kdsl and kdsl_cpu, not copies that may be installed in site-packages
CPU_DIR = os.path.join(ROOT, "kdsl_cpu")
sys.path[:0] = [ROOT, CPU_DIR]

import kdsl as kd  # noqa: E402

try:
    import numba
    from numba import njit, prange
except ImportError:  # the peer is optional for --quick smoke runs; the table says so
    numba = None


# ----------------------------------------------------------------- kdsl kernels (default schedules)
@kd.kernel
def k_rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def k_fullsum(A):
    return A.sum()


@kd.kernel
def k_conv3(A, W):
    n, m = A.shape
    ri = kd.reduce_axis(3, name="ri")
    rj = kd.reduce_axis(3, name="rj")
    return kd.compute((n - 2, m - 2), lambda i, j: kd.sum(A[i + ri, j + rj] * W[ri, rj],
                                                          axis=[ri, rj]), name="B")


@kd.kernel
def k_softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def k_matmul(A, B):
    return A @ B


@kd.kernel
def k_add(a, b):
    return a + b


# ----------------------------------------------------------------- numpy peers
def np_softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_conv3(A, W):
    n, m = A.shape
    out = np.zeros((n - 2, m - 2), A.dtype)
    for a in range(3):
        for b in range(3):
            out += A[a:a + n - 2, b:b + m - 2] * W[a, b]
    return out


# ----------------------------------------------------------------- Numba peers
def _numba_peers():
    """What an expert writes: ``prange`` over the independent axis, ``fastmath`` so that LLVM
    may reassociate (vectorise) float reductions, as kdsl's own reductions do."""
    if numba is None:
        return {}

    @njit(parallel=True, fastmath=True, cache=False)
    def nb_rowsum(A):
        n, m = A.shape
        out = np.empty(n, A.dtype)
        for i in prange(n):
            s = np.float32(0)
            for j in range(m):
                s += A[i, j]
            out[i] = s
        return out

    @njit(parallel=True, fastmath=True, cache=False)
    def nb_fullsum(A):
        s = np.float32(0)
        for i in prange(A.shape[0]):
            s += A[i]
        return s

    @njit(parallel=True, fastmath=True, cache=False)
    def nb_conv3(A, W):
        n, m = A.shape
        out = np.empty((n - 2, m - 2), A.dtype)
        for i in prange(n - 2):
            for j in range(m - 2):
                s = np.float32(0)
                for a in range(3):
                    for b in range(3):
                        s += A[i + a, j + b] * W[a, b]
                out[i, j] = s
        return out

    @njit(parallel=True, fastmath=True, cache=False)
    def nb_softmax(X):
        n, m = X.shape
        out = np.empty_like(X)
        for i in prange(n):
            mx = X[i, 0]
            for j in range(1, m):
                mx = max(mx, X[i, j])
            s = np.float32(0)
            for j in range(m):
                e = np.exp(X[i, j] - mx)
                out[i, j] = e
                s += e
            for j in range(m):
                out[i, j] = out[i, j] / s
        return out

    @njit(cache=False)
    def nb_add(a, b):
        return a + b

    return {"rowsum": nb_rowsum, "fullsum": nb_fullsum, "conv3": nb_conv3,
            "softmax": nb_softmax, "add": nb_add}


# ----------------------------------------------------------------- timing
#: seconds to wait before timing one library after another ran: OpenBLAS, OpenMP and TBB
#: workers keep spinning for up to ~0.2 s after their last call (OpenBLAS: 2**28 cycles;
#: Intel OpenMP: KMP_BLOCKTIME 200 ms) and would steal cores from whoever is timed next
QUIET_S = 0.5


def median_s(fn, min_reps=5, budget_s=3.0) -> float:
    """Median seconds of ``fn()`` after a warm-up, over at least ``min_reps`` runs.

    Starts after ``QUIET_S`` of sleep so that idle-spinning worker threads of the
    library measured before (or of the float64 oracle) have parked.
    """
    time.sleep(QUIET_S)
    fn()
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < min_reps or (time.perf_counter() < t_end and len(times) < 50):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def per_call_us(fn, batch=2000, batches=30) -> float:
    """Median over batches of the mean cost of one call, in microseconds."""
    for _ in range(batch):
        fn()
    per = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        per.append((time.perf_counter() - t0) / batch * 1e6)
    return statistics.median(per)


def check(name, got, want, rtol):
    """Fail loudly when a result is wrong: a fast wrong kernel is not a result."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 1.0, 1e-30)
    err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
    if got.shape != want.shape or not err <= rtol:
        raise SystemExit(f"{name}: wrong result (shape {got.shape} vs {want.shape}, "
                         f"max error {err:.3g} of the largest value)")


# ----------------------------------------------------------------- workloads
def workloads(quick: bool):
    """(name, args, kdsl fn, {peer: fn}, float64 oracle, tolerance, targets, work units)."""
    rng = np.random.default_rng(1)
    s = 16 if quick else 1
    n_row = 8192 // s
    A = rng.random((n_row, n_row), dtype=np.float32)
    V = rng.random(2 ** 26 // (s * s), dtype=np.float32)
    n_conv = 4096 // s
    C = rng.random((n_conv, n_conv), dtype=np.float32)
    W = rng.random((3, 3), dtype=np.float32)
    X = rng.standard_normal((4096 // s, 1024), dtype=np.float32) * 4
    nb = _numba_peers()
    out = [
        ("row sum 8192x8192 f32", "rowsum", (A,), k_rowsum,
         {"numba": nb.get("rowsum"), "numpy": lambda A: A.sum(axis=1)},
         lambda A: A.astype(np.float64).sum(axis=1), 1e-4, {"numba": 1.0, "numpy": 1.5},
         ("GB/s", A.nbytes)),
        ("full sum 2^26 f32", "fullsum", (V,), k_fullsum,
         {"numba": nb.get("fullsum"), "numpy": lambda V: V.sum()},
         lambda V: V.astype(np.float64).sum(), 1e-4, {"numba": 1.0, "numpy": 1.5},
         ("GB/s", V.nbytes)),
        ("3x3 2-D reduction 4096x4096 f32", "conv3", (C, W), k_conv3,
         {"numba": nb.get("conv3"), "numpy": np_conv3},
         lambda C, W: np_conv3(C.astype(np.float64), W.astype(np.float64)), 1e-5,
         {"numba": 1.0}, ("GB/s", C.nbytes * 2)),
        ("softmax 4096x1024 f32", "softmax", (X,), k_softmax,
         {"numpy": np_softmax, "numba": nb.get("softmax")},
         lambda X: np_softmax(X.astype(np.float64)), 1e-5, {"numpy": 2.0}, ("GB/s", X.nbytes * 2)),
    ]
    for size in ((64, 128) if quick else (1024, 2048)):
        Ma = rng.standard_normal((size, size), dtype=np.float32)
        Mb = rng.standard_normal((size, size), dtype=np.float32)
        out.append((f"SGEMM {size} f32", f"sgemm{size}", (Ma, Mb), k_matmul,
                    {"numpy": np.matmul},
                    lambda a, b: a.astype(np.float64) @ b.astype(np.float64), 1e-4,
                    {"numpy": 0.7}, ("GFLOP/s", 2 * size ** 3)))
    return out


def run_workloads(quick, only, results):
    for (title, key, args, kfn, peers, oracle, tol, targets, (unit, work)) in workloads(quick):
        if only and key not in only:
            continue
        want = oracle(*args)
        check(f"kdsl {key}", kfn(*args), want, tol)
        row = {"workload": title, "key": key, "kdsl_s": median_s(lambda: kfn(*args)), "peers": {}}
        row["kdsl_rate"] = work / row["kdsl_s"] / 1e9
        row["unit"] = unit
        for pname, pfn in peers.items():
            if pfn is None:
                row["peers"][pname] = None
                continue
            check(f"{pname} {key}", pfn(*args), want, max(tol, 1e-3))
            t = median_s(lambda: pfn(*args))
            row["peers"][pname] = {"s": t, "ratio": t / row["kdsl_s"], "target": targets.get(pname)}
        results.append(row)
        _print_row(row)


# ----------------------------------------------------------------- cold compile, overhead
_KDSL_COLD = """
import os, time, numpy as np
import kdsl as kd
a = np.ones((8, 8), np.float32)
@kd.kernel
def rowsum(A):
    return A.sum(axis=1)
t0 = time.perf_counter(); rowsum(a); t1 = time.perf_counter()
print(t1 - t0)
"""

_NUMBA_COLD = """
import time, numpy as np
from numba import njit, prange
a = np.ones((8, 8), np.float32)
@njit(parallel=True, fastmath=True)
def rowsum(A):
    out = np.empty(A.shape[0], A.dtype)
    for i in prange(A.shape[0]):
        s = np.float32(0)
        for j in range(A.shape[1]):
            s += A[i, j]
        out[i] = s
    return out
t0 = time.perf_counter(); rowsum(a); t1 = time.perf_counter()
print(t1 - t0)
"""


_PYCACHE = os.path.join(tempfile.gettempdir(), "kdsl-bench-pycache")


def _cold(code: str, env: dict, reps: int) -> float:
    """Median first-call time in fresh processes.  Python's bytecode cache is on (in a
    directory of its own), as in any installed package, and filled by one untimed run:
    compiling kdsl's .py files to bytecode is not the kernel's compile time (the peers'
    installed packages have their .pyc files; PYTHONDONTWRITEBYTECODE would deny ours)."""
    full = {**os.environ, **env, "PYTHONPYCACHEPREFIX": _PYCACHE,
            "PYTHONPATH": os.pathsep.join([ROOT, CPU_DIR] + [p for p in [
                os.environ.get("PYTHONPATH")] if p])}
    full.pop("PYTHONDONTWRITEBYTECODE", None)
    times = []
    for i in range(reps + 1):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                           text=True, env=full, cwd=ROOT)
        if r.returncode:
            raise SystemExit(f"cold-compile subprocess failed:\n{r.stderr}")
        if i:  # the first run only fills the bytecode cache
            times.append(float(r.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def run_cold(results, quick):
    reps = 1 if quick else 3
    kd_t = _cold(_KDSL_COLD, {"KDSL_CACHE": "0"}, reps)
    row = {"workload": "cold compile, row sum (first call)", "key": "cold", "kdsl_s": kd_t,
           "peers": {}, "unit": "", "kdsl_rate": None}
    if numba is not None:
        nb_t = _cold(_NUMBA_COLD, {"NUMBA_CACHE_DIR": "/nonexistent-kdsl-bench"}, reps)
        row["peers"]["numba"] = {"s": nb_t, "ratio": nb_t / kd_t, "target": 2.0}
    row["limit_s"] = 0.100
    results.append(row)
    _print_row(row)


def run_overhead(results):
    a = np.ones(8, np.float32)
    b = np.ones(8, np.float32)
    check("kdsl add", k_add(a, b), a + b, 0)
    row = {"workload": "cached call, a+b on 8 f32", "key": "overhead",
           "kdsl_s": per_call_us(lambda: k_add(a, b)) * 1e-6, "peers": {}, "unit": "",
           "kdsl_rate": None}
    nb = _numba_peers().get("add")
    if nb is not None:
        nb(a, b)
        t = per_call_us(lambda: nb(a, b)) * 1e-6
        row["peers"]["numba"] = {"s": t, "ratio": t / row["kdsl_s"], "target": 1.0}
    t = per_call_us(lambda: a + b) * 1e-6
    row["peers"]["numpy"] = {"s": t, "ratio": t / row["kdsl_s"], "target": None}
    results.append(row)
    _print_row(row)


# ----------------------------------------------------------------- sharing the machine
_POOL_CASE = """
import sys, time, multiprocessing as mp
import numpy as np
N, REPS, PROCS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def work(seed):
    import kdsl as kd

    @kd.kernel
    def axpy(a, x, y):
        return a * x + y

    rng = np.random.default_rng(seed)
    x, y = rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)
    out = np.empty_like(x)
    axpy(2.0, x, y, out=out)
    if not np.allclose(out, 2 * x + y):
        raise SystemExit("pool case: wrong result")
    t0 = time.perf_counter()
    done, t_end = 0, t0 + 1.0       # at most REPS calls or one second (spinning is slow)
    while done < REPS and (done < 20 or time.perf_counter() < t_end):
        axpy(2.0, x, y, out=out)
        done += 1
    return (time.perf_counter() - t0) / done

if __name__ == "__main__":
    with mp.Pool(PROCS) as p:   # the platform's start method (fork on Linux)
        print(max(p.map(work, range(PROCS))))
"""


def _pool_per_call(env: dict, n: int, reps: int, procs: int) -> float:
    """Seconds per axpy call of the slowest Pool worker, in a fresh process tree."""
    path = os.path.join(tempfile.gettempdir(), f"kdsl-bench-pool-{os.getpid()}.py")
    with open(path, "w") as f:
        f.write(_POOL_CASE)
    full = {k: v for k, v in os.environ.items()
            if k not in ("KDSL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    full.update(env, PYTHONPATH=os.pathsep.join([ROOT, CPU_DIR] + [p for p in [
        os.environ.get("PYTHONPATH")] if p]))
    try:
        r = subprocess.run([sys.executable, path, str(n), str(reps), str(procs)],
                           capture_output=True, text=True, env=full, cwd=ROOT)
    finally:
        os.unlink(path)
    if r.returncode:
        raise SystemExit(f"pool case failed:\n{r.stderr}")
    return float(r.stdout.strip().splitlines()[-1])


def run_pool(results, quick):
    """A Pool of one process per usable core, each calling an axpy: default threads vs one."""
    from kdsl import config
    procs = max(2, config.usable_cores())
    n, reps, rounds = (1 << 16, 200, 1) if quick else (1 << 18, 2000, 3)
    variants = {"default": {}, "1 thread": {"KDSL_NUM_THREADS": "1"},
                "spinning": {"GOMP_SPINCOUNT": "300000"}}
    times = {k: [] for k in variants}
    for _ in range(rounds):   # interleaved rounds: a burst of load elsewhere hits all variants
        for k, env in variants.items():
            times[k].append(_pool_per_call(env, n, reps, procs))
    t = {k: statistics.median(v) for k, v in times.items()}
    row = {"workload": f"pool: {procs} procs x axpy 2^{n.bit_length() - 1} f32", "key": "pool",
           "label": "dflt", "kdsl_s": t["default"], "unit": "", "kdsl_rate": None, "all": times,
           "peers": {
               "1 thread": {"s": t["1 thread"], "ratio": t["1 thread"] / t["default"],
                            "target": 0.7},
               "spinning": {"s": t["spinning"], "ratio": t["spinning"] / t["default"],
                            "target": None}}}
    results.append(row)
    _print_row(row)


def median_after(first, fn, min_reps=5, budget_s=3.0) -> float:
    """Median seconds of ``fn()`` timed right after an untimed ``first()`` each time."""
    first(); fn()
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < min_reps or (time.perf_counter() < t_end and len(times) < 50):
        first()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: OpenBLAS's workers spin for ~2**28 cycles after each call unless told otherwise (read when
#: numpy loads OpenBLAS, so only a fresh process can show the difference)
OPENBLAS_SHORT_SPIN = {"OPENBLAS_THREAD_TIMEOUT": "4"}


def run_interleaved(results, quick, subprocess_variant=True):
    """kdsl's SGEMM right after numpy's matmul and the reverse, against each one quiet; then
    the same in a fresh process whose OpenBLAS workers stop spinning at once (docs say how)."""
    _interleaved_rows(results, quick, "")
    if not subprocess_variant or os.environ.get("OPENBLAS_THREAD_TIMEOUT"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "inter.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--only", "interleaved", "--out", out]
        if quick:
            cmd.append("--quick")
        r = subprocess.run(cmd, capture_output=True, text=True,
                           env=dict(os.environ, **OPENBLAS_SHORT_SPIN))
        if r.returncode:
            raise SystemExit(f"interleaved case with OPENBLAS_THREAD_TIMEOUT failed:\n{r.stderr}")
        with open(out) as f:
            rows = json.load(f)["results"]
    for row in rows:
        row["workload"] += ", OPENBLAS_THREAD_TIMEOUT=4"
        results.append(row)
        _print_row(row)


def _interleaved_rows(results, quick, suffix):
    rng = np.random.default_rng(2)
    size = 128 if quick else 1024
    A = rng.standard_normal((size, size), dtype=np.float32)
    B = rng.standard_normal((size, size), dtype=np.float32)
    check("kdsl interleaved sgemm", k_matmul(A, B), A.astype(np.float64) @ B, 1e-4)
    kd_mm, np_mm = (lambda: k_matmul(A, B)), (lambda: A @ B)
    for who, fn, other, oname in (("kdsl", kd_mm, np_mm, "numpy"),
                                  ("numpy", np_mm, kd_mm, "kdsl")):
        inter = median_after(other, fn)
        quiet = median_s(fn)
        row = {"workload": f"SGEMM {size} right after {oname}'s{suffix}", "key": "interleaved",
               "label": who, "kdsl_s": inter, "unit": "", "kdsl_rate": None, "peers": {
                   "quiet": {"s": quiet, "ratio": quiet / inter,
                             "target": 0.8 if who == "numpy" else None}}}
        results.append(row)
        _print_row(row)


# ----------------------------------------------------------------- report
def _fmt_s(t: float) -> str:
    if t >= 1.0:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.2f} us"


def _print_row(row):
    rate = f"  ({row['kdsl_rate']:.1f} {row['unit']})" if row.get("kdsl_rate") else ""
    print(f"{row['workload']:<36} {row.get('label', 'kdsl'):<5} {_fmt_s(row['kdsl_s']):>10}{rate}",
          flush=True)
    for pname, p in row["peers"].items():
        if p is None:
            print(f"{'':<36}   {pname:<8} (not installed)")
            continue
        tgt = p.get("target")
        verdict = "" if tgt is None else ("  ok" if p["ratio"] >= tgt else "  MISSED")
        tgt_s = "" if tgt is None else f"  target >= {tgt:.2f}x"
        print(f"{'':<36}   {pname:<8} {_fmt_s(p['s']):>10}  ratio {p['ratio']:6.2f}x{tgt_s}{verdict}",
              flush=True)
    if "limit_s" in row:
        ok = "ok" if row["kdsl_s"] <= row["limit_s"] else "MISSED"
        print(f"{'':<36}   limit {_fmt_s(row['limit_s'])}: {ok}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check the harness only")
    ap.add_argument("--only", default="", help="comma-separated keys: rowsum,fullsum,conv3,"
                    "softmax,sgemm1024,sgemm2048,cold,overhead,pool,interleaved")
    ap.add_argument("--threads", type=int, default=None, help="KDSL_NUM_THREADS and Numba threads")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/...)")
    args = ap.parse_args()
    global QUIET_S
    if args.quick:
        QUIET_S = 0.0
    if args.threads:
        os.environ["KDSL_NUM_THREADS"] = str(args.threads)
        if numba is not None:
            numba.set_num_threads(args.threads)
    from kdsl import config
    threads = args.threads or config.num_threads()
    only = {x for x in args.only.split(",") if x}
    from kdsl_cpu import parallel
    parallel.omp_launcher()   # load the OpenMP runtime now, so the header can say how it waits
    policy = getattr(parallel, "wait_policy", lambda: "n/a")()   # (older checkouts: n/a)
    print(f"# kdsl cpu benchmark on {platform.node()} ({os.cpu_count()} cores, "
          f"{config.usable_cores()} usable, {threads} threads, OpenMP wait policy "
          f"{policy}), numpy {np.__version__}, "
          f"numba {getattr(numba, '__version__', 'absent')}", flush=True)
    results = []
    run_workloads(args.quick, only, results)
    if not only or "cold" in only:
        run_cold(results, args.quick)
    if not only or "overhead" in only:
        run_overhead(results)
    if not only or "interleaved" in only:
        run_interleaved(results, args.quick)
    if not only or "pool" in only:
        run_pool(results, args.quick)
    meta = {"host": platform.node(), "cores": os.cpu_count(), "threads": threads,
            "usable_cores": config.usable_cores(), "wait_policy": policy,
            "cpu": platform.processor(), "numpy": np.__version__,
            "numba": getattr(numba, "__version__", None), "quick": args.quick,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = args.out or os.path.join(ROOT, "benchmarks", "results",
                                    f"cpu-{platform.node()}-{threads}t.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(f"# wrote {path}")


if __name__ == "__main__":
    main()
