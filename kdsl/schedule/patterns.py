"""Stage patterns and graph queries that backends' default schedules share (every target).

``matmul_factors(stage)`` and ``is_matmul(stage)`` find ``sum_k X[.., i, k] * Y[.., k, j]``:
the CPU backend gives it its blocked GEMM recipe, the CUDA backend its tiled one.
``consumers``, ``is_output`` and ``sole_root`` answer who reads a stage (for attaching
producers of row-wise chains at their consumer's row); ``cast_read`` finds a stage that only
casts another.
"""
from __future__ import annotations

from ..ir import nodes as n
from ..ir.visitor import uses_var
from .records import AttachKind


def consumers(sched, h) -> list:
    """Handles of the (non-inlined) stages that read ``h``'s values."""
    return [o for o in sched.stages if o is not h and o.attach is not AttachKind.INLINE
            and sched.reads(o, h)]


def is_output(sched, h) -> bool:
    """Whether stage handle ``h`` computes a kernel output."""
    return any(t in sched.output_tensors() for t in h.stage.values)


def sole_root(sched, h, attach: dict):
    """``(readers, root)``: the stages reading ``h`` and the one stage they all are or are
    attached to (``attach``: stage name -> the root name it is computed at), or None."""
    readers = consumers(sched, h)
    if not readers:
        return None
    roots = {attach.get(r.name, r.name) for r in readers}
    if len(roots) != 1:
        return None
    return readers, sched[roots.pop()]


def cast_read(stage):
    """The TensorRead that ``stage`` only casts, element for element (``O[i, j] = T(X[i, j])``
    at its own axes: what ``A @ B`` of float16 arrays adds after its float32 product), or None."""
    body = stage.body
    if not isinstance(body, n.Cast) or not isinstance(body.a, n.TensorRead):
        return None
    if tuple(body.a.indices) != tuple(a.var for a in stage.axes):
        return None
    return body.a


def _uncast(e):
    while isinstance(e, n.Cast):
        e = e.a
    return e


def matmul_factors(stage):
    """The two TensorReads of ``sum_k X[..] * Y[..]`` (casts peeled), or None."""
    body = stage.body
    if not isinstance(body, n.Reduce) or len(body.sources) != 1:
        return None
    src = _uncast(body.sources[0])
    if not (isinstance(src, n.Binary) and src.op is n.BinOp.MUL):
        return None
    a, b = _uncast(src.a), _uncast(src.b)
    return (a, b) if isinstance(a, n.TensorRead) and isinstance(b, n.TensorRead) else None


def is_matmul(stage, distinct: bool = False) -> bool:
    """``sum_k X[.., i, k] * Y[.., k, j]`` over one reduce axis, ``i`` and ``j`` the last two
    axes; ``distinct``: X and Y must be different tensors (a recipe that caches each)."""
    body = stage.body
    if not isinstance(body, n.Reduce) or len(stage.reduce_axes) != 1 or len(stage.axes) < 2:
        return False
    if body.combiner.kind is not n.CombinerKind.SUM or body.condition is not None:
        return False
    ab = matmul_factors(stage)
    if ab is None:
        return False
    a, b = ab
    i, j = stage.axes[-2].var, stage.axes[-1].var
    k = stage.reduce_axes[0].var
    if len(a.indices) < 2 or len(b.indices) < 2 or (distinct and a.tensor is b.tensor):
        return False
    return (a.indices[-1] is k and a.indices[-2] is i and b.indices[-2] is k and b.indices[-1] is j
            and not uses_var(b.indices[-1], k))
