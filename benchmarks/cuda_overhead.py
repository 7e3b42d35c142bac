"""The launch-cost rows of benchmarks/cuda.py (issue 10: the Python cost of a cached call).

A cached ``add`` on 8 float32 elements, into ``out=`` and allocating: kdsl on torch tensors
against torch, Triton and CuPy's ``RawKernel`` (on CuPy views of the same memory), then kdsl on
the same CuPy arrays as CuPy's kernel (the like-for-like rows; absent without CuPy).  Every
callable's result is checked exactly (``out=`` NaN-poisoned first) before and after it is
timed.  Loaded by cuda.py, which passes the kernel, its measurement helpers and the peers.
"""
from __future__ import annotations

import numpy as np

N_TINY = 8


class _Env:
    """What the rows need from cuda.py: the kernel, the measurement helpers (cuda_measure.py),
    the peers module (cuda_peers.py), torch and CuPy (None when absent)."""

    def __init__(self, add, M, peers_mod, torch, cp):
        self.add, self.M, self.peers, self.torch, self.cp = add, M, peers_mod, torch, cp


def _cupy_views(E, a, b, c):
    """CuPy arrays on the memory of torch tensors ``a``, ``b``, ``c`` (no copies: poisoning
    ``c`` poisons the third)."""
    if E.cp is None:
        raise ImportError("cupy is not installed (or found no usable CUDA)")
    return E.cp.from_dlpack(a), E.cp.from_dlpack(b), E.cp.from_dlpack(c)


def _overhead_cases(E, a, b, c):
    """(row title, () -> kdsl fn, {peer: () -> fn}, target per peer, reads c?) per row: kdsl
    on torch tensors against torch, Triton and CuPy (on CuPy arrays: the rows the issue's
    target was first judged by), then kdsl on the same CuPy arrays as CuPy's RawKernel (the
    like-for-like rows; absent without CuPy)."""
    n, add, torch, cp = N_TINY, E.add, E.torch, E.cp

    def cupy_fns():
        k = E.peers.cupy_add_kernel()
        ca, cb, cc = _cupy_views(E, a, b, c)
        n32 = np.int32(n)

        def fresh():
            o = cp.empty_like(ca)
            k((1,), (32,), (ca, cb, o, n32))
            return o
        return (lambda: k((1,), (32,), (ca, cb, cc, n32))), fresh

    def triton_fns():
        if E.peers.triton is None:
            raise ImportError("triton is not installed")
        tk = E.peers.tr_add

        def fresh():
            o = torch.empty_like(a)
            tk[(1,)](a, b, o, n, BLOCK=32)
            return o
        return (lambda: tk[(1,)](a, b, c, n, BLOCK=32)), fresh

    def kdsl_cupy(into):
        ca, cb, cc = _cupy_views(E, a, b, c)
        return (lambda: add(ca, cb, out=cc)) if into else (lambda: add(ca, cb))

    cases = [("launch cost, add(a, b, out=c) on 8 f32", lambda: (lambda: add(a, b, out=c)), {
        "cupy RawKernel": lambda: cupy_fns()[0],
        "torch.add(out=)": lambda: (lambda: torch.add(a, b, out=c)),
        "triton jit": lambda: triton_fns()[0]}, {"cupy RawKernel": 1.0}, True),
        ("launch cost, add(a, b) allocating, 8 f32", lambda: (lambda: add(a, b)), {
            "cupy empty+RawKernel": lambda: cupy_fns()[1],
            "torch a + b": lambda: (lambda: a + b),
            "triton empty+jit": lambda: triton_fns()[1]}, {"cupy empty+RawKernel": 1.0}, False)]
    if cp is not None:      # kdsl called on the very CuPy arrays CuPy's kernel gets
        cases += [("launch cost, CuPy add(a, b, out=c), 8 f32", lambda: kdsl_cupy(True),
                   {"cupy RawKernel": lambda: cupy_fns()[0]}, {"cupy RawKernel": 1.0}, True),
                  ("launch cost, CuPy add(a, b) allocating, 8 f32", lambda: kdsl_cupy(False),
                   {"cupy empty+RawKernel": lambda: cupy_fns()[1]},
                   {"cupy empty+RawKernel": 1.0}, False)]
    return cases


def _time_checked(E, fn, c, want, into, quick, build=False):
    """(seconds per call, None) for a call whose result checks out, else (None, why).
    ``build``: ``fn`` makes the callable (which is called once first: Triton compiles then).
    The result is checked before the timing (the first calls: kdsl compiles) and again after
    it (the calls timed: kdsl's fast launcher)."""
    try:
        if build:
            fn = fn()
            fn()
        bad = _check_tiny(E, fn, c, want, into)
        if bad is not None:
            return None, "wrong result: " + bad
        s = E.M.per_call_s(fn, quick)
        bad = _check_tiny(E, fn, c, want, into)
        if bad is not None:
            return None, "wrong result after the timed calls: " + bad
        return s, None
    except Exception as e:
        E.M.safe_sync()
        return None, E.M.first_line(e)


def _check_tiny(E, fn, c, want, into):
    """None when ``fn`` computes a + b (into ``c``, NaN-poisoned first, or as its result:
    a torch tensor or a CuPy array, compared through torch.as_tensor)."""
    if into:
        c.fill_(float("nan"))
        E.M.sync()
    r = fn()
    E.M.sync()
    return E.M.compare(c if into else r, want, 0.0, False)


def run_overhead(quick, add, M, peers_mod, torch, cp) -> list:
    """Host cost per call of a cached ``add`` (a + b) on 8 floats, into ``out=`` and
    allocating, on torch tensors and (CuPy installed) on CuPy arrays: cuda.py's rows."""
    E = _Env(add, M, peers_mod, torch, cp)
    a = torch.rand(N_TINY, device=M.DEV)
    b = torch.rand(N_TINY, device=M.DEV)
    c = torch.empty_like(a)
    want = (a + b).double()     # one float32 rounding: every peer must match it exactly
    rows = []
    for title, kmake, peers, targets, into in _overhead_cases(E, a, b, c):
        row = {"key": "overhead", "workload": title, "kdsl_s": None, "kdsl_error": None,
               "pct_copy": None, "bw_target": None, "peers": {}, "notes": [], "unit": "host"}
        row["kdsl_s"], row["kdsl_error"] = _time_checked(E, kmake, c, want, into, quick,
                                                         build=True)
        if into:
            row["limit_s"], row["limit_label"] = 3e-6, "stretch"
        for pname, make in peers.items():
            p = {"s": None, "error": None, "target": targets.get(pname), "ratio": None,
                 "met": None}
            row["peers"][pname] = p
            p["s"], p["error"] = _time_checked(E, make, c, want, into, quick, build=True)
        rows.append(row)
    return rows
