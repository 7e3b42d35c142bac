"""tensorize with kd.intrin.wgmma: warp shares of Hopper warpgroup products read from shared
memory, under the SIMT executor (race- and warpgroup-checked) and the sequential interpreter
vs numpy in float64 (shapes that do and do not divide the tiles, 0s); the printed IR, the
swizzled layout the GPU table gives the operand tiles, what the tensorize pass refuses (at the
user's line), and the warpgroup rules the SIMT executor enforces."""
import dataclasses

import numpy as np
import pytest

import kdsl as kd
from wmma_schedules import mm16_graph, wgmma_schedule
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import SimtError, run_simt
from kdsl.errors import ScheduleError
from kdsl.ir import nodes as n
from kdsl.ir.visitor import Mutator, collect
from kdsl.gpu.pipeline import lower_sequential as lower
from kdsl.gpu.pipeline import GPU_SEQUENTIAL, PIPELINE
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule

SHAPES = [(128, 64, 128), (130, 100, 70), (64, 200, 300), (17, 3, 5), (0, 5, 3), (5, 0, 4)]


def lowered(sched, target=None, **graph):
    s = Schedule(mm16_graph(**graph))
    sched(s)
    return lower(s, pipeline=PIPELINE if target == "cuda" else GPU_SEQUENTIAL)


def run_both(f, A, B, shape=None):
    shape = shape or (A.shape[0], B.shape[1])
    simt, seq = np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)
    run_simt(f, [A, B], [simt], [])
    run_lowered(f, [A, B], [seq], [])
    return simt, seq


def fp16(rng, shape):
    return rng.standard_normal(shape).astype(np.float16)


@pytest.mark.parametrize("nkm", SHAPES)
@pytest.mark.parametrize("cfg", [dict(bm=64, bn=64, stages=2), dict(bm=128, bn=128, bk=128, stages=3, n=64),
                                 dict(bm=64, bn=128, stages=0)], ids=["64x64", "n64x2", "unpiped"])
def test_wgmma_matmul_matches_numpy(cfg, nkm, rng):
    nn, kk, mm = nkm
    f = lowered(wgmma_schedule(**cfg), target="cuda")
    A, B = fp16(rng, (nn, kk)), fp16(rng, (kk, mm))
    got, seq = run_both(f, A, B)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


def test_printed_ir_and_swizzled_operands():
    f = lowered(wgmma_schedule(bm=128, bn=256, stages=3), target="cuda")
    text = str(f)
    assert ("wgmma.mma(C.wmma.accumulator[0:16, 0:256] = A.shared[r.outer % 3, "
            "i.inner.outer*16:i.inner.outer*16 + 16, r.inner.outer*16:r.inner.outer*16 + 16] @ "
            "B.shared[r.outer % 3, r.inner.outer*16:r.inner.outer*16 + 16, 0:256]") in text
    assert "# 16x256x16, a warp's share" in text
    shared = {a.buffer.name: a.buffer for a in collect(f.body, lambda x: isinstance(x, n.Allocate))
              if a.buffer.scope is n.Scope.SHARED}
    assert all(b.swizzle == 128 and b.strides is None for b in shared.values())   # no padding
    (k,) = f.kernels
    assert k.launch.block == (32, 8, 1)
    # 3 stages of 128x64 + 64x256 halves, and 1 KiB to align the swizzled tiles
    assert int(k.launch.dynamic_shared.value) == 3 * (128 * 64 + 64 * 256) * 2 + 1024


def test_taller_b_copy_is_clipped_at_the_reduction(rng):
    """B (k x m) with more rows than the sum over r < A.shape[1] uses: its shared copy stops at
    the reduction's end, so whole 16-deep tiles meet zeros, not B's extra rows (infinities)."""
    from handgraph import Builder, read, sum_
    from kdsl import dtypes as dt
    b = Builder("mm16")
    A_ = b.input("A", ("n", "k"), dt.float16)
    B_ = b.input("B", ("kb", "m"), dt.float16)
    i, j, r = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    prod = n.Binary(dt.float32, n.BinOp.MUL, n.Cast(dt.float32, read(A_, i, r)), n.Cast(dt.float32, read(B_, r, j)))
    s = Schedule(b.graph(b.compute("C", [i, j], sum_(prod, [r], dt.float32), [r])))
    wgmma_schedule(bm=64, bn=64)(s)
    f = gpu_lower(s)
    A, B = fp16(rng, (70, 40)), fp16(rng, (52, 90))
    B[40:] = np.inf
    got, seq = run_both(f, A, B)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, A.astype(np.float64) @ B[:40].astype(np.float64), rtol=1e-5, atol=1e-5)


def _fails(match, sched, **graph):
    with pytest.raises(ScheduleError, match=match) as ei:
        lowered(sched, target="cuda", **graph)
    assert "tensorize" in ei.value.loc.code
    return ei.value


def test_refuses_warps_off_threadidx_y():
    e = _fails(r"no loop bound to threadIdx\.y encloses it; a wgmma runs on warpgroups",
               wgmma_schedule(bm=64, bn=64, warp_tag="threadIdx.z"))
    assert "bind the warps to threadIdx.y" in e.hint


def test_refuses_fewer_than_four_warps():
    _fails(r"a loop of 2 iterations bound to threadIdx\.y", wgmma_schedule(bm=32, bn=64))


def test_refuses_short_shared_rows():
    e = _fails(r"has rows of 32 elements; wgmma reads shared tiles in 128-byte lines",
               wgmma_schedule(bm=64, bn=64, bk=32))
    assert "multiple of 64" in e.hint


def test_refuses_unpadded_tiles_with_a_partial_reduction():
    _fails(r"the accumulation stops at k < .* must hold zeros from the reduction's end on",
           wgmma_schedule(bm=64, bn=64, pad=False))


def test_refuses_fragment_operands():
    _fails(r"reads its operands from shared memory, with no fragment loads",
           wgmma_schedule(bm=64, bn=64, fragments=True))


def test_refuses_a_column_major_a():
    _fails(r"column-major A", wgmma_schedule(bm=64, bn=64, intrin=kd.intrin.wgmma(64, layout_a="col_major")),
           trans_a=True)


def test_wgmma_intrinsic_checks_its_arguments():
    for bad, match in ((12, "multiple of 8 from 8 to 256"), (264, "multiple of 8 from 8 to 256")):
        with pytest.raises(ScheduleError, match=match):
            kd.intrin.wgmma(bad)
    with pytest.raises(ScheduleError, match="inputs of float32 are not supported"):
        kd.intrin.wgmma(64, dtype="float32")
    assert str(kd.intrin.wgmma(128, dtype="bfloat16", layout_b="col_major")) == \
        "wgmma(128, dtype=bfloat16, layout_b='col_major')"


class _Unstack(Mutator):
    """Every warp reads A's tile at the same rows (the warp index dropped from its origin)."""

    def visit_WgmmaMma(self, s):
        row = s.a_origin[-2]
        return dataclasses.replace(s, a_origin=s.a_origin[:-2] + (n.Const(row.dtype, 0), s.a_origin[-1]))


def test_simt_checks_the_warpgroup(rng):
    f = lowered(wgmma_schedule(bm=64, bn=64), target="cuda")
    bad = dataclasses.replace(f, body=_Unstack().visit(f.body))
    A, B = fp16(rng, (64, 64)), fp16(rng, (64, 64))
    with pytest.raises(SimtError, match="a warpgroup's warps take consecutive 16-row blocks of one A tile"):
        run_simt(bad, [A, B], [np.zeros((64, 64), np.float32)], [])


@pytest.mark.parametrize("nkm", [(64, 64, 64), (100, 130, 70)])
def test_k_major_b(nkm, rng):
    """B stored (m, k) and read B[j, r]: a col_major B tile (K-major for the tensor cores)."""
    nn, kk, mm = nkm
    f = lowered(wgmma_schedule(bm=64, bn=64, intrin=kd.intrin.wgmma(64, layout_b="col_major")),
                target="cuda", trans_b=True)
    mmas = collect(f.body, lambda x: isinstance(x, n.WgmmaMma))
    assert mmas and all(s.b_layout is n.WmmaLayout.COL_MAJOR for s in mmas)
    A, B = fp16(rng, (nn, kk)), fp16(rng, (mm, kk))
    got, seq = run_both(f, A, B, (nn, mm))
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


def test_products_stay_in_flight_over_the_next_copies(rng):
    """With 3+ stages and only products reading the rings, the pipeline leaves each tile's
    products in flight while the next tile is copied (one barrier per step, the slot refilled
    is two tiles old); the SIMT executor follows the products until their waits."""
    f = lowered(wgmma_schedule(bm=64, bn=64, stages=3), target="cuda")
    text = str(f)
    assert "wgmma.commit_group()\n" in text and "wgmma.wait_group(1)" in text
    assert text.count("barrier(") == 2               # one per step, in each copy of the block's work
    A, B = fp16(rng, (130, 300)), fp16(rng, (300, 70))
    got, seq = run_both(f, A, B)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


class _NoWait(Mutator):
    """The waits inside the k loop dropped (the final wait(0) kept)."""

    def visit_WgmmaWait(self, s):
        return n.Seq(()) if s.pending else s


def test_simt_reports_a_tile_overwritten_under_a_product(rng):
    from kdsl.gpu.simt.async_mma import AsyncMmaRace
    f = lowered(wgmma_schedule(bm=64, bn=64, stages=3), target="cuda")
    bad = dataclasses.replace(f, body=_NoWait().visit(f.body))
    A, B = fp16(rng, (64, 320)), fp16(rng, (320, 64))
    with pytest.raises(AsyncMmaRace, match="still reads it"):
        run_simt(bad, [A, B], [np.zeros((64, 64), np.float32)], [])
