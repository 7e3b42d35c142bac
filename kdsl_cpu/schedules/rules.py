"""The default CPU plan of each kind of stage (see __init__ for how one is chosen).

Each rule returns a ``kdsl.schedule.plan.StagePlan``: hints then adjust its
fields and ``plan.realize`` applies it.  Shapes are usually symbolic when a
kernel compiles, so the rules look at the access pattern and constant
extents, never at sizes they cannot know.  Loops keep the stage's row-major
order unless the memory walk asks for another; LLVM vectorizes the innermost
loop (cpu codegen tags reduction updates as reassociable and every buffer as
its own alias scope).
"""
from __future__ import annotations

from kdsl.schedule.plan import PARTIALS, StagePlan, reduce_names, spatial_names

from .analysis import const_extent

#: 1-D elementwise loops are cut into chunks of this many elements for the threads
CHUNK_1D = 16384
#: column reductions walk this many adjacent outputs per row of the input
COLUMN_TILE = 256


def elementwise(stage) -> StagePlan:
    """Parallel over the outermost axis (1-D: over chunks); the inner loop is LLVM's to vectorize."""
    axes = list(stage.axes)
    if not axes:
        return StagePlan()
    if len(axes) == 1:
        c = const_extent(axes[0])
        if c is not None and c <= CHUNK_1D:
            return StagePlan()
        name = spatial_names(stage)[0]
        return StagePlan(tile={name: CHUNK_1D}, parallel=name)
    return StagePlan(parallel=spatial_names(stage)[0])


def row_reduction(stage) -> StagePlan:
    """Reduce loops innermost (contiguous, vectorized by reassociation); parallel over rows."""
    return StagePlan(parallel=_first(stage))


def column_reduction(stage) -> StagePlan:
    """Reduce over rows while a strip of adjacent outputs stays in L1: ``jo, r..., ji``."""
    names = spatial_names(stage)
    return StagePlan(tile={names[-1]: COLUMN_TILE}, parallel=names[0])


def stencil(stage) -> StagePlan:
    """Small constant windows: unroll the window loops inside the row; parallel over rows."""
    return StagePlan(unroll_axes=tuple(reduce_names(stage)), parallel=_first(stage))


def attached(stage, small: bool) -> StagePlan:
    """A stage computed inside its consumer's row loop: no loop of its own is parallel."""
    return StagePlan(unroll_axes=tuple(reduce_names(stage)) if small else ())


def split_reduction(stage, parts: int) -> StagePlan:
    """Few outputs, long reduction: ``parts`` partial results in parallel, then a short combine."""
    return StagePlan(rfactor=parts, parallel=PARTIALS)


def _first(stage):
    names = spatial_names(stage)
    return names[0] if names else None
