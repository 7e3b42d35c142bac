"""A small seeded random search over explicit schedules (issue 8, item 13).

Each case picks a kernel (elementwise chains, row/column reductions, a reduction
over ``(1, m)``, a 2-D reduction, matmul, softmax, a reduction feeding an
elementwise stage), a random sequence of schedule primitives drawn from the
stages and axes that exist at that moment, and random shapes (dividing the
split factors or not, 0 and 1 included).  The schedule runs through
``kernel.lower`` and a backend (``interp`` by default, which bounds-checks every
access) and is compared with numpy in float64.

Outcomes: ``ok``, ``rejected`` (a primitive call, or the check of the finished
schedule, raised a ScheduleError: fair, provided its message names no IR objects), and the bugs: ``late`` (a
ScheduleError at lowering instead of at a call), ``wrong``, ``crash`` (any
other exception), ``slow`` (lowering past ``SLOW_S``), ``unfair`` (a rejection
whose message leaks IR reprs).

Run more cases with ``python -m tests.passes.schedule_search --cases N --seed S
[--backend cpu]``; ``tests/passes/test_schedule_search.py`` runs a fixed slice.
"""
from __future__ import annotations

import random
import re
import sys
import time
import traceback

import numpy as np

import kdsl as kd
from kdsl.errors import ScheduleError

#: lowering of one case should never take longer than this (seconds)
SLOW_S = 5.0
_IR_REPR = re.compile(r"\b(IterVar|Var|Const|Binary|TensorRead|Range|Compare|Load)\(")


# ------------------------------------------------------------------ kernels
def _chain1(A):
    n, = A.shape
    T = kd.compute((n,), lambda i: A[i] * 2.0, name="T")
    U = kd.compute((n,), lambda i: T[i] + 1.0, name="U")
    return kd.compute((n,), lambda i: U[i] * 3.0 + T[i], name="V")


def _chain2(A):
    n, m = A.shape
    T = kd.compute((n, m), lambda i, j: A[i, j] * 2.0, name="T")
    U = kd.compute((n, m), lambda i, j: T[i, j] - A[i, j], name="U")
    return kd.compute((n, m - 1), lambda i, j: U[i, j] + T[i, j + 1], name="V")


def _rowsum_lo(A):
    n, m = A.shape
    k = kd.reduce_axis((1, m), name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k] * 2.0, axis=k), name="B")


def _colsum(A):
    return A.sum(axis=0)


def _conv(I, F):
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(2, name="dj")
    return kd.compute((n - 2, m - 1), lambda i, j: kd.sum(I[i + di, j + dj] * F[di, dj], axis=(di, dj)),
                      name="O")


def _matmul(A, B):
    return A @ B


def _softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _red_then_ew(A):
    n, m = A.shape
    T = kd.compute((n, m), lambda i, j: A[i, j] * A[i, j], name="T")
    k = kd.reduce_axis(m, name="k")
    R = kd.compute((n,), lambda i: kd.sum(T[i, k], axis=k), name="R")
    return kd.compute((n,), lambda i: R[i] * 0.5 + 1.0, name="S")


def _ref_conv(I, F):
    n, m = I.shape
    out = np.zeros((max(n - 2, 0), max(m - 1, 0)))
    for di in range(3):
        for dj in range(2):
            out += I[di:di + n - 2, dj:dj + m - 1] * F[di, dj]
    return out


def _ref_chain2(A):
    T = A * 2
    U = T - A
    return U[:, :-1] + T[:, 1:]


def _ref_softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _shapes2(rng):
    return (rng.choice([0, 1, 3, 4, 5, 8, 9]), rng.choice([1, 2, 3, 4, 7, 8]))


#: name -> (body, argument shapes from an rng, numpy reference)
KERNELS = {
    "chain1": (_chain1, lambda r: [(r.choice([0, 1, 4, 7, 12]),)], lambda A: (A * 2 + 1) * 3 + A * 2),
    "chain2": (_chain2, lambda r: [_shapes2(r)], _ref_chain2),
    "rowsum_lo": (_rowsum_lo, lambda r: [_shapes2(r)], lambda A: (A[:, 1:] * 2).sum(1)),
    "colsum": (_colsum, lambda r: [_shapes2(r)], lambda A: A.sum(0)),
    "conv": (_conv, lambda r: [(r.choice([2, 3, 5, 7]), r.choice([1, 2, 4, 6])), (3, 2)], _ref_conv),
    "matmul": (_matmul, lambda r: (lambda n, k, m: [(n, k), (k, m)])(*(r.choice([1, 3, 4, 5, 8]) for _ in range(3))),
               lambda A, B: A @ B),
    "softmax": (_softmax, lambda r: [(r.choice([1, 2, 5]), r.choice([1, 3, 4, 6]))], _ref_softmax),
    "red_then_ew": (_red_then_ew, lambda r: [_shapes2(r)], lambda A: (A * A).sum(1) * 0.5 + 1),
}


# ------------------------------------------------------------------ schedules
class Recorder:
    """Replays one random schedule (same seed -> same calls) and remembers what happened."""

    def __init__(self, seed: int, steps: int):
        self.seed, self.steps = seed, steps
        self.log: list = []        # (description, None | error message)

    def __call__(self, s):
        rng = random.Random(self.seed)
        self.log = []
        for _ in range(self.steps):
            name, fn = rng.choice(PRIMITIVES)
            try:
                desc = fn(s, rng)
            except ScheduleError as e:
                self.log.append((name, str(e)))
                continue
            except _Skip:
                continue
            self.log.append((desc or name, None))
        try:    # placements are checked on the finished schedule (any order that ends legal)
            s.finish()
        except ScheduleError as e:
            self.log.append(("finish", str(e)))


class _Skip(Exception):
    pass


def _stage(s, rng, pred=None):
    hs = [h for h in s.stages if pred is None or pred(h)]
    if not hs:
        raise _Skip
    return rng.choice(hs)


def _axis(h, rng, kind=None):
    ax = [a for a in h.leaf_axes if kind is None or a.kind.value == kind]
    if not ax:
        raise _Skip
    return rng.choice(ax)


def p_split(s, rng):
    h = _stage(s, rng)
    a = _axis(h, rng)
    f = rng.choice([1, 2, 3, 4, 5, 8, 16])
    if rng.random() < 0.8:
        h.split(a, factor=f)
        return f"{h.name}.split({a.name}, factor={f})"
    h.split(a, nparts=f)
    return f"{h.name}.split({a.name}, nparts={f})"


def p_fuse(s, rng):
    h = _stage(s, rng, lambda h: len(h.leaf_axes) >= 2)
    k = rng.randrange(len(h.leaf_axes) - 1)
    a, b = h.leaf_axes[k], h.leaf_axes[k + 1]
    h.fuse(a, b)
    return f"{h.name}.fuse({a.name}, {b.name})"


def p_reorder(s, rng):
    h = _stage(s, rng, lambda h: len(h.leaf_axes) >= 2)
    ax = list(h.leaf_axes)
    rng.shuffle(ax)
    ax = ax[:rng.randint(2, len(ax))]
    h.reorder(*ax)
    return f"{h.name}.reorder({', '.join(a.name for a in ax)})"


def p_tile(s, rng):
    h = _stage(s, rng, lambda h: len(h.leaf_axes) >= 2)
    k = rng.randrange(len(h.leaf_axes) - 1)
    a, b = h.leaf_axes[k], h.leaf_axes[k + 1]
    fx, fy = rng.choice([2, 3, 4]), rng.choice([2, 4, 5])
    h.tile(a, b, fx, fy)
    return f"{h.name}.tile({a.name}, {b.name}, {fx}, {fy})"


def _mark(kind):
    def p(s, rng):
        h = _stage(s, rng)
        a = _axis(h, rng)
        getattr(h, kind)(a)
        return f"{h.name}.{kind}({a.name})"
    p.__name__ = "p_" + kind
    return p


def p_compute_at(s, rng):
    h = _stage(s, rng)
    others = [o for o in s.stages if o is not h and (s.depends(o, h) or s.reads(h, o))]
    if not others:
        raise _Skip
    t = rng.choice(others)
    if not t.leaf_axes:
        raise _Skip
    a = rng.choice(t.leaf_axes)
    h.compute_at(t, a)
    return f"{h.name}.compute_at({t.name}, {a.name})"


def p_compute_inline(s, rng):
    h = _stage(s, rng)
    h.compute_inline()
    return f"{h.name}.compute_inline()"


def p_compute_root(s, rng):
    h = _stage(s, rng)
    h.compute_root()
    return f"{h.name}.compute_root()"


def p_rfactor(s, rng):
    h = _stage(s, rng, lambda h: h.stage.is_reduction)
    a = _axis(h, rng, "reduce")
    fa = rng.randint(0, len(h.axes))
    s.rfactor(h, a, factor_axis=fa)
    return f"s.rfactor({h.name}, {a.name}, {fa})"


def p_cache_read(s, rng):
    h = _stage(s, rng, lambda h: bool(h.stage.reads()))
    t = rng.choice(h.stage.reads())
    sc = rng.choice(["local", "shared", "global"])
    s.cache_read(t, sc, [h])
    return f"s.cache_read({t.name}, {sc!r}, [{h.name}])"


def p_cache_write(s, rng):
    h = _stage(s, rng)
    s.cache_write(h, "local")
    return f"s.cache_write({h.name}, 'local')"


def p_pack(s, rng):
    h = _stage(s, rng, lambda h: any(t.ndim >= 1 for t in h.stage.reads()))
    t = rng.choice([t for t in h.stage.reads() if t.ndim >= 1])
    ax, f = rng.randrange(t.ndim), rng.choice([2, 3, 4])
    s.pack(t, [h], axis=ax, factor=f)
    return f"s.pack({t.name}, [{h.name}], axis={ax}, factor={f})"


def p_bind(s, rng):
    h = _stage(s, rng)
    a = _axis(h, rng)
    tag = rng.choice(["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y", "vthread.x"])
    h.bind(a, tag)
    return f"{h.name}.bind({a.name}, {tag!r})"


def p_double_buffer(s, rng):
    h = _stage(s, rng)
    h.double_buffer()
    return f"{h.name}.double_buffer()"


PRIMITIVES = [("split", p_split), ("split", p_split), ("fuse", p_fuse), ("reorder", p_reorder),
              ("tile", p_tile), ("parallel", _mark("parallel")), ("vectorize", _mark("vectorize")),
              ("unroll", _mark("unroll")), ("compute_at", p_compute_at), ("compute_at", p_compute_at),
              ("compute_at", p_compute_at), ("compute_inline", p_compute_inline),
              ("compute_root", p_compute_root), ("rfactor", p_rfactor), ("cache_read", p_cache_read),
              ("cache_write", p_cache_write), ("pack", p_pack), ("bind", p_bind),
              ("double_buffer", p_double_buffer)]


# ------------------------------------------------------------------ one case
def run_case(seed: int, backend: str = "interp") -> tuple:
    """(outcome, details) for case ``seed``."""
    rng = random.Random(seed)
    kname = rng.choice(sorted(KERNELS))
    body, shapes_of, ref = KERNELS[kname]
    shapes = shapes_of(rng)
    nrng = np.random.default_rng(seed)
    args = [nrng.standard_normal(sh) for sh in shapes]
    rec = Recorder(seed * 7 + 1, rng.randint(1, 9))
    k = kd.kernel(body)
    k.schedule(backend)(rec)
    info = lambda: f"case {seed}: kernel {kname}, shapes {shapes}\n  " + "\n  ".join(  # noqa: E731
        d if err is None else f"REJECTED {d}: {err.splitlines()[0]}" for d, err in rec.log)
    t0 = time.perf_counter()
    try:
        k.lower(*args, backend=backend)
    except ScheduleError as e:
        if rec.log and rec.log[-1][0] == "finish":     # rejected when the schedule was finished
            return ("unfair" if _IR_REPR.search(rec.log[-1][1]) else "rejected"), info()
        return "late", info() + f"\n  at lowering: {e}"
    except Exception:
        return "crash", info() + "\n" + traceback.format_exc(limit=-4)
    dt = time.perf_counter() - t0
    if dt > SLOW_S:
        return "slow", info() + f"\n  lowering took {dt:.1f} s"
    for d, err in rec.log:
        if err is not None and _IR_REPR.search(err):
            return "unfair", info() + f"\n  message: {err}"
    try:
        out = k(*args, backend=backend)
    except Exception:
        return "crash", info() + "\n" + traceback.format_exc(limit=-4)
    want = ref(*args)
    if out.shape != want.shape or not np.allclose(out, want, rtol=1e-9, atol=1e-9):
        return "wrong", info() + f"\n  got {out!r}\n  want {want!r}"
    return ("rejected" if any(e for _, e in rec.log) else "ok"), info()


def search(cases: int, seed: int = 0, backend: str = "interp", verbose: bool = True) -> dict:
    """Run ``cases`` cases from ``seed``; return {outcome: [details...]}."""
    out: dict = {}
    for c in range(seed, seed + cases):
        kind, details = run_case(c, backend)
        out.setdefault(kind, []).append(details)
        if verbose and kind not in ("ok", "rejected"):
            print(f"[{kind}] {details}\n", file=sys.stderr)
    return out


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="interp")
    a = p.parse_args(argv)
    from kdsl.backends.interpreter import InterpreterBackend
    kd.register_backend("interp", InterpreterBackend())
    if a.backend == "cpu":
        import kdsl_cpu
        kd.register_backend("cpu", kdsl_cpu.backend)
    t0 = time.perf_counter()
    res = search(a.cases, a.seed, a.backend)
    print(f"{a.cases} cases in {time.perf_counter() - t0:.1f} s: "
          + ", ".join(f"{k} {len(v)}" for k, v in sorted(res.items())))
    return 0 if set(res) <= {"ok", "rejected"} else 1


if __name__ == "__main__":
    sys.exit(main())
