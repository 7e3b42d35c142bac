"""The default cuda schedule of a matrix product ``C[.., i, j] = sum_k A[.., i, k] * B[.., k, j]``.

The seed-002 ladder's thread-tiling step: a ``BM x BN`` tile of C per block (batch axes and
the tile index fused into blockIdx.x), ``TY x TX`` threads each accumulating a
``BM/TY x BN/TX`` sub-tile in local memory (registers), the reduction cut into ``BK``-long
steps whose A and B tiles are copied into shared memory by all the block's threads, and
the per-thread slices of those tiles read into local memory at each k.  Correct for every
shape (the core guards partial tiles); the GEMM issue makes it fast (vectorised copies,
cp.async stages, tensor cores).
"""
from __future__ import annotations

from kdsl.ir import nodes as n
from kdsl.schedule import patterns

BM = BN = 64
BK = 8
TY = TX = 8


factors = patterns.matmul_factors


def is_matmul(stage) -> bool:
    """``sum_k X[.., i, k] * Y[.., k, j]`` of two different tensors (kdsl.schedule.patterns):
    the tiled recipe caches each in shared memory."""
    return patterns.is_matmul(stage, distinct=True)


def fits(stage, *, bm=BM, bn=BN, bk=BK, ty=TY, tx=TX, vec=1, **_) -> bool:
    """Whether the tiled GEMM is a legal GPU kernel for ``stage``'s constant extents.

    A split of a constant extent by a larger factor is that extent (kdsl's schedules), so a
    small constant ``i``, ``j`` or ``k`` shrinks the tiles: every loop bound to a thread index
    must still have the block's extent, i.e. C's thread loops (``i`` and ``j`` at least ``ty``
    and ``tx``) and the two cooperative copies (each tile at least ``ty * tx`` vectors).
    Symbolic extents keep the full tiles."""
    *_, i, j = stage.axes
    (k,) = stage.reduce_axes
    bm, bn = max(bm, ty), max(bn, tx)

    def clamp(tile, axis):
        e = axis.dom.extent
        c = int(e.value) if isinstance(e, n.Const) else None
        return tile if c is None or c < 1 else min(tile, c)
    ri, rj, rk = clamp(bm, i), clamp(bn, j), clamp(bk, k)
    threads = ty * tx
    return (ri >= ty and rj >= tx and -(-ri * rk // vec) >= threads
            and -(-rk * rj // vec) >= threads)


def _coop_copy(X, ty, tx, vec):
    """All ``ty * tx`` threads copy stage X's region: elements fused, dealt out in turn,
    ``vec`` consecutive elements per thread and turn (vectorized)."""
    f = X.fuse(*X.axes) if len(X.axes) > 1 else X.axes[0]
    if vec > 1:
        f, v = X.split(f, factor=vec)
        X.vectorize(v)
    _, t = X.split(f, factor=ty * tx)
    y, x = X.split(t, factor=tx)
    X.bind(y, "threadIdx.y")
    X.bind(x, "threadIdx.x")


def gemm(sched, C, *, bm=BM, bn=BN, bk=BK, ty=TY, tx=TX, vec=1, stages=None, unroll=None):
    """Realise the tiled shared-memory matmul on stage handle ``C`` (see the module docstring)."""
    a_t, b_t = (r.tensor for r in factors(C.stage))
    bm, bn = max(bm, ty), max(bn, tx)
    CL = sched.cache_write(C, "local")
    AA = sched.cache_read(a_t, "shared", [CL])
    BB = sched.cache_read(b_t, "shared", [CL])
    AL = sched.cache_read(AA, "local", [CL])
    BL = sched.cache_read(BB, "local", [CL])
    *batch, i, j = C.stage.axes
    by, yi = C.split(i, factor=bm)
    bx, xi = C.split(j, factor=bn)
    tyl, yi = C.split(yi, nparts=ty)
    txl, xi = C.split(xi, nparts=tx)
    C.reorder(*batch, by, bx, tyl, txl, yi, xi)
    C.bind(C.fuse(*batch, by, bx) if batch else C.fuse(by, bx), "blockIdx.x")
    C.bind(tyl, "threadIdx.y")
    C.bind(txl, "threadIdx.x")
    CL.compute_at(C, txl)
    (k,) = CL.stage.reduce_axes
    ko, ki = CL.split(k, factor=bk)
    *cb, ci, cj = CL.stage.axes
    CL.reorder(*cb, ko, ki, ci, cj)
    if unroll and unroll > 1:
        CL.unroll(ki)
    AL.compute_at(CL, ki)
    BL.compute_at(CL, ki)
    for X in (AA, BB):
        X.compute_at(CL, ko)
        _coop_copy(X, ty, tx, vec)
        if stages == 2:
            X.double_buffer()
        elif stages and stages > 2:
            X.pipeline(stages)
