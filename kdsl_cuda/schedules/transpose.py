"""The default cuda schedule of an elementwise stage that reads a tensor transposed
(``a.T + 0.0``, ``x + y.T``): ``out[.., i, j] = f(A[.., j, i], ...)``.

The elementwise recipe puts threadIdx.x along ``j`` (the output's contiguous axis), so a warp
writes one row of the output but reads A down a column: 32 rows of A per access, a quarter
of each 32-byte sector used (``a.T + 0.0`` 16384^2 f32 ran at 26% of copy bandwidth).  Here
each block owns a ``TILE x TILE`` tile of the output:

* its threads first copy the matching tile of A into shared memory along A's rows (16-byte
  vectors, coalesced reads);
* then each thread computes ``TILE / TY`` outputs of its column, threadIdx.x along ``j``
  (coalesced writes), reading A's elements from the shared tile down a column (its rows are
  padded by 16 bytes, ``kdsl.gpu.shared_layout``: a column spans eight banks, not one).

Every other read of the stage stays a direct read of global memory (along ``j``: coalesced).
Chosen by ``transposed_read`` (called from the one place an elementwise root stage's recipe
is decided, ``kdsl_cuda.schedules._root_recipe``) unless a hint names the stage's tiling
(``tile``, ``threads``, ``vectorize``).
"""
from __future__ import annotations

from . import analysis as A

#: output tile per block (TILE x TILE), threads (TILE x TY)
TILE = 32
TY = 8


def transposed_read(sched, h, plan):
    """The tensor stage handle ``h`` reads transposed in its last two axes (``T[.., j, i]``
    for output axes ``.., i, j``), or None; None too when either axis is a constant shorter
    than a tile or a hint tiles the stage."""
    st = h.stage
    if st.is_reduction or len(st.axes) < 2:
        return None
    if plan.tile or {"vectorize", "unroll"} & set(plan.explicit):
        return None
    if sched.backend_hints.get(h.name, {}).get("threads") is not None:
        return None
    i, j = st.axes[-2], st.axes[-1]
    for ax in (i, j):
        c = A.const_extent(ax)
        if c is not None and c < TILE:
            return None
    reads = A.reads_of(st)
    for r in reads:
        if len(r.indices) >= 2 and r.indices[-1] is i.var and r.indices[-2] is j.var \
                and r.tensor.ndim >= 2 and A._row_major(r.tensor):
            t = r.tensor
            # every read of it transposed the same way (``x + x.T`` would make the cached
            # region the box around two tiles)
            if all(tuple(q.indices) == tuple(r.indices) for q in reads if q.tensor is t):
                return t
    return None


def transpose_tile(sched, x, tensor, *, tile: int | None = None, ty: int | None = None,
                   vec: int = 4) -> None:
    """Realise the tiled transpose (module docstring) on stage handle ``x`` reading ``tensor``
    transposed (``tile``, ``ty``: TILE and TY, read at the call)."""
    tile, ty = tile or TILE, ty or TY
    from .gemm import coop_copy
    from .recipes import _fuse
    S = sched.cache_read(tensor, "shared", [x])
    *rest, i, j = x.stage.axes
    io, ii = x.split(i, factor=tile)
    jo, ji = x.split(j, factor=tile)
    iq, it = x.split(ii, factor=ty)
    x.reorder(*rest, io, jo, it, ji, iq)
    blk = _fuse(x, [*rest, io, jo])
    x.bind(blk, "blockIdx.x")
    x.bind(it, "threadIdx.y")
    x.bind(ji, "threadIdx.x")
    S.compute_at(x, blk)
    v = max(1, min(vec, 16 // max(1, tensor.dtype.itemsize)))
    while v > 1 and tile * tile // v < tile * ty:
        v //= 2         # every thread of the block copies at least one vector
    coop_copy(S, v, ("threadIdx.y", ty), ("threadIdx.x", tile))
