"""The default cuda schedule of a 16-bit matrix product on Hopper's tensor cores (``wgmma``).

``C[.., i, j] = sum_k f32(A[.., i, k]) * f32(B[.., k, j])`` (float16 or bfloat16 A and B, A
stored with k along its last dimension) on an sm_90 GPU is tensorized with
``kd.intrin.wgmma(n)``:

* a block computes a ``BM x BN`` tile of C (128 x 256 by default) with ``BM / 16`` warps along
  threadIdx.y (the 32 lanes along threadIdx.x): each warp owns 16 rows, each four
  consecutive warps (a warpgroup) one 64-row slab, multiplied by one ``m64nNk16`` instruction
  per 16 of k; the accumulator (16 x BN float32 per warp: 128 registers a thread at BN 256)
  stays in registers until it is stored (or cast to 16 bits on the way out: the epilogue);
* the reduction goes in ``BK``-long steps (64: one 128-byte swizzle line of 16-bit values):
  each step's A and B tiles are copied into shared memory by all the block's threads, 16
  bytes per thread and turn, in ``STAGES`` ring buffers filled by ``cp.async`` ahead of the
  products (4 by default: each tile's products stay in flight while the copies of the tile
  two ahead are issued, ``software_pipeline``); the tiles are padded caches (zeros beyond the
  matrices), laid out with the 128-byte swizzle the tensor cores read
  (``kdsl.gpu.shared_layout``);
* smaller products get smaller blocks (64 rows: one warpgroup; 128 or 64 columns).

Chosen (``eligible``) where the tensor-core recipe is, the device (or, without one, the
architecture compiled for) is sm_90, A's rows are its next-to-last dimension and
``KDSL_CUDA_WGMMA`` is not ``0``; elsewhere ``tensorcore.gemm`` (mma.sync) serves.

Measured (H100, 8192^3 float16 -> float32, notes/measurements/wgmma_kdsl_h100_session13.txt;
cuBLAS 1.53 ms): 128 x 256 x 64 with 4 stages 1.90 ms (0.81x), 3 stages 2.14 ms, 128 x 128
2.44 ms, 64 x 256 2.75 ms; before products stayed in flight across tiles 2.18 ms (3 stages);
the mma.sync recipe 3.81 ms.
"""
from __future__ import annotations

import kdsl as kd
from kdsl.schedule import patterns

from . import analysis as A
from .gemm import bind_blocks, coop_copy, multi_buffer, size_bound

#: block tile (rows, columns), k step, ring buffers
BM, BN, BK, STAGES = 128, 256, 64, 4
#: elements of a 16-byte copy of a 16-bit type
VEC = 8

_arch = None


def target_arch() -> str:
    """The architecture default schedules are made for: device 0's when a driver and device
    are there, else the one compiled for without a device (``kdsl_cuda.build.DEFAULT_ARCH``)."""
    global _arch
    if _arch is None:
        from .. import build
        from ..runtime import driver
        _arch = driver.device(0).arch if driver.is_available() else build.DEFAULT_ARCH
    return _arch


def _k_last(stage) -> bool:
    """Whether A is read as A[.., i, k] (its rows along its next-to-last dimension: the K-major
    tile wgmma reads) and B as B[.., k, j] or B[.., j, k]."""
    a, b = patterns.matmul_factors(stage)
    *_, i, j = (ax.var for ax in stage.axes)
    (k,) = (ax.var for ax in stage.reduce_axes)
    return (len(a.indices) >= 2 and a.indices[-2] is i and a.indices[-1] is k
            and len(b.indices) >= 2 and {b.indices[-2], b.indices[-1]} == {k, j})


def eligible(sched, h) -> bool:
    """Whether tensor-core matmul stage handle ``h`` takes the wgmma recipe (module docstring):
    also no extent a constant below 64 (a warpgroup's rows, a swizzle line of k or columns;
    the mma.sync recipe takes those)."""
    from kdsl import config
    if not config.cuda_wgmma():
        return False
    st = h.stage
    if any((c := A.const_extent(iv)) is not None and c < 64 for iv in (*st.axes[-2:], *st.reduce_axes)):
        return False
    return target_arch() in ("sm_90", "sm_90a") and _k_last(st)


def gemm(sched, C, *, bm=BM, bn=BN, bk=BK, stages=STAGES, epilogue=None) -> None:
    """Realise the wgmma GEMM on matmul stage handle ``C`` (module docstring).  ``epilogue``:
    C's cast to 16 bits, done by the fragment stores."""
    a_t, b_t = (r.tensor for r in patterns.matmul_factors(C.stage))
    *batch, i, j = C.stage.axes
    (k,) = C.stage.reduce_axes
    rows, cols = size_bound(sched, i), size_bound(sched, j)
    bm = max(64, bm // 64 * 64)
    bn = max(64, min(256, bn // 64 * 64))
    while rows is not None and bm >= 2 * rows and bm > 64:
        bm //= 2
    while cols is not None and bn >= 2 * cols and bn > 64:
        bn //= 2
    # a constant extent below the tile would shrink its loop (bound inference) below the
    # intrinsic's: whole 64-row / 64-column multiples only
    for iv, t in ((i, "bm"), (j, "bn")):
        c = A.const_extent(iv)
        if c is not None:
            if t == "bm":
                bm = min(bm, c // 64 * 64)
            else:
                bn = min(bn, c // 64 * 64)
    bk = max(64, bk // 64 * 64)
    warps = bm // 16
    b_read = patterns.matmul_factors(C.stage)[1]
    layout_b = "row_major" if b_read.indices[-1] is j.var else "col_major"
    w = kd.intrin.wgmma(bn, dtype=a_t.dtype, layout_b=layout_b)
    CF = sched.cache_write(C, "wmma.accumulator")
    if epilogue is not None:      # C is a copy of the accumulator: the cast reads it directly
        C.compute_inline()
        C = epilogue
    bi, bj, ii, jj = C.tile(C.axes[-2], C.axes[-1], bm, bn)
    wi, ti = C.split(ii, factor=16)
    C.reorder(*C.axes[:len(batch)], bi, bj, wi, ti, jj)
    if batch:
        bind_blocks(sched, C, C.axes[:len(batch)], bi, bj)
    else:
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
    C.bind(wi, "threadIdx.y")
    CF.compute_at(C, wi)
    *_, ci, cj = CF.axes
    (ck,) = CF.reduce_axes
    ko, kr = CF.split(ck, factor=bk)
    kio, ki = CF.split(kr, factor=16)
    CF.reorder(ko, kio, ci, cj, ki)
    CF.unroll(kio)
    CF.tensorize(ci, w)
    C.tensorize(ti, w)
    for src in (a_t, b_t):
        X = sched.cache_read(src, "shared", [CF], pad=True)
        X.compute_at(CF, ko)
        coop_copy(X, VEC, ("threadIdx.y", warps), ("threadIdx.x", 32))
        multi_buffer(X, stages, k, bk)


__all__ = ["BM", "BN", "BK", "STAGES", "eligible", "gemm", "target_arch"]
