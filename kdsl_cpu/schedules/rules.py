"""The default CPU schedule of each kind of stage (see __init__ for how one is chosen).

Shapes are usually symbolic when a kernel compiles, so the rules look at
the access pattern and constant extents, never at sizes they cannot know.
Loops keep the stage's row-major order unless the memory walk asks for
another; LLVM vectorizes the innermost loop (cpu codegen tags reduction
updates as reassociable and every buffer as its own alias scope).
"""
from __future__ import annotations

from kdsl.ir import nodes as n

from .analysis import const_extent

#: 1-D elementwise loops are cut into chunks of this many elements for the threads
CHUNK_1D = 16384
#: column reductions walk this many adjacent outputs per row of the input
COLUMN_TILE = 256


def elementwise(h) -> None:
    """Parallel over the outermost axis (1-D: over chunks); the inner loop is LLVM's to vectorize."""
    axes = list(h.stage.axes)
    if not axes:
        return
    if len(axes) == 1:
        c = const_extent(axes[0])
        if c is not None and c <= CHUNK_1D:
            return
        outer, _ = h.split(axes[0], factor=CHUNK_1D)
        h.parallel(outer)
        return
    h.parallel(axes[0])


def row_reduction(h) -> None:
    """Reduce loops innermost (contiguous, vectorized by reassociation); parallel over rows."""
    if h.stage.axes:
        h.parallel(h.stage.axes[0])


def column_reduction(h) -> None:
    """Reduce over rows while a strip of adjacent outputs stays in L1: ``jo, r..., ji``."""
    axes, red = list(h.stage.axes), list(h.stage.reduce_axes)
    jo, ji = h.split(axes[-1], factor=COLUMN_TILE)
    h.reorder(*axes[:-1], jo, *red, ji)
    h.parallel(axes[0] if len(axes) > 1 else jo)


def stencil(h) -> None:
    """Small constant windows: unroll the window loops inside the row; parallel over rows."""
    for a in h.stage.reduce_axes:
        h.unroll(a)
    if h.stage.axes:
        h.parallel(h.stage.axes[0])


def split_reduction(sched, h, parts: int) -> None:
    """Few outputs, long reduction: ``parts`` partial results in parallel, then a short combine."""
    red = list(h.stage.reduce_axes)
    ro, _ = h.split(red[0], nparts=parts)
    rf = sched.rfactor(h, ro)
    rf.parallel(rf.stage.axes[0])
