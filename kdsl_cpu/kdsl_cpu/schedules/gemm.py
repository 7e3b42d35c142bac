"""The default schedule of a matrix product ``C[i, j] = sum_k A[i, k] * B[k, j]``.

TVM's CPU GEMM recipe in BLIS's loop order: C is cut into ``MR x NR``
register blocks; the reduction into ``KC``-long blocks; the ``KC x NR`` panel
of B that a block needs is packed into a contiguous buffer once per
(row chunk, column panel, K block) and serves ``MC`` register blocks.
"""
from __future__ import annotations

from kdsl.ir import nodes as n
from kdsl.ir.visitor import uses_var

MR = 6      # rows of the register block
NR = 64     # columns of the register block (4 zmm / 8 ymm vectors per row)
MC = 32     # register blocks per parallel chunk of rows (192 rows share one packed panel)
KC = 256    # reduction block: a packed KC x NR panel of B is 64 KiB


def is_matmul(stage) -> bool:
    """``sum_k X[.., i, k] * Y[.., k, j]`` over one reduce axis with i, j the last two axes."""
    body = stage.body
    if not isinstance(body, n.Reduce) or len(stage.reduce_axes) != 1 or len(stage.axes) < 2:
        return False
    if body.combiner.name != "sum" or len(body.sources) != 1 or body.condition is not None:
        return False
    src = body.sources[0]
    while isinstance(src, n.Cast):
        src = src.a
    if not (isinstance(src, n.Binary) and src.op is n.BinOp.MUL):
        return False
    a, b = src.a, src.b
    while isinstance(a, n.Cast):
        a = a.a
    while isinstance(b, n.Cast):
        b = b.a
    if not (isinstance(a, n.TensorRead) and isinstance(b, n.TensorRead)):
        return False
    i, j = stage.axes[-2].var, stage.axes[-1].var
    k = stage.reduce_axes[0].var
    if len(a.indices) < 2 or len(b.indices) < 2:
        return False
    return (a.indices[-1] is k and a.indices[-2] is i and b.indices[-2] is k and b.indices[-1] is j
            and not uses_var(b.indices[-1], k))


def gemm(sched, h, threads: int) -> None:
    """Blocked, packed, parallel schedule of the matmul stage ``h`` (GotoBLAS's loop order).

    The reduction is cut into ``KC``-long blocks with ``rfactor``: the partial
    product of one block, ``C.rf[ko, i, j]``, is an ``MR x NR`` local tile
    computed inside C's row-block loop, and C adds it up over ``ko``.  Codegen
    emits the tile's rows as explicit vectors, so it lives in registers and
    each k step is MR broadcasts of A, NR/16 vector loads of B and MR*NR/16
    FMAs.  For each K block, all threads first copy B's ``KC`` rows into
    contiguous ``KC x NR`` panels (``pack``: rows of B are read whole, and a
    power-of-two leading dimension no longer maps a panel onto a few cache
    sets); then each thread takes (row chunk of ``MC`` tiles, panel) pairs.
    """
    *batch, i, j = h.stage.axes
    (k,) = h.stage.reduce_axes
    ko, _ = h.split(k, factor=KC)
    rf = sched.rfactor(h, ko)
    (kv,) = h.reduce_axes
    io, ii = h.split(i, factor=MR)
    ioo, mi = h.split(io, factor=MC)
    jo, ji = h.split(j, factor=NR)
    h.reorder(*batch, kv, ioo, jo, mi, ii, ji)
    if batch:   # many products: one per thread, each packing its own panels
        h.parallel(h.fuse(*batch) if len(batch) > 1 else batch[0])
    else:
        h.parallel(h.fuse(ioo, jo))
    h.vectorize(ji)
    rf.compute_at(h, mi)
    rko, *rbatch, ri, rj = rf.stage.axes
    (rk,) = rf.stage.reduce_axes
    rf.reorder(rko, *rbatch, rk, ri, rj)
    rf.unroll(ri)
    rf.vectorize(rj)
    rf.set_scope("local")
    bp = sched.pack(_b_operand(rf), [rf], axis=-1, factor=NR)
    bp.compute_at(h, kv)
    panel, *bbatch, bk, bj = bp.stage.axes
    bp.reorder(*bbatch, panel, bk, bj)
    if not batch:
        bp.parallel(bp.fuse(panel, bk))
    bp.vectorize(bj)

def _b_operand(cc):
    src = cc.stage.body.sources[0]
    while isinstance(src, n.Cast):
        src = src.a
    b = src.b
    while isinstance(b, n.Cast):
        b = b.a
    return b.tensor
