"""The default schedule of a matrix product ``C[i, j] = sum_k A[i, k] * B[k, j]``.

TVM's CPU GEMM recipe: C is cut into ``MR x NR`` register blocks; the
reduction into ``KC``-long blocks; the ``KC x NR`` panel of B that a block
needs is packed into a contiguous buffer once per (row chunk, column panel,
K block) and serves ``MC`` register blocks.  Each (row chunk, column panel)
pair is one parallel work item, so a thread packs its own panels and the whole
product is one parallel region.

Measured alternative (session 3): GotoBLAS's order, where all threads first
pack a K block of B into shared panels (``Schedule.pack``) and then compute,
was 10% faster on one core (no per-item packing) but 10-20% slower on the
16-core host, where the two parallel regions per K block wait on the
slowest thread; medians of interleaved rounds, against OpenBLAS in the same run.
"""
from __future__ import annotations

import math

from kdsl.ir import nodes as n
from kdsl.schedule import patterns
from kdsl.schedule.plan import PARTIALS, Recipe, reduce_names, spatial_names

MR = 6      # rows of the register block
NR = 64     # columns of the register block (4 zmm / 8 ymm vectors per row)
MC = 32     # register blocks per parallel chunk of rows (192 rows share one packed panel)
KC = 256    # reduction block: a packed KC x NR panel of B is 64 KiB


def is_matmul(stage) -> bool:
    """``sum_k X[.., i, k] * Y[.., k, j]`` (kdsl.schedule.patterns)."""
    return patterns.is_matmul(stage)


#: a matmul with at most this many rows (a constant) takes the generator's unpacked tiles
#: (measured below: a matrix-vector product reads each element of B once, packing it triples
#: the memory traffic)
SKINNY_ROWS = 1


def packed_wins(stage) -> bool:
    """Does the packed recipe beat the generator's unpacked tiles for this matmul?

    Measured (benchmarks/cpu_generator.py, one thread, N = K = 1024 and 4096, ratios to torch
    in the same rounds): M = 16 (specialised) packed 1.0x / 1.18x, generator 0.42x / 0.19x
    (B's rows, a power-of-two stride apart, fall into a few cache sets unless packed);
    M = 128 packed 0.88x both; M = 1 packed 5.9 / 1.6 GFLOP/s, generator 3.4 / 0.9 (one
    accumulator row: FMA latency bound).  So the packed recipe stayed for every matmul.
    Session 18 (edge tiles as masked vectors, so the generator's guess of 56 columns no longer
    pushes it to 8-lane tiles; 2-core box, one thread, N = K = 1024, best of 25): M = 1
    generator (1 x 64 x 256) 8.4 GFLOP/s, packed default 5.3, packed 1 x 128/256 4.5/5.0:
    M = 1 takes the generator (``SKINNY_ROWS``)."""
    rows = stage.axes[-2].dom.extent
    return not (isinstance(rows, n.Const) and rows.value <= SKINNY_ROWS)


def _names(stage):
    """(batch axis names, i, j, k) of a matmul stage."""
    *batch, i, j = spatial_names(stage)
    return batch, i, j, reduce_names(stage)[0]


def accepts(plan, stage) -> bool:
    """Can the recipe honour the hinted fields of ``plan``?  (Else the generic plan runs.)

    It can: ``tile`` of i (rows per parallel chunk), j (register block columns) and k
    (K block); ``unroll=N`` (N register block rows: the unrolled loop); ``vectorize=W``
    along j (the register block is a multiple of W); ``parallel`` over a spatial axis,
    True or False."""
    batch, i, j, k = _names(stage)
    if set(plan.tile) - {i, j, k} or plan.rfactor or plan.unroll_axes:
        return False
    if plan.parallel == PARTIALS or plan.parallel == k:
        return False
    return plan.vector_axis in (None, j)


def _params(plan, stage) -> dict:
    _, i, j, k = _names(stage)
    mr = plan.unroll if "unroll" in plan.explicit and plan.unroll else MR
    rows = plan.tile.get(i)
    if rows is not None and rows < mr:
        mr = rows
    mc = max(1, math.ceil(rows / mr)) if rows is not None else MC
    nr = plan.tile.get(j, NR)
    w = plan.vectorize if "vectorize" in plan.explicit else None
    if w and nr % w:
        nr = w * max(1, round(nr / w))
    return {"mr": mr, "mc": mc, "nr": nr, "kc": plan.tile.get(k, KC),
            "parallel": plan.parallel is not None}


def recipe() -> Recipe:
    """The GEMM as a plan recipe (hints adjust its block sizes, see ``accepts``)."""
    return Recipe("gemm", lambda sched, h, plan: gemm(sched, h, **_params(plan, h.stage)), accepts)


def gemm(sched, h, mr: int = MR, mc: int = MC, nr: int = NR, kc: int = KC,
         parallel: bool = True) -> None:
    """Blocked, packed, parallel schedule of the matmul stage ``h`` (see the module docstring).

    The reduction is cut into ``KC``-long blocks with ``rfactor``: the partial
    product of one block, ``C.rf[ko, i, j]``, is an ``MR x NR`` local tile
    computed inside C's row-block loop, and C adds it up over ``ko``.  Codegen
    emits the tile's rows as explicit vectors, so it lives in registers and
    each k step is MR broadcasts of A, NR/16 vector loads of B and MR*NR/16
    FMAs.  The ``KC x NR`` panel of B that the block reads is first copied
    into a contiguous local buffer (packing) at C's ``ko`` loop, where it
    serves ``MC`` row tiles from L1/L2 instead of strided rows of B whose
    power-of-two leading dimension would fall in a few cache sets.  The
    parallel loop runs over (batch, row chunk, column panel).
    """
    *batch, i, j = h.stage.axes
    (k,) = h.stage.reduce_axes
    ko, _ = h.split(k, factor=kc)
    rf = sched.rfactor(h, ko)
    (kv,) = h.reduce_axes
    io, ii = h.split(i, factor=mr)
    ioo, ioi = h.split(io, factor=mc)
    jo, ji = h.split(j, factor=nr)
    h.reorder(*batch, ioo, jo, kv, ioi, ii, ji)
    outer = h.fuse(*batch, ioo, jo)
    if parallel:
        h.parallel(outer)
    h.vectorize(ji)
    rf.compute_at(h, ioi)
    rko, *rbatch, ri, rj = rf.stage.axes
    (rk,) = rf.stage.reduce_axes
    rf.reorder(rko, *rbatch, rk, ri, rj)
    rf.unroll(ri)
    rf.vectorize(rj)
    rf.set_scope("local")
    bp = sched.cache_read(patterns.matmul_factors(rf.stage)[1].tensor, "local", [rf])
    bp.compute_at(h, kv)
    bp.vectorize(bp.stage.axes[-1])
