"""What a default cuda schedule needs to know about a stage: its kind, its reads, its sizes.

Pure inspection of the stage graph and of ``sched.size_hints`` (the range each symbolic
shape variable is known to lie in for this specialisation; empty when unknown); nothing here
changes a schedule.
"""
from __future__ import annotations

from kdsl.graph import Input
from kdsl.ir import nodes as n
from kdsl.ir.evaluate import eval_expr
from kdsl.ir.visitor import collect, uses_var
from kdsl.schedule.patterns import consumers, is_output  # noqa: F401  (shared)

#: reductions whose constant reduce extents multiply to at most this are unrolled (stencils)
SMALL_REDUCTION = 64


def reads_of(stage) -> list:
    """The ``TensorRead``s of a stage body."""
    return collect(stage.body, lambda x: isinstance(x, n.TensorRead))


def const_extent(iv) -> int | None:
    e = iv.dom.extent
    return int(e.value) if isinstance(e, n.Const) else None


def extent_range(sched, iv) -> tuple | None:
    """(lo, hi) of the extent of axis ``iv`` under ``sched.size_hints``, or None when unknown.

    Extents are monotone in the shape variables (``n``, ``n - 2``, ``ceildiv(n, 4)``), so the
    extremes come from all-low and all-high values."""
    c = const_extent(iv)
    if c is not None:
        return (c, c)
    return expr_range(sched, iv.dom.extent)


def expr_range(sched, e) -> tuple | None:
    """(lo, hi) of the size expression ``e`` (a shape, an extent: monotone in the shape
    variables) under ``sched.size_hints``, or None when unknown."""
    if isinstance(e, n.Const):
        return (int(e.value), int(e.value))
    hints = getattr(sched, "size_hints", None) or {}
    if not hints:
        return None
    try:
        lo = eval_expr(e, {v: r[0] for v, r in hints.items()})
        hi = eval_expr(e, {v: r[1] for v, r in hints.items()})
    except Exception:   # a variable without a hint (a scalar argument): unknown
        return None
    lo, hi = int(lo), int(hi)
    return (max(0, min(lo, hi)), max(0, lo, hi))


def typical(sched, axes) -> int | None:
    """A representative product of the extents of ``axes`` (geometric middle of the hinted
    range, which is within 2x of any size of a power-of-two size class), None if unknown."""
    total = 1
    for a in axes:
        r = extent_range(sched, a)
        if r is None:
            return None
        lo, hi = r
        total *= max(1, int((max(lo, 1) * max(hi, 1)) ** 0.5))
    return total


def is_small_reduction(stage) -> bool:
    """All reduce extents are constants with a small product (a stencil's window)."""
    if not stage.reduce_axes:
        return False
    total = 1
    for a in stage.reduce_axes:
        c = const_extent(a)
        if c is None:
            return False
        total *= c
    return total <= SMALL_REDUCTION


def _row_major(t) -> bool:
    op = getattr(t, "op", None)
    return bool(getattr(op, "contiguous", True)) if isinstance(op, Input) else True


def reduces_contiguously(stage) -> bool:
    """The streamed reads (those indexed by a reduction axis; a per-row statistic read at the
    output's index is not streamed) walk memory fastest along a reduction axis: each votes
    for the kind of axis its last index uses (a row reduction when reduce axes win)."""
    red = [a.var for a in stage.reduce_axes]
    votes = 0
    for r in reads_of(stage):
        if not r.indices or not _row_major(r.tensor):
            continue
        if not any(uses_var(e, v) for e in r.indices for v in red):
            continue
        votes += 1 if any(uses_var(r.indices[-1], v) for v in red) else -1
    return votes > 0


def trailing_reduce(stage) -> bool:
    """Every read of a row-major tensor indexes its last dimensions by the reduce axes, in
    order (``A[i, r0, r1]``), so the reduce axes can be fused into one contiguous walk."""
    k = len(stage.reduce_axes)
    ok = False
    for r in reads_of(stage):
        if len(r.indices) < k or not _row_major(r.tensor):
            continue
        tail = r.indices[-k:]
        if not all(e is a.var for e, a in zip(tail, stage.reduce_axes)):
            if any(uses_var(e, a.var) for e in r.indices for a in stage.reduce_axes):
                return False
            continue
        ok = True
    return ok


def item_bytes(stage) -> int:
    """The largest element size among the stage's reads and values (vector width bound)."""
    sizes = [stage.dtype.itemsize] + [r.dtype.itemsize for r in reads_of(stage)]
    return max(1, max(sizes))


def reads_by_row(reader, producer) -> bool:
    """``reader`` reads ``producer`` only at its own first axis as the first index."""
    first = reader.stage.axes[0].var if reader.stage.axes else None
    ok = False
    for r in reads_of(reader.stage):
        if r.tensor in producer.stage.values:
            if first is None or not r.indices or r.indices[0] is not first:
                return False
            ok = True
    return ok
