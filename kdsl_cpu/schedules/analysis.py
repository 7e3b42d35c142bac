"""What a default schedule needs to know about a stage: its shape of work and its reads.

Pure inspection of the stage graph; nothing here changes a schedule.
"""
from __future__ import annotations

from dataclasses import dataclass

from kdsl.graph import Input
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect, uses_var
from kdsl.schedule.patterns import consumers, is_output  # noqa: F401  (shared)

#: reductions whose constant reduce extents multiply to at most this are unrolled (stencils)
SMALL_REDUCTION = 64


@dataclass
class Read:
    """One ``tensor[indices]`` read of a stage body."""

    tensor: object
    indices: tuple

    def last_uses(self, var) -> bool:
        """Does the fastest-varying (last) index of a row-major tensor use ``var``?"""
        return bool(self.indices) and uses_var(self.indices[-1], var)


def reads_of(stage) -> list:
    return [Read(r.tensor, tuple(r.indices))
            for r in collect(stage.body, lambda x: isinstance(x, n.TensorRead))]


def row_major(t) -> bool:
    """Reads of ``t`` walk memory fastest along the last index (C-contiguous inputs, temporaries)."""
    op = getattr(t, "op", None)
    if isinstance(op, Input):
        return bool(getattr(op, "contiguous", True))
    return True


def const_extent(iv) -> int | None:
    e = iv.dom.extent
    return int(e.value) if isinstance(e, n.Const) else None


def _const_product(axes) -> int | None:
    """The product of the axes' extents when all are constants, else None."""
    total = 1
    for a in axes:
        c = const_extent(a)
        if c is None:
            return None
        total *= c
    return total


def small_reduction(stage) -> bool:
    """All reduce extents are constants with a small product (a stencil's window)."""
    if not stage.reduce_axes:
        return False
    total = _const_product(stage.reduce_axes)
    return total is not None and total <= SMALL_REDUCTION


def spatial_work(stage) -> int | None:
    """The number of output elements when every spatial extent is a constant, else None."""
    return _const_product(stage.axes)


def column_reduction(stage) -> bool:
    """The innermost spatial axis (not a reduce axis) walks the big reads' last dimension."""
    if not stage.axes or not stage.reduce_axes:
        return False
    inner = stage.axes[-1].var
    votes = 0
    for r in reads_of(stage):
        if not r.indices or not row_major(r.tensor):
            continue
        red = any(r.last_uses(a.var) for a in stage.reduce_axes)
        if r.last_uses(inner) and not red:
            votes += 1
        elif red:
            votes -= 1
    return votes > 0


def is_output(sched, h) -> bool:
    return any(t in sched.output_tensors() for t in h.stage.values)
