"""Measuring for ``benchmarks/cuda.py``: CUDA-event medians, host cost per call, result
checks, inputs, the copy bandwidth, and the cold-compile case in child processes.

Loaded by ``cuda.py`` from its path (see there why).  ``DEV``, ``REPS`` and ``BATCH_MS`` are
set by ``cuda.py`` (``--quick``: fewer, shorter batches).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import torch
except ImportError:   # cuda.py exits with a message before anything here runs
    torch = None

DEV = "cuda"
REPS, BATCH_MS = 7, 20.0     # batches per median, milliseconds per batch (--quick: fewer)


def sync():
    """Wait for all work on the device (every stream, every library)."""
    torch.cuda.synchronize()


def safe_sync():
    """Synchronize after a failure; a sticky CUDA error shows in the next row instead."""
    try:
        sync()
    except Exception:
        pass


def first_line(e: BaseException) -> str:
    """An exception as its type and first line (a FAIL row's text)."""
    msg = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {msg}"[:300]


def gpu_ms(fn):
    """Median milliseconds of one ``fn()``, and the per-batch values: CUDA events on the
    current stream around batches of calls (enough calls per batch that launch gaps vanish)."""
    sync()
    fn()
    sync()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    est = max(s.elapsed_time(e), 1e-3)
    inner = max(1, min(200, int(BATCH_MS / est)))
    reps = REPS if est * inner * REPS < 3000 else 3     # a very slow kernel: fewer batches
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
    for a, b in events:
        a.record()
        for _ in range(inner):
            fn()
        b.record()
    sync()
    per = [a.elapsed_time(b) / inner for a, b in events]
    return statistics.median(per), per


def per_call_s(fn, quick):
    """Host seconds per call: median over batches of the mean; the queue drains (untimed)
    between batches, so the GPU never holds the host back."""
    batch, batches = (100, 10) if quick else (200, 30)
    for _ in range(batch):
        fn()
    sync()
    per = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        per.append((time.perf_counter() - t0) / batch)
        sync()
    return statistics.median(per)


def compare(got, want, tol, exact):
    """None when ``got`` matches ``want`` (a torch tensor); else what is wrong."""
    if not torch.is_tensor(got):
        got = torch.as_tensor(got, device=want.device)
    if got.numel() == want.numel() == 1:
        got, want = got.reshape(()), want.reshape(())
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if exact:
        bad = int((got.to(want.device, want.dtype) != want).sum())
        return None if bad == 0 else f"{bad} of {want.numel()} values differ"
    g, w = got.to(want.device).double(), want.double()
    scale = max(float(w.abs().max()), 1e-30)
    err = float((g - w).abs().max()) / scale      # NaN (unwritten, poisoned) fails below
    return None if err <= tol else f"max error {err:.3g} of the largest value (tolerance {tol:g})"


def nbytes(t) -> int:
    """Bytes of a torch tensor or of any array with shape and dtype."""
    if torch.is_tensor(t):
        return t.numel() * t.element_size()
    return int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize


def make_inputs(w, shape, gen):
    """Fresh random inputs on the GPU (never zeros: they hide unwritten outputs)."""
    out = []
    for s, dist in w.inputs(shape):
        if dist == "randn":
            out.append(torch.randn(s, generator=gen, device=DEV))
        elif dist == "weights":
            out.append(torch.rand(s, generator=gen, device=DEV) - 0.5)
        else:
            out.append(torch.rand(s, generator=gen, device=DEV))
    return out


def shape_text(shape) -> str:
    """``16384x16384``, or ``2^28`` for a power-of-two vector."""
    if len(shape) == 1 and shape[0] & (shape[0] - 1) == 0:
        return f"2^{shape[0].bit_length() - 1}"
    return "x".join(map(str, shape))


def copy_bandwidth(quick) -> dict:
    """Bytes read plus written per second of ``dst.copy_(src)`` (1 GiB; --quick 256 MiB)."""
    n = 2 ** (26 if quick else 28)
    src = torch.rand(n, device=DEV)
    dst = torch.empty_like(src)
    ms, per = gpu_ms(lambda: dst.copy_(src))
    if not torch.equal(dst, src):
        raise SystemExit("device-to-device copy: dst differs from src")
    out = {"bytes": 2 * nbytes(src), "s": ms / 1e3, "batches_ms": per,
           "bytes_per_s": 2 * nbytes(src) / (ms / 1e3)}
    del src, dst
    torch.cuda.empty_cache()
    return out


# ----------------------------------------------------------------- cold compile
COLD_SHAPE = (4096, 1024)


def run_cold(quick, root, child_src) -> dict:
    """First call of a fresh row-sum kernel, kdsl vs Triton, in fresh processes."""
    reps = 1 if quick else 3
    tmp = tempfile.mkdtemp(prefix="kdsl-bench-cold-")
    script = os.path.join(tmp, "cold_child.py")
    with open(script, "w") as f:
        f.write(child_src)

    def child(mode):
        env = dict(os.environ, KDSL_CACHE_DIR=tempfile.mkdtemp(dir=tmp),
                   TRITON_CACHE_DIR=tempfile.mkdtemp(dir=tmp),
                   PYTHONPATH=os.pathsep.join([root] + [p for p in [
                       os.environ.get("PYTHONPATH")] if p]))
        env.pop("KDSL_CACHE", None)     # the disk cache on (and empty), as users have it
        try:
            r = subprocess.run([sys.executable, script, root, mode, *map(str, COLD_SHAPE)],
                               capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
        except subprocess.TimeoutExpired:
            return {"error": "child process ran past 300 s"}
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"child process exited {r.returncode}: {tail}"[:300]}
        res = json.loads(lines[-1])
        if "error" not in res and not res["err"] <= 1e-4:
            res["error"] = f"wrong result: max error {res['err']:.3g} of the largest value"
        return res

    title = f"cold compile, row sum {shape_text(COLD_SHAPE)}, 1st result"
    row = {"key": "cold", "workload": title,
           "kdsl_s": None, "kdsl_error": None, "pct_copy": None, "bw_target": None, "notes": [],
           "limit_s": 0.150, "limit_label": "limit", "unit": "host",
           "peers": {"triton first call": {"s": None, "error": None, "target": 1.0,
                                           "ratio": None, "met": None}}}
    if not quick:
        child("kdsl")   # untimed: writes kdsl's own .pyc files (installed packages have theirs)
    runs = {"kdsl": [], "triton": []}
    for _ in range(reps):
        for mode in runs:     # interleaved: a burst of load elsewhere hits both
            runs[mode].append(child(mode))
    for mode, res in runs.items():
        errs = [r["error"] for r in res if "error" in r]
        t = statistics.median([r["first_s"] for r in res]) if not errs else None
        if mode == "kdsl":
            row["kdsl_s"], row["kdsl_error"], row["kdsl_runs_s"] = t, (errs or [None])[0], \
                [r.get("first_s") for r in res]
        else:
            p = row["peers"]["triton first call"]
            p["s"], p["error"], p["runs_s"] = t, (errs or [None])[0], \
                [r.get("first_s") for r in res]
    shutil.rmtree(tmp, ignore_errors=True)
    return row
