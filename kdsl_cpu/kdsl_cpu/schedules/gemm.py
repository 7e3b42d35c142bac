"""The default schedule of a matrix product ``C[i, j] = sum_k A[i, k] * B[k, j]``.

TVM's CPU GEMM recipe without the packing step: C is cut into ``MR x NR``
register blocks, each accumulated over the whole reduction in a local tile
that LLVM keeps in vector registers; blocks of ``MC`` row tiles are the
parallel chunks.  Not yet done: packing B into contiguous panels (each k step
reads NR floats from a different row of B, which costs TLB misses and
defeats the prefetcher) and blocking the reduction for L2.
"""
from __future__ import annotations

from kdsl.ir import nodes as n
from kdsl.ir.visitor import uses_var

MR = 6      # rows of the register block
NR = 64     # columns of the register block (4 zmm / 8 ymm vectors per row)
MC = 8      # register blocks per parallel chunk of rows (48 rows)


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
    """Register-blocked, parallel-over-row-blocks schedule of the matmul stage ``h``.

    The ``MR x NR`` block of C is accumulated in a local tile (``cache_write``)
    over the whole reduction; codegen emits its rows as explicit vectors, so
    the tile lives in registers and every k step is MR broadcasts of A, NR/16
    vector loads of B and MR*NR/16 FMAs.
    """
    cc = sched.cache_write(h, "local")
    *batch, i, j = h.stage.axes
    io, ii = h.split(i, factor=MR)
    ioo, ioi = h.split(io, factor=MC)
    jo, ji = h.split(j, factor=NR)
    h.reorder(*batch, ioo, jo, ioi, ii, ji)
    h.parallel(batch[0] if batch else ioo)
    cc.compute_at(h, ioi)
    *cbatch, ci, cj = cc.stage.axes
    (k,) = cc.stage.reduce_axes
    cc.reorder(*cbatch, k, ci, cj)
    cc.unroll(ci)
    cc.vectorize(cj)
