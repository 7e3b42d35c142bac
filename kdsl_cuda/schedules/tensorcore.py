"""The default cuda schedule of a 16-bit matrix product on tensor cores.

``C[.., i, j] = sum_k f32(A[.., i, k]) * f32(B[.., k, j])`` with A and B both float16 or both
bfloat16 (what ``A @ B`` traces to for 16-bit operands: float32 accumulation) is tensorized
with ``kd.intrin.wmma(16, 16, 16)``:

* a block computes a ``(16 * WY * TY) x (16 * WX * TX)`` tile of C (256 x 128 by default) with
  ``WY x WX`` warps (threadIdx.z, threadIdx.y; the 32 lanes are threadIdx.x), each warp a
  ``TY x TX`` grid of 16 x 16 accumulator fragments (16 by default: 128 registers a thread);
  smaller products get fewer warps and fragments;
* the reduction goes in ``BK``-long steps (64 by default): each step's A and B tiles are
  copied into shared memory by all the block's threads, 8 elements (16 bytes) per thread and
  turn, multi-buffered with asynchronous copies (``stages``, 3 by default) so the copies of
  the next steps overlap the products of this one; the tiles are padded caches
  (``cache_read(pad=True)``: zeros beyond the matrix), so fragments load whole tiles with
  no edge test;
* within a step, each warp loads its A and B fragments from shared memory 16 columns of k at a
  time (those k steps unrolled) and issues ``TY * TX`` fragment products;
* the accumulators are stored into C (partial tiles of sizes that do not divide 16 are exact:
  the core clips every fragment load and store).

A batched product (one batch dimension) takes one matrix per blockIdx.z (fused into
blockIdx.x when there may be more than 65535); its fragments hold one matrix each.

Used by default (``tensor_cores=False`` or ``KDSL_CUDA_TENSOR_CORES=0`` opt out) when no
extent is a constant below 16 (a matrix of one row is a matrix-vector product: the f32 recipe
serves it better).  Correct for every other shape, including sizes that do not divide the
tiles.
"""
from __future__ import annotations

import kdsl as kd
from kdsl import dtypes as dt
from kdsl.schedule import patterns
from kdsl.schedule.records import AttachKind

from . import analysis as A
from .gemm import bind_blocks, coop_copy, multi_buffer, size_bound

#: warps per block (rows, columns) and 16 x 16 tiles per warp (rows, columns): 256 x 128
#: blocks of 8 warps of 64 x 64 (H200, 8192^3: 8.8 ms against 12.2 ms for 128 x 128 blocks of
#: 64 x 32 warps; notes/measurements/cuda_gemm_h200_session10.txt); BK 64: 5.0 against 5.4 ms
#: for 32 (session 11, padded tiles)
WY, WX, TY, TX = 4, 2, 4, 4
BK = 64
STAGES = 3
#: unroll the 16-deep k steps within a BK step
UNROLL = True
#: elements of a 16-byte vector of a 16-bit type
VEC = 8


def tensor_cores_hint(sched, h):
    """The ``tensor_cores`` hint of matmul ``h`` (None when not given).  Hints without
    ``stage=`` land on it even for a 16-bit ``A @ B``, whose output only casts this float32
    product (``kdsl.schedule.hints``: the default stage is the reduction a cast wraps)."""
    return sched.backend_hints.get(h.name, {}).get("tensor_cores")


def unsuitable(h) -> str | None:
    """Why matmul stage handle ``h`` cannot take the tensor-core recipe (None: it can)."""
    stage = h.stage
    ab = patterns.matmul_factors(stage)
    if ab is None or stage.dtype is not dt.float32 or \
            ab[0].tensor.dtype not in (dt.float16, dt.bfloat16) or \
            ab[1].tensor.dtype is not ab[0].tensor.dtype:
        return ("tensor cores take float16 or bfloat16 operands (both of one type) accumulated "
                "in float32 (cast the operands, e.g. A.astype('float16') @ B.astype('float16'))")
    if len(stage.axes) not in (2, 3):
        return ("products with more than one batch dimension do not run on tensor cores yet "
                "(reshape the batch dimensions into one)")
    for iv in (*stage.axes[-2:], *stage.reduce_axes):
        c = A.const_extent(iv)
        if c is not None and c < 16:
            return (f"axis {iv.var.name} has {c} iterations, fewer than a 16x16x16 fragment "
                    f"(a size-1 dimension makes a matrix-vector product)")
    return None


def eligible(sched, h) -> bool:
    """Whether stage handle ``h`` (a matmul) takes the tensor-core recipe: where it can, unless
    ``tensor_cores=False`` (or, without the hint, ``KDSL_CUDA_TENSOR_CORES=0``)."""
    from kdsl import config
    want = tensor_cores_hint(sched, h)
    return (config.cuda_tensor_cores() if want is None else want) and unsuitable(h) is None


def cast_epilogue(sched, h, plans: dict):
    """The stage handle that only casts matmul ``h``'s float32 result to a 16-bit float (what
    ``A @ B`` of float16 matrices traces to: a float32 product, then its cast), when the
    tensor-core store can do that cast instead (a converting ``WmmaStore``: no float32
    intermediate, no second kernel), else None.  It must be ``h``'s only reader, read ``h``
    at its own indices, and carry no hint or schedule of its own."""
    if A.is_output(sched, h):
        return None
    readers = [r for r in sched.stages if r is not h and sched.reads(r, h)]
    if len(readers) != 1:
        return None
    (d,) = readers
    st, plan = d.stage, plans.get(d.name)
    rd = patterns.cast_read(st)
    if (plan is None or plan.explicit or d.attach is not AttachKind.ROOT or d.relations
            or d.store_predicate is not None or len(st.values) != 1 or rd is None
            or rd.tensor is not h.stage.output or len(st.axes) != len(h.stage.axes)
            or st.dtype not in (dt.float16, dt.bfloat16) or st.body.dtype is not st.dtype):
        return None
    return d


def _shrink(sched, iv, warps: int, tiles: int) -> tuple:
    """Fewer warps/tiles along an axis whose size (known or hinted) is smaller than the tile;
    a constant size holds the whole tile (else bound inference would cut the block's loop to
    the size, and the warps split from it would not match the copies' thread loops: M = 48
    with 64-row blocks made 3 warps against 4)."""
    const = A.const_extent(iv)
    size = size_bound(sched, iv)
    while size is not None and warps * tiles * 16 >= 2 * size and tiles > 1:
        tiles //= 2
    while size is not None and warps * tiles * 16 >= 2 * size and warps > 1:
        warps //= 2
    while const is not None and warps * tiles * 16 > const and tiles > 1:
        tiles //= 2
    while const is not None and warps * tiles * 16 > const and warps > 1:
        warps //= 2
    return warps, tiles


def _extent(iv, tile: int) -> int:
    """The extent of a tile of ``tile`` along ``iv`` (a constant extent below it: that)."""
    c = A.const_extent(iv)
    return tile if c is None else min(tile, c)


def _vector(rows: int, cols: int, threads: int) -> int | None:
    """Elements per thread and turn of a cooperative copy of a rows x cols tile: every one of
    the block's ``threads`` must get at least one turn (each loop bound to a thread index has
    the block's extent); None when even single elements are too few."""
    vec = VEC
    while vec > 1 and (rows * cols) // vec < threads:
        vec //= 2
    return vec if rows * cols >= threads else None


def gemm(sched, C, *, wy=WY, wx=WX, ty=TY, tx=TX, bk=BK, stages=STAGES, unroll=UNROLL,
         epilogue=None) -> None:
    """Realise the tensor-core GEMM on matmul stage handle ``C`` (see the module docstring).
    ``epilogue``: C's cast to 16 bits (``cast_epilogue``), done by the fragment stores."""
    a_t, b_t = (r.tensor for r in patterns.matmul_factors(C.stage))
    w = kd.intrin.wmma(16, 16, 16, dtype=a_t.dtype)
    *batch, i, j = C.stage.axes
    (k,) = C.stage.reduce_axes
    wy, ty = _shrink(sched, i, wy, ty)
    wx, tx = _shrink(sched, j, wx, tx)
    bk = max(16, bk // 16 * 16)
    while True:   # the copies of both tiles need a turn for every thread: deepen the k step
        threads = 32 * wx * wy
        rows, cols, depth = _extent(i, 16 * wy * ty), _extent(j, 16 * wx * tx), _extent(k, bk)
        vecs = (_vector(rows, depth, threads), _vector(depth, cols, threads))
        if None not in vecs or depth < bk:
            break
        bk *= 2
    if None in vecs:                 # a constant k too short for the block: fewer warps
        wy, wx = 1, 1
        threads = 32
        vecs = (_vector(rows, depth, 32) or 1, _vector(depth, cols, 32) or 1)
    CF = sched.cache_write(C, "wmma.accumulator")
    if epilogue is not None:     # C is now a copy of the accumulator: the cast reads it directly
        C.compute_inline()
        C = epilogue
    AF = sched.cache_read(a_t, "wmma.matrix_a", [CF])
    BF = sched.cache_read(b_t, "wmma.matrix_b", [CF])
    bi, bj, ii, jj = C.tile(C.axes[-2], C.axes[-1], 16 * wy * ty, 16 * wx * tx)
    wi, ti = C.split(ii, factor=16 * ty)
    wj, tj = C.split(jj, factor=16 * tx)
    tio, tii = C.split(ti, factor=16)
    tjo, tji = C.split(tj, factor=16)
    C.reorder(*C.axes[:len(batch)], bi, bj, wi, wj, tio, tjo, tii, tji)
    if batch:       # one matrix of the batch per blockIdx.z (up to 65535 of them)
        bind_blocks(sched, C, C.axes[:len(batch)], bi, bj)
    else:
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
    C.bind(wi, "threadIdx.z")
    C.bind(wj, "threadIdx.y")
    CF.compute_at(C, wj)
    *_, ci, cj = CF.axes
    (ck,) = CF.reduce_axes
    cio, cii = CF.split(ci, factor=16)
    cjo, cji = CF.split(cj, factor=16)
    ko, kr = CF.split(ck, factor=bk)
    kio, ki = CF.split(kr, factor=16)
    CF.reorder(ko, kio, cio, cjo, cii, cji, ki)
    if unroll:     # the 16-deep k steps of a tile: the next fragments load during these products
        CF.unroll(kio)
    AF.compute_at(CF, kio)
    BF.compute_at(CF, kio)
    ao, ai = AF.split(AF.axes[-2], factor=16)
    AF.reorder(*AF.axes[:-2], ao, ai, AF.axes[-1])
    AF.tensorize(ai, w)
    bo, bi_ = BF.split(BF.axes[-1], factor=16)
    BF.reorder(*BF.axes[:-2], bo, BF.axes[-2], bi_)
    BF.tensorize(BF.axes[-2], w)
    CF.tensorize(cii, w)
    C.tensorize(tii, w)
    for src, F, vec in ((a_t, AF, vecs[0]), (b_t, BF, vecs[1])):
        X = sched.cache_read(src, "shared", [F], pad=True)
        X.compute_at(CF, ko)
        coop_copy(X, vec, ("threadIdx.z", wy), ("threadIdx.y", wx), ("threadIdx.x", 32))
        multi_buffer(X, stages, k, bk)
