"""The default schedule of a matrix product ``C[i, j] = sum_k A[i, k] * B[k, j]``.

Blocked for the caches (TVM's CPU GEMM recipe): a panel of B of ``KB`` rows
by ``NB`` columns stays in L2 while every row of A streams past it; inside,
``MR`` rows of C are updated together so each B vector loaded from L1 feeds
``MR`` fused multiply-adds, and the column loop is vectorized.
"""
from __future__ import annotations

from kdsl.ir import nodes as n
from kdsl.ir.visitor import uses_var

NB = 512    # columns of a B panel (2 KiB of float32 per row: L1-friendly rows)
KB = 256    # rows of a B panel (NB*KB*4 = 512 KiB: fits L2)
MR = 4      # rows of C updated together


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
    """Blocked, register-tiled, parallel-over-rows schedule of the matmul stage ``h``."""
    *batch, i, j = h.stage.axes
    (k,) = h.stage.reduce_axes
    jo, ji = h.split(j, factor=NB)
    ko, ki = h.split(k, factor=KB)
    io, ii = h.split(i, factor=MR)
    h.reorder(*batch, jo, ko, io, ki, ii, ji)
    h.parallel(io)
    h.unroll(ii)
    h.vectorize(ji)
