"""Cumulative sums: kdsl's parallel blocked scan against torch.cumsum, cupy.cumsum (GPU) and
numpy.cumsum (cpu), in one process.

    python3 benchmarks/scan.py cuda [--n 16777216] [--json out.json]   # the GPU (torch needed)
    python3 benchmarks/scan.py cpu  [--n 4194304]  [--json out.json]   # this machine

Each row: median milliseconds of one call (GPU: CUDA events around batches of calls; cpu:
wall clock, into a preallocated ``out=``), GB/s counting one read and one write of the
array, and the largest error against a float64 cumsum relative to the largest |result| (kdsl and torch/CuPy both reassociate
float32 sums), and for kdsl the kernels one call launches.  ``cuda``: float32 1-D (the tile
scan, kdsl.gpu.scan_tiles: block totals of 4352-step tiles, their scan in one tile, the
tiles scanned by 256 threads each through shared memory), int32 (exact, int64 results), a
(64, n/64) row-wise cumsum (the rows' tiles together), (n/w, w) ones for w = 32, 256, 2048
(many short rows: a block per row, a tile each; "thread per row (before)": one thread per
row, serial, as before) and a (256, n/256) column cumsum (a thread per column).  "kdsl blocked (before)" is the same kernel in the
form the GPU default had before the tile scan (blocks of 32 steps, one thread each).  ``cpu``: kdsl with the blocked form (every core), the same kernel forced
serial (one thread: the scan stays one loop), numpy.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# this folder holds cuda.py, which would shadow cuda-python's ``cuda`` package (kdsl_cuda's)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, ROOT)   # this checkout's kdsl, kdsl_cpu and kdsl_cuda, not installed copies

import kdsl as kd  # noqa: E402


@kd.kernel
def cumsum(x):
    return np.cumsum(x)


@kd.kernel
def cumsum_rows(x):
    return np.cumsum(x, axis=1)


@kd.kernel
def cumsum_blocked(x):      # the same kernel compiled with the pre-tile-scan GPU form
    return np.cumsum(x)


@kd.kernel
def cumsum_rows_blocked(x):
    return np.cumsum(x, axis=1)


@kd.kernel
def cumsum_rows_serial(x):      # compiled with the GPU form before the short-row tiles
    return np.cumsum(x, axis=1)


@kd.kernel
def cumsum_cols(x):
    return np.cumsum(x, axis=0)


def _serial_rows_form(fn):
    """``fn`` run with the short-row tiles turned off (a thread per row, serial), so that the
    kernels it compiles keep the form before them."""
    import kdsl.backends.scan_schedules as ss

    def run():
        old = ss._short_rows
        ss._short_rows = lambda sched, h: False
        try:
            return fn()
        finally:
            ss._short_rows = old
    return run


def _blocked_form(fn):
    """``fn`` run with the GPU's tile scan turned off (kdsl.backends.scan_schedules: the
    blocked scan one thread per block of 32 steps, as before issue 25's tile scan), so that
    the kernels it compiles keep that form: the before/after in one run."""
    import kdsl.backends.scan_schedules as ss

    def run():
        old = ss._tileable
        ss._tileable = lambda h: False
        try:
            return fn()
        finally:
            ss._tileable = old
    return run


def _launches(kern, x) -> int:
    """Kernels one call of ``kern`` launches on ``x`` (its lowered host program)."""
    try:
        return len(kern.lower(x, backend="cuda").kernels)
    except Exception:   # noqa: BLE001  (a lowering that needs the blocked form's patch)
        return -1


def _err(got, x64, axis=None) -> float:
    want = np.cumsum(x64, axis=axis)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / max(np.max(np.abs(want)), 1e-300))


def gpu_rows(n: int) -> list:
    import torch
    try:
        import cupy as cp
    except ImportError:
        cp = None
    rows = []

    def ms(fn, reps=7):
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        inner = max(1, min(200, int(20.0 / max(s.elapsed_time(e), 1e-3))))
        out = []
        for _ in range(reps):
            s.record()
            for _ in range(inner):
                fn()
            e.record()
            e.synchronize()
            out.append(s.elapsed_time(e) / inner)
        return statistics.median(out)

    def add(case, name, fn, nbytes, x64, axis=None, launches=None, warm=None):
        try:
            got = (warm or fn)()        # the first call compiles (``warm``: in another form)
            torch.cuda.synchronize()
            t = ms(fn)
            host = got.get() if hasattr(got, "get") else got.cpu().numpy() if hasattr(got, "cpu") else got
            rows.append(dict(case=case, impl=name, ms=t, gbps=2 * nbytes / t / 1e6,
                             rel_err=_err(host, x64, axis), launches=launches))
        except Exception as e:   # noqa: BLE001  (a failing row is reported, the rest run)
            rows.append(dict(case=case, impl=name, ms=None, gbps=None, rel_err=None,
                             error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"))

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(n, device="cuda", generator=g, dtype=torch.float32)
    x64 = x.double().cpu().numpy()
    case = f"float32[{n}]"
    add(case, "kdsl", lambda: cumsum(x, backend="cuda"), 4 * n, x64, launches=_launches(cumsum, x))
    add(case, "kdsl blocked (before)", lambda: cumsum_blocked(x, backend="cuda"), 4 * n, x64,
        warm=_blocked_form(lambda: cumsum_blocked(x, backend="cuda")))
    add(case, "torch.cumsum", lambda: torch.cumsum(x, 0), 4 * n, x64)
    if cp is not None:
        xc = cp.asarray(x)
        add(case, "cupy.cumsum", lambda: cp.cumsum(xc), 4 * n, x64)
    xi = torch.randint(-100, 100, (n,), device="cuda", generator=g, dtype=torch.int32)
    case = f"int32[{n}] -> int64"
    xi64 = xi.double().cpu().numpy()
    add(case, "kdsl", lambda: cumsum(xi, backend="cuda"), 4 * n, xi64, launches=_launches(cumsum, xi))
    add(case, "torch.cumsum", lambda: torch.cumsum(xi, 0), 4 * n, xi64)
    if cp is not None:
        xic = cp.asarray(xi)
        add(case, "cupy.cumsum", lambda: cp.cumsum(xic, dtype=cp.int64), 4 * n, xi64)
    m = n // 64
    r, r64 = x[:64 * m].reshape(64, m), x64[:64 * m].reshape(64, m)
    case = f"float32[64, {m}] axis=1"
    add(case, "kdsl", lambda: cumsum_rows(r, backend="cuda"), 4 * 64 * m, r64, 1,
        launches=_launches(cumsum_rows, r))
    add(case, "kdsl blocked (before)", lambda: cumsum_rows_blocked(r, backend="cuda"), 4 * 64 * m, r64, 1,
        warm=_blocked_form(lambda: cumsum_rows_blocked(r, backend="cuda")))
    add(case, "torch.cumsum", lambda: torch.cumsum(r, 1), 4 * 64 * m, r64, 1)
    if cp is not None:
        rc = cp.asarray(r)
        add(case, "cupy.cumsum", lambda: cp.cumsum(rc, axis=1), 4 * 64 * m, r64, 1)
    # many short rows: more rows than GPU_OTHERS_MAX, a block per row (its threads by the row
    # length); "(before)": one thread per row, serial, as before the short-row tiles
    for w in (32, 256, 2048):
        m = n // w
        r, r64 = x[:w * m].reshape(m, w), x64[:w * m].reshape(m, w)
        case = f"float32[{m}, {w}] axis=1"
        add(case, "kdsl", lambda: cumsum_rows(r, backend="cuda"), 4 * w * m, r64, 1,
            launches=_launches(cumsum_rows, r))
        add(case, "kdsl thread per row (before)", lambda: cumsum_rows_serial(r, backend="cuda"),
            4 * w * m, r64, 1, warm=_serial_rows_form(lambda: cumsum_rows_serial(r, backend="cuda")))
        add(case, "torch.cumsum", lambda: torch.cumsum(r, 1), 4 * w * m, r64, 1)
    # a column scan: a thread per column, serial along the column (neighbours coalesced)
    m = n // 256
    c, c64 = x[:256 * m].reshape(256, m), x64[:256 * m].reshape(256, m)
    case = f"float32[256, {m}] axis=0"
    add(case, "kdsl", lambda: cumsum_cols(c, backend="cuda"), 4 * 256 * m, c64, 0,
        launches=_launches(cumsum_cols, c))
    add(case, "torch.cumsum", lambda: torch.cumsum(c, 0), 4 * 256 * m, c64, 0)
    return rows


def cpu_rows(n: int) -> list:
    rng = np.random.default_rng(0)
    x = rng.random(n).astype(np.float32)
    x64 = x.astype(np.float64)
    serial = kd.schedule("cpu", threads=1)(cumsum)      # the plain sequential loop
    rows = []

    def ms(fn, reps=7):
        fn()
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(out)
    case = f"float32[{n}]"
    buf = np.empty_like(x)      # out=: the first touch of a fresh output is not the scan's cost
    for name, fn in (("kdsl blocked (%d threads)" % kd.get_num_threads(),
                      lambda: cumsum(x, backend="cpu", out=buf)),
                     ("kdsl serial", lambda: serial(x, backend="cpu", out=buf)),
                     ("numpy.cumsum", lambda: np.cumsum(x, out=buf))):
        t = ms(fn)
        rows.append(dict(case=case, impl=name, ms=t, gbps=8 * n / t / 1e6, rel_err=_err(fn(), x64)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", choices=["cuda", "cpu"])
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.target == "cuda":
        if "cuda" not in kd.backends():     # not installed: this checkout's, registered
            import kdsl_cuda
            kd.register_backend("cuda", kdsl_cuda.backend)
        rows = gpu_rows(a.n or 2 ** 24)
    else:
        rows = cpu_rows(a.n or 2 ** 22)
    print(f"{'case':34} {'impl':28} {'ms':>9} {'GB/s':>8} {'rel err':>9} {'launches':>8}")
    for r in rows:
        if r.get("ms") is None:
            print(f"{r['case']:34} {r['impl']:28} FAIL {r['error']}")
        else:
            ln = "" if r.get("launches") is None else r["launches"]
            print(f"{r['case']:34} {r['impl']:28} {r['ms']:9.3f} {r['gbps']:8.1f} {r['rel_err']:9.2e} {ln:>8}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(target=a.target, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
