"""Which recipe each stage gets, and its numbers (threads, vector width, partial
reductions), chosen from the stage's access pattern and, where ``sched.size_hints`` gives
them, its sizes; the merged hints of the stage's ``StagePlan`` override the choice.

Numbers are for an H200-class GPU (132 SMs, 2048 resident threads per SM, 16-byte loads);
unknown sizes get choices that are reasonable at every size (a warp per row, 256 partials
for a full reduction).
"""
from __future__ import annotations

import math

from kdsl.ir.visitor import uses_var
from kdsl.schedule.plan import spatial_names, reduce_names

from . import analysis as A
from . import conv
from .gemm import is_matmul

SMS = 132
#: blocks of 256 threads that keep every SM busy for a few waves
TARGET_BLOCKS = 8 * SMS * 2
THREADS = 256
#: most threads of a row-wise chain's block (softmax, layernorm 8192x8192 on the H200: 256 ->
#: 223/216 us, 512 -> 202/174 us, 1024 -> 249/227 us)
CHAIN_THREADS = 512
#: 16-byte vectors of a row per thread of a row-wise chain's block (below CHAIN_THREADS): fewer
#: threads a row, more rows (blocks) resident per SM, whose load, reduce and store phases
#: overlap (RMSNorm 8192 x 4096 float16 on the H200 at one vector a thread, 512 threads: 36%
#: of copy bandwidth, torch 73%); softmax 8192 x 8192 float32 keeps its 512
CHAIN_VECTORS = 4
VECTOR_BYTES = 16
#: rows up to this many elements get a warp each, longer rows a block
WARP_ROW = 2048
#: a row needs this many elements before it is worth cutting across blocks
SPLIT_MIN = 16384
#: partial results of a full reduction when its size is unknown
FULL_PARTS = 256
MAX_PARTS = 1024


def pow2ceil(x: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, x))))


def pow2floor(x: int) -> int:
    return 1 << max(0, int(math.floor(math.log2(max(1, x)))))


def ragged_reduction(stage) -> bool:
    """A reduce axis's range uses the stage's axes (``kd.reduce_axis((0, i + 1))``)."""
    from kdsl.passes.ragged import depends
    axes = list(stage.axes) + list(stage.reduce_axes)
    return any(depends(r, axes) for r in stage.reduce_axes)


def nested_reduction(stage) -> bool:
    """A reduce axis's range uses another reduce axis (a triangle over two reduce axes):
    the reduce loops cannot be fused into the one loop the reduction recipes split."""
    from kdsl.passes.ragged import depends
    return any(depends(r, stage.reduce_axes) for r in stage.reduce_axes)


def kind(stage) -> str:
    """The recipe family of a stage computed at the root (see __init__)."""
    if not stage.is_reduction:
        return "elementwise"
    if nested_reduction(stage):     # loops kept nested: one output per thread (0-d: one block)
        return "generic" if stage.axes else "nested"
    if is_matmul(stage):
        return "matmul"
    if A.is_small_reduction(stage) and stage.axes:
        return "stencil"
    if conv.find(stage) is not None:
        return "conv"
    if not stage.axes:
        return "row"
    if A.reduces_contiguously(stage) and A.trailing_reduce(stage):
        return "row"
    if ragged_reduction(stage):     # bounds over the outputs' axes: k must stay inside i
        return "generic"
    if not A.reduces_contiguously(stage):
        return "column"
    return "generic"


def vector_width(stage, reads_only: bool = False) -> int:
    """Elements per 16-byte access of the widest element the stage streams.  An elementwise
    stage's reads that do not walk its last axis (a per-row statistic of a row-wise chain,
    RMSNorm's float32 mean square under float16 rows) are one value per vector: they do not
    narrow it."""
    reads = A.reads_of(stage)
    if not stage.is_reduction and stage.axes:
        last = stage.axes[-1].var
        reads = [r for r in reads if r.indices and uses_var(r.indices[-1], last)]
    sizes = [r.dtype.itemsize for r in reads]
    if not reads_only or not sizes:
        sizes.append(stage.dtype.itemsize)
    return max(1, VECTOR_BYTES // max(1, max(sizes)))


def threads_hint(sched, h):
    t = sched.backend_hints.get(h.name, {}).get("threads")
    if t is None:
        return None
    return (t, 1) if isinstance(t, int) else tuple(t) + (1,) * (2 - len(t))


def _vec(plan, default: int) -> int:
    if "vectorize" in plan.explicit:
        return plan.vectorize or 1
    return default


def _parts(plan, default):
    if "rfactor" in plan.explicit:
        return plan.rfactor
    return default


def elementwise(sched, h, plan) -> dict:
    st = h.stage
    vec = _vec(plan, vector_width(st))
    t = threads_hint(sched, h)
    threads = t[0] * t[1] if t else THREADS
    row_tile = None
    if len(st.axes) >= 2:
        r = A.extent_range(sched, st.axes[-1])
        if r is not None and r[0] >= threads * vec:
            row_tile = threads * vec
    return dict(threads=threads, vec=vec, tiles=dict(plan.tile), unroll=plan.unroll,
                row_tile=row_tile)


def row(sched, h, plan) -> dict:
    st = h.stage
    vec = _vec(plan, vector_width(st, reads_only=True))
    length = A.typical(sched, st.reduce_axes)
    rows = A.typical(sched, st.axes) if st.axes else 1
    if not st.axes:
        tx, ty = THREADS, 1
    elif length is None or length <= WARP_ROW:
        tx, ty = 32, 8
        if length is not None:
            tx = min(32, max(4, pow2ceil(-(-length // vec))))
            ty = max(1, THREADS // tx)
    else:
        tx, ty = (512 if length >= 65536 else THREADS), 1
    parts = None
    if not st.axes:
        if length is None:
            parts = FULL_PARTS
        else:
            parts = min(MAX_PARTS, pow2floor(length // (tx * vec * 16)))
    elif rows is not None and length is not None and length >= SPLIT_MIN:
        blocks = -(-rows // ty)
        # fewer than 4 blocks per SM stream too little at once (256 x 4194304 on the H200:
        # one block per row 1143 us, split in 8-64 parts ~960 us)
        if blocks < 4 * SMS:
            most = pow2floor(max(1, length // (tx * vec * 8)))
            parts = min(MAX_PARTS, most, pow2ceil(-(-TARGET_BLOCKS // blocks)))
    names_sp, names_rd = spatial_names(st), reduce_names(st)
    if names_sp and names_sp[0] in plan.tile:
        ty = plan.tile[names_sp[0]]
    if names_rd and names_rd[0] in plan.tile:
        tx = max(1, plan.tile[names_rd[0]] // vec)
    t = threads_hint(sched, h)
    if t is not None:
        tx, ty = t[0], (t[1] if st.axes else 1)
    parts = _parts(plan, parts)
    return dict(tx=tx, ty=ty, vec=vec, parts=parts if parts and parts > 1 else None,
                unroll=plan.unroll)


def column(sched, h, plan) -> dict:
    st = h.stage
    vec = _vec(plan, vector_width(st, reads_only=True))
    cols = A.typical(sched, st.axes)
    length = A.typical(sched, st.reduce_axes)
    threads = THREADS
    if cols is not None:
        threads = min(THREADS, max(32, pow2ceil(-(-cols // vec))))
    parts = None
    if cols is not None and length is not None and length >= 1024:
        blocks = -(-cols // (threads * vec))
        if blocks < TARGET_BLOCKS:
            # >= 256 rows per part (16384^2 on the H200: 128 parts 284 us, 64 parts 264 us)
            parts = min(MAX_PARTS, pow2floor(max(1, length // 256)),
                        pow2ceil(-(-TARGET_BLOCKS // blocks)))
    names = spatial_names(st)
    if names[-1] in plan.tile:
        threads = max(1, plan.tile[names[-1]] // vec)
    t = threads_hint(sched, h)
    if t is not None:
        threads = t[0] * t[1]
    parts = _parts(plan, parts)
    return dict(threads=threads, vec=vec, parts=parts if parts and parts > 1 else None,
                unroll=plan.unroll)


def per_output(sched, h, plan, window: bool) -> dict:
    t = threads_hint(sched, h) or (32, 8)
    tiles = {k: v for k, v in plan.tile.items() if k in spatial_names(h.stage)}
    return dict(tx=t[0], ty=t[1], window=window or bool(plan.unroll_axes),
                unroll=plan.unroll, tiles=tiles)


def matmul(sched, h, plan) -> dict:
    """The tiled GEMM's keywords (gemm.choose: the size class, adjusted by the hints)."""
    from . import gemm
    hw = sched.backend_hints.get(h.name, {})
    return gemm.choose(sched, h, plan, hw, threads_hint(sched, h))


def tensor_core(sched, h, plan) -> dict:
    """The tensor-core GEMM's numbers: ``tile`` on i/j sets the block tile (warps x 16-wide
    fragments), on k the step; ``threads`` the warps; ``stages`` the shared buffers."""
    from . import tensorcore as T
    *_, i, j = spatial_names(h.stage)
    (k,) = reduce_names(h.stage)
    hw = sched.backend_hints.get(h.name, {})
    out = dict(bk=plan.tile.get(k, T.BK))
    out["stages"] = hw.get("stages") or _k_stages(sched, h, out["bk"], T.STAGES)
    t = threads_hint(sched, h)
    if t is not None:                       # (x, y, ...) threads: x/32 and y warps
        out.update(wx=max(1, t[0] // 32), wy=max(1, t[1]))
    wy, wx = out.get("wy", T.WY), out.get("wx", T.WX)
    if i in plan.tile:
        out["ty"] = max(1, plan.tile[i] // (16 * wy))
    if j in plan.tile:
        out["tx"] = max(1, plan.tile[j] // (16 * wx))
    return out


def _k_stages(sched, h, bk: int, stages: int) -> int:
    """The default ring buffers of a tensor-core GEMM's tiles: ``stages``, but never more than
    the k steps the size class can have (a skinny product, K = 64: one step; 4 buffers of
    128 x 64 and 64 x 256 tiles took 193 KB of shared memory for nothing, one block per SM)."""
    from .gemm import size_bound
    (k,) = h.stage.reduce_axes
    kb = size_bound(sched, k)
    return stages if kb is None else max(1, min(stages, -(-kb // bk)))


def wgmma(sched, h, plan) -> dict:
    """The Hopper GEMM's numbers (``hopper.gemm``): ``tile`` on i/j sets the block tile (rows
    in 64-row warpgroups, columns up to 256), on k the step (a multiple of 64); ``threads``
    (x, y) without a tile on i: y warps of 16 rows; ``stages`` the shared buffers."""
    from . import hopper as H
    *_, i, j = spatial_names(h.stage)
    (k,) = reduce_names(h.stage)
    hw = sched.backend_hints.get(h.name, {})
    out = dict(bk=plan.tile.get(k, H.BK))
    out["stages"] = hw.get("stages") or _k_stages(sched, h, out["bk"], H.STAGES)
    t = threads_hint(sched, h)
    if i in plan.tile:
        out["bm"] = plan.tile[i]
    elif t is not None and len(t) > 1:
        out["bm"] = 16 * t[1]
    if j in plan.tile:
        out["bn"] = plan.tile[j]
    return out


def chain_threads(sched, h, vec: int) -> int:
    """Threads of a row-wise chain's block: enough for one pass of ``vec``-wide loads over the
    row, between a warp and 256."""
    length = A.typical(sched, h.stage.axes[1:]) if len(h.stage.axes) > 1 else None
    if length is None:
        return THREADS
    return min(THREADS, max(32, pow2ceil(-(-length // vec))))


#: threads of a stencil block (x along the contiguous axis, y across rows)
STENCIL_THREADS = (32, 4)


def stencil(sched, h, plan) -> dict:
    """The register tile of a stencil (stencil.stencil_tile): ``threads`` sets the block,
    ``tile`` the outputs per block along the last two axes (per thread: tile / threads),
    ``unroll`` the rows per thread; the rest from the window and the registers it needs.
    Without hints, a narrow output (size hints) gets fewer threads across it."""
    from . import stencil as S
    st = h.stage
    names = spatial_names(st)
    t = threads_hint(sched, h)
    rows = plan.unroll if plan.unroll and plan.unroll > 1 else None
    cols = None
    rows, cols = S.stencil_shape(st, rows, cols)
    if t is None:
        tx, ty = STENCIL_THREADS
        width = A.extent_range(sched, st.axes[-1])
        if width is not None and names[-1] not in plan.tile:
            tx = max(1, min(tx, pow2ceil(-(-width[1] // cols))))
            ty = STENCIL_THREADS[0] * STENCIL_THREADS[1] // tx
    else:
        tx, ty = t
    if names[-2] in plan.tile:
        rows = max(1, plan.tile[names[-2]] // ty)
    if names[-1] in plan.tile:
        cols = max(1, plan.tile[names[-1]] // tx)
    return dict(tx=tx, ty=ty, rows=rows, cols=cols)
