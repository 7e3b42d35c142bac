"""The default cuda schedule of a matrix product with few rows: ``C[i, j] = sum_k A[i, k] *
B[k, j]`` with ``M`` (the rows of A and C) at most ``ROWS_MAX`` -- an LLM's decode step, a
matrix-vector product.

Such a product is bound by reading B (``K x N``, every element used ``M`` times): the tiled
GEMM's 16 x 128 tiles gave 32 blocks for 16 x 4096 x 4096 (a quarter of the SMs) and read B
one element per thread.  Here:

* each thread owns ``vec`` adjacent columns of C (16 bytes of B per row: one vector load) and
  ``ROWS`` rows, its ``ROWS x vec`` sums in registers; B is read once, coalesced (a warp reads
  512 contiguous bytes of a row of B); A's few values per k are the same address for the
  whole warp (one broadcast load through L1);
* the k loop runs ``unroll`` rows of B at a time, so that several vector loads per thread are
  in flight (a memory-bound kernel needs ~16 KB in flight per SM);
* when the column blocks alone cannot fill the GPU, K is cut into chunks of a constant
  ``chunk`` rows (``parts`` of them at the bottom of the size class, up to twice that at its
  top), each reduced by its own blocks into a float32 partial (``rfactor``, a first kernel),
  which a second kernel adds (a column reduction; for a float16 product the cast to float16
  does it); the partials, ``parts x M x N`` floats written and read back, are kept to at most
  1 / PARTIAL_SHARE of B's bytes.  A constant chunk makes each part's k loop one of constant
  trips: the threads whose tile and part lie inside the arrays run it without a guard
  (``kdsl.gpu.thread_tiles``; with a guard per k step the unrolled loads sat in separate
  basic blocks: 16 x 4096 x 4096 float32 read B at 0.9 TB/s on the H200);
* float16 operands convert by value (``kd_h2fv``, one ``cvt`` shared by the products).

Chosen by ``kdsl_cuda.schedules.matmul_recipe`` (the one place a matmul's recipe is decided)
ahead of the tensor-core recipes: ``eligible`` below.  Hints: ``rfactor`` (the parts; 1: no
split), ``threads`` (threads per block), ``vectorize`` (columns per thread), ``unroll`` (rows
of B per k step).  (An ``rfactor`` hint keeps exactly that many parts: ceil(K / parts) rows
each, a guard per k step.)  A ``tile`` hint keeps the tiled GEMM.
"""
from __future__ import annotations

from dataclasses import dataclass

from kdsl.schedule import patterns

from . import analysis as A

#: products with at most this many rows (upper end of the size class) take this recipe
ROWS_MAX = 32
#: rows of C per thread (registers: ROWS * vec float32 sums: 64 for float32's 4 columns, and
#: for 16-bit operands' 8 columns at ROWS_16 rows)
ROWS = 16
ROWS_16 = 8
THREADS = 128
#: rows of B per unrolled k step (16-bit: 8 since the conversions are shared and branch-free;
#: with the branchy ones 8 took ~4x as long to compile as 4, now ~5 s for 16 x 4096 x 4096)
UNROLL = 8
UNROLL_16 = 8
SMS = 132
#: blocks that fill the GPU (8 blocks of 128 threads per SM; H200, session 19: with 4 a
#: matrix-vector product 1 x 4096 x 4096 float32 got 64 parts and read B at 1.85 TB/s, the
#: old guarded loop's sweep improved all the way from 8 to 64 parts)
TARGET_BLOCKS = 8 * SMS
#: at least this many rows of K per part (a part's thread runs MIN_PART_K / unroll steps)
MIN_PART_K = 32
#: the partials (parts x M x N float32, written and read back) at most 1 / PARTIAL_SHARE of
#: B's bytes
PARTIAL_SHARE = 2
#: columns of C below which the tiled GEMM serves (too few for a block of vectors)
MIN_COLS = 256


@dataclass(frozen=True)
class Decode:
    """The recipe's numbers (module docstring)."""
    rows: int
    threads: int
    vec: int
    parts: int | None
    unroll: int
    #: rows of K per part (a constant: the parts' k loops have constant trips, and the
    #: interior threads' copy of the work runs them without a guard); None: ``parts`` parts
    #: of K (an ``rfactor`` hint) or no split
    chunk: int | None = None


def _b_operand(stage):
    a, b = patterns.matmul_factors(stage)
    return a.tensor, b.tensor


def eligible(sched, h, plan) -> bool:
    """Whether matmul stage handle ``h`` takes the decode recipe: no batch axes, rows at most
    ROWS_MAX (a constant, or the top of the size class), columns at least MIN_COLS where known,
    a float32 sum (float32 operands, or 16-bit ones cast), no ``tile`` or ``tensor_cores=True``
    hint, and B read along its rows (``B[k, j]``)."""
    from kdsl import dtypes as dt
    st = h.stage
    if len(st.axes) != 2 or not patterns.is_matmul(st, distinct=True):
        return False
    if st.dtype is not dt.float32 or plan.tile:
        return False
    if sched.backend_hints.get(h.name, {}).get("tensor_cores") is True:
        return False
    a_t, b_t = _b_operand(st)
    if any(t.dtype not in (dt.float32, dt.float16, dt.bfloat16) for t in (a_t, b_t)):
        return False
    i, j = st.axes
    ri, rj = A.extent_range(sched, i), A.extent_range(sched, j)
    if ri is None or ri[1] > ROWS_MAX or ri[1] < 1:
        return False
    return rj is None or rj[1] >= MIN_COLS


def _pow2floor(x: int) -> int:
    return 1 << max(0, int(x).bit_length() - 1)


def _pow2ceil(x: int) -> int:
    return 1 << max(0, int(x - 1).bit_length()) if x > 1 else 1


def choose(sched, h, plan, threads_hint) -> Decode:
    """The numbers for the stage's sizes, adjusted by the hints (module docstring)."""
    st = h.stage
    a_t, b_t = _b_operand(st)
    item = b_t.dtype.itemsize
    vec = 16 // item
    if "vectorize" in plan.explicit:
        vec = plan.vectorize or 1
    threads = THREADS if threads_hint is None else threads_hint[0] * threads_hint[1]
    unroll = plan.unroll or (UNROLL if item == 4 else UNROLL_16)
    i, j = st.axes
    (k,) = st.reduce_axes
    ri = A.extent_range(sched, i)
    rows = ROWS if item == 4 else ROWS_16
    rows = min(rows, max(1, ri[1])) if ri else rows
    ni, nj, nk = A.typical(sched, [i]) or 1, A.typical(sched, [j]), A.typical(sched, [k])
    parts = None
    if nj is not None and nk is not None:
        blocks = -(-nj // (threads * vec)) * -(-ni // rows)
        want = -(-TARGET_BLOCKS // blocks)
        most = min(nk // MIN_PART_K, nk * item // (2 * 4 * ni * PARTIAL_SHARE))
        parts = min(_pow2ceil(want), _pow2floor(max(1, most)))
    chunk = None
    if "rfactor" in plan.explicit:
        parts = plan.rfactor
    elif parts and parts > 1:
        # a constant chunk from the bottom of the class (at its top: at most twice the parts),
        # a multiple of the unrolled step
        lo = A.extent_range(sched, k)[0]
        chunk = max(MIN_PART_K, _pow2floor(max(1, lo // parts)), unroll)
        chunk = -(-chunk // unroll) * unroll
        parts = -(-lo // chunk)
    return Decode(rows=rows, threads=threads, vec=vec,
                  parts=parts if parts and parts > 1 else None, unroll=unroll,
                  chunk=chunk if parts and parts > 1 else None)


def gemm(sched, C, cfg: Decode, epilogue=None) -> None:
    """Realise the decode recipe (module docstring) on matmul stage handle ``C``; ``epilogue``:
    the stage that only casts C to 16 bits (``a @ b`` of float16 matrices), which then adds
    the partials itself (one kernel fewer; realize skips it)."""
    from .recipes import _fuse, column_reduce
    a_t, b_t = _b_operand(C.stage)
    work = C
    if cfg.parts:
        (k,) = C.stage.reduce_axes
        if cfg.chunk:
            kp, _ = C.split(k, factor=cfg.chunk)
        else:
            kp, _ = C.split(k, nparts=cfg.parts)
        work = sched.rfactor(C, kp, 0)              # work[p, i, j]: a block per (part, columns)
        if epilogue is not None:
            _sum_in_cast(sched, C, epilogue, cfg.threads)
        else:       # C[i, j] = sum_p work[p, i, j]: partials read along j, a column reduction
            column_reduce(sched, C, threads=cfg.threads, vec=4, parts=None, unroll=None)
    elif epilogue is not None:
        # no partials: C's kernel stores float32, the cast its own kernel
        from .recipes import elementwise
        elementwise(sched, epilogue, threads=THREADS, vec=8, tiles={}, unroll=None)
    local = sched.cache_write(work, "local")
    *rest, i, j = work.stage.axes
    io, ii = work.split(i, factor=cfg.rows)
    jv = None
    if cfg.vec > 1:
        j, jv = work.split(j, factor=cfg.vec)
    jo, jt = work.split(j, factor=cfg.threads)
    work.reorder(*[a for a in (*rest, io, jo, jt, ii, jv) if a is not None])
    work.bind(_fuse(work, [*rest, io, jo]), "blockIdx.x")
    work.bind(jt, "threadIdx.x")
    if jv is not None:
        work.vectorize(jv)
    local.compute_at(work, jt)
    *lrest, li, lj = local.stage.axes
    (lk,) = local.stage.reduce_axes
    order = [*lrest]
    if cfg.unroll > 1:
        ko, ku = local.split(lk, factor=cfg.unroll)
        order += [ko, ku]
    else:
        ku = lk
        order += [lk]
    local.reorder(*order, li, lj)
    if cfg.unroll > 1:
        local.unroll(ku)
    local.unroll(li)
    if cfg.vec > 1:
        local.vectorize(lj)
    # this k's slice of B (vec columns) in registers, one vector load per k (16-bit: the raw
    # bits, converted where the sums read them)
    bl = sched.cache_read(b_t, "local", [local])
    bl.compute_at(local, ku)
    if cfg.vec > 1:
        bl.vectorize(bl.axes[-1])


def _sum_in_cast(sched, C, E, threads: int) -> None:
    """The cast stage ``E`` (``E[i, j] = f16(C[i, j])``) over blocks of ``threads`` x 4
    columns; C's sum of the partials computed inside each thread (a local 1 x 4 tile)."""
    from .recipes import _fuse
    *rest, i, j = E.stage.axes
    j, jv = E.split(j, factor=4)
    jo, jt = E.split(j, factor=threads)
    E.reorder(*rest, i, jo, jt, jv)
    E.bind(_fuse(E, [*rest, i, jo]), "blockIdx.x")
    E.bind(jt, "threadIdx.x")
    E.vectorize(jv)
    C.compute_at(E, jt)
    C.set_scope("local")
    *_, cj = C.stage.axes
    (p,) = C.stage.reduce_axes
    C.reorder(*C.stage.axes[:-1], p, cj)
    C.vectorize(cj)
