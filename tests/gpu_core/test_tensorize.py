"""tensorize with kd.intrin.wmma: WMMA-tensorized matmuls under the SIMT executor and the
sequential interpreter vs numpy in float64 (divisible and non-divisible shapes, 1 and 0), the
printed IR, what the tensorize pass refuses (with the user's line), and the warp rules the SIMT
executor enforces on hand-built IR."""
import inspect

import numpy as np
import pytest

import kdsl as kd
from wmma_schedules import mm16_graph, wmma_64, wmma_four_warps, wmma_one_warp, wmma_schedule, wmma_shared
from handgraph import matmul_graph, rowsum_graph
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import BarrierDivergence, SimtError, SimtOutOfBounds, run_simt
from kdsl.errors import ScheduleError
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.interior_blocks import edge_copy
from kdsl.gpu.pipeline import lower_sequential as lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule

SHAPES = [(64, 48, 64), (40, 20, 24), (40, 24, 20), (1, 1, 1), (17, 1, 3), (0, 5, 3), (5, 0, 4), (3, 7, 0)]


def lowered(graph, sched):
    s = Schedule(graph)
    sched(s)
    return lower(s)


def both(f, args, shape):
    simt, seq = np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)
    run_simt(f, args, [simt], [])
    run_lowered(f, args, [seq], [])
    return simt, seq


def fp16(rng, shape):
    return rng.standard_normal(shape).astype(np.float16)


def check(f, A, B, ref):
    got, seq = both(f, [A, B], ref.shape)
    # float16 products are exact in float32; each 16-long k block rounds once
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


@pytest.mark.parametrize("nkm", SHAPES)
@pytest.mark.parametrize("sched", [wmma_one_warp, wmma_four_warps, wmma_64], ids=["1warp", "4warps", "64x64"])
def test_wmma_matmul_matches_numpy(sched, nkm, rng):
    nn, kk, mm = nkm
    f = lowered(mm16_graph(), sched)
    A, B = fp16(rng, (nn, kk)), fp16(rng, (kk, mm))
    check(f, A, B, A.astype(np.float64) @ B.astype(np.float64))


@pytest.mark.parametrize("nkm", SHAPES)
def test_wmma_from_shared_tiles(nkm, rng):
    """Fragments loaded from block-sized shared tiles that all warps copy: race-free only with
    the barriers the sync pass puts around the fragment loads (the cuda lowering, with kernels)."""
    nn, kk, mm = nkm
    s = Schedule(mm16_graph())
    wmma_shared()(s)
    f = gpu_lower(s)
    shared = [a.buffer for a in collect(f.body, lambda x: isinstance(x, n.Allocate))
              if a.buffer.scope is n.Scope.SHARED]
    assert sorted(b.name for b in shared) == ["A.shared", "B.shared"]
    assert [int(e.value) for e in shared[0].shape] in ([32, 16], [16, 32])
    # per K step: before the copies (the last step's loads still read), after A's copy (before
    # load_a), after B's copy (before load_b): the copies and loads interleave in attach order
    # (in each copy of the block's work: kdsl.gpu.interior_blocks)
    assert len(collect(edge_copy(f.body), lambda x: isinstance(x, n.Barrier))) == 3
    A, B = fp16(rng, (nn, kk)), fp16(rng, (kk, mm))
    check(f, A, B, A.astype(np.float64) @ B.astype(np.float64))


@pytest.mark.parametrize("nkm", [(40, 20, 24), (32, 32, 32), (1, 3, 2)])
def test_col_major_a(nkm, rng):
    """A stored (k, n) and read A[r, i]: a col_major matrix_a, declared so."""
    nn, kk, mm = nkm
    w = kd.intrin.wmma(16, 16, 16, layout_a="col_major")
    f = lowered(mm16_graph(trans_a=True), wmma_schedule((1, 2), (2, 1), w, trans_a=True))
    (load_a,) = [s for s in collect(f.body, lambda x: isinstance(x, n.WmmaLoad)) if s.src.name == "A"]
    assert load_a.layout is n.WmmaLayout.COL_MAJOR
    assert tuple(x.value for x in load_a.frag.shape) == (32, 16)     # canonical: rows x k
    A, B = fp16(rng, (kk, nn)), fp16(rng, (kk, mm))
    check(f, A, B, A.T.astype(np.float64) @ B.astype(np.float64))


def test_block_order_does_not_matter(rng):
    f = lowered(mm16_graph(), wmma_four_warps)
    A, B = fp16(rng, (70, 33)), fp16(rng, (33, 45))
    ordered, _ = both(f, [A, B], (70, 45))
    shuffled = np.full((70, 45), np.nan, np.float32)
    run_simt(f, [A, B], [shuffled], [], block_order=np.random.default_rng(3))
    np.testing.assert_array_equal(shuffled, ordered)


def test_traced_kernel_on_the_interp_backend(rng):
    @kd.kernel
    def mm(A, B):
        n_, k = A.shape
        _, m = B.shape
        r = kd.reduce_axis(k, name="r")
        return kd.compute((n_, m), lambda i, j: kd.sum(A[i, r].astype(kd.float32) * B[r, j].astype(kd.float32),
                                                        axis=r), name="C")

    mm.schedule("interp")(wmma_four_warps)
    A, B = fp16(rng, (40, 20)), fp16(rng, (20, 24))
    np.testing.assert_allclose(mm(A, B, backend="interp"), A.astype(np.float64) @ B.astype(np.float64),
                               rtol=1e-5, atol=1e-5)


def test_cpu_backend_refuses_tensor_core_tiles_clearly(rng):
    """A tensorize schedule given to every target reaches the cpu backend: a ScheduleError at
    the tensorize line saying where it can run, never an internal error from code generation."""
    @kd.kernel
    def mm(A, B):
        n_, k = A.shape
        _, m = B.shape
        r = kd.reduce_axis(k, name="r")
        return kd.compute((n_, m), lambda i, j: kd.sum(A[i, r].astype(kd.float32) * B[r, j].astype(kd.float32),
                                                        axis=r), name="C")

    mm.schedule(None)(wmma_one_warp)
    A, B = fp16(rng, (16, 16)), fp16(rng, (16, 16))
    with pytest.raises(ScheduleError, match="GPU tensor cores, which the cpu backend does not have") as ei:
        mm(A, B, backend="cpu")
    assert "tensorize" in ei.value.loc.code and 'schedule(\\"cuda\\")' not in str(ei.value)
    assert '@kernel.schedule("cuda")' in ei.value.hint
    np.testing.assert_allclose(mm(A, B, backend="interp"), A.astype(np.float64) @ B.astype(np.float64),
                               rtol=1e-5, atol=1e-5)


def test_printed_ir_shows_fragments_and_the_four_statements():
    text = str(lowered(mm16_graph(), wmma_64))
    for line in ("allocate C.wmma.accumulator: float32[32, 32] wmma.accumulator",
                 "allocate A.wmma.matrix_a: float16[32, 16] wmma.matrix_a",
                 "allocate B.wmma.matrix_b: float16[16, 32] wmma.matrix_b",
                 "wmma.fill(C.wmma.accumulator[i.outer_1*16:i.outer_1*16 + 16, j.outer_1*16:j.outer_1*16 + 16], 0.0f)",
                 "wmma.load_a(A.wmma.matrix_a[ax0.outer*16:ax0.outer*16 + 16, 0:16], A[",
                 "wmma.load_b(B.wmma.matrix_b[0:16, ax1.outer*16:ax1.outer*16 + 16], B[",
                 "wmma.mma(C.wmma.accumulator[", "# 16x16x16",
                 "wmma.store(C["):
        assert line in text, line
    # every element access of a fragment is gone: only the four statements touch them
    assert "C.wmma.accumulator[i" not in text.replace("wmma.", "")


# ------------------------------------------------------------------ what tensorize refuses
def refused(graph, sched):
    s = Schedule(graph)
    sched(s)
    with pytest.raises(ScheduleError) as ei:
        lower(s)
    return ei.value


def _line_of(fn, text):
    src, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(src) if text in line)


def test_refuses_a_non_matmul_nest():
    def sched(s):
        B = s["B"]
        ko, ki = B.split(B.reduce_axes[0], factor=16)
        B.tensorize(ki, kd.intrin.wmma(16, 16, 16))

    e = refused(rowsum_graph(), sched)
    assert e.loc.line == _line_of(sched, "B.tensorize")
    assert "B.tensorize(k.inner, wmma(16, 16, 16))" in str(e)
    assert "none of what wmma does" in str(e) and "B[i] = B[i] + A[i," in str(e)
    assert "wmma.accumulator" in e.hint


def test_refuses_a_wrong_tile_extent():
    def eight(s):       # the accumulator's reduction split by 8, not 16
        w = kd.intrin.wmma(16, 16, 16)
        C = s["C"]
        CF = s.cache_write(C, "wmma.accumulator")
        bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 16, 16)
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
        CF.compute_at(C, bj)
        ko, ki = CF.split(CF.reduce_axes[0], factor=8)
        CF.reorder(ko, *CF.axes, ki)
        CF.tensorize(CF.axes[0], w)
        C.tensorize(ii, w)

    e = refused(mm16_graph(), eight)
    # the product reads A and B directly: first complaint is that they are no fragments
    assert "A is not a wmma.matrix_a or wmma.matrix_b fragment" in str(e)
    assert e.loc.line == _line_of(eight, "CF.tensorize")

    def eight_ok_operands(s):
        w = kd.intrin.wmma(16, 16, 16)
        C = s["C"]
        CF = s.cache_write(C, "wmma.accumulator")
        AF = s.cache_read("A", "wmma.matrix_a", [CF])
        BF = s.cache_read("B", "wmma.matrix_b", [CF])
        bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 16, 16)
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
        CF.compute_at(C, bj)
        ci, cj = CF.axes
        ko, ki = CF.split(CF.reduce_axes[0], factor=8)
        CF.reorder(ko, ci, cj, ki)
        AF.compute_at(CF, ko)
        BF.compute_at(CF, ko)
        CF.tensorize(ci, w)

    e = refused(mm16_graph(), eight_ok_operands)
    assert "the loop under r.inner has extent 8, wmma(16, 16, 16) needs 16" in str(e)
    assert "split that axis by 16" in e.hint
    assert e.loc.line == _line_of(eight_ok_operands, "CF.tensorize")


def test_refuses_float32_inputs():
    e = refused(matmul_graph(dt.float32), _plain_tensorized)
    assert "holds float32; wmma(16, 16, 16) takes float16 inputs" in str(e)
    assert e.loc.line == _line_of(_plain_tensorized, "AF.tensorize")


def _plain_tensorized(s):
    w = kd.intrin.wmma(16, 16, 16)
    C = s["C"]
    CF = s.cache_write(C, "wmma.accumulator")
    AF = s.cache_read("A", "wmma.matrix_a", [CF])
    bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 16, 16)
    CF.compute_at(C, bj)
    ko, ki = CF.split(CF.reduce_axes[0], factor=16)
    CF.reorder(ko, *CF.axes, ki)
    AF.compute_at(CF, ko)
    AF.tensorize(AF.axes[0], w)


def test_refuses_an_undeclared_col_major_operand():
    e = refused(mm16_graph(trans_a=True), wmma_schedule((1, 1), (1, 1), trans_a=True))
    assert "that is a col_major matrix_a" in str(e) and "layout_a='row_major'" in str(e)
    assert "layout_a='col_major'" in e.hint


def test_refuses_a_fragment_read_element_by_element():
    def sched(s):       # the copy out of the accumulator is not tensorized
        wmma_one_warp(s)
        s["C"].tensorized = None

    e = refused(mm16_graph(), sched)
    assert "C.wmma.accumulator (wmma.accumulator) is accessed element by element" in str(e)
    assert "tensorize the stage that computes C" in e.hint


def test_refuses_a_tile_inside_a_lane_loop():
    def sched(s):
        wmma_one_warp(s)
        C = s["C"]
        C.bind(C.leaf[2], "threadIdx.x")     # the warp loop (extent 1) bound to the lanes

    e = refused(mm16_graph(), sched)
    assert "bound to threadIdx.x" in str(e) and "32 lanes of a warp" in str(e)


def test_wmma_intrinsic_checks_its_arguments():
    with pytest.raises(ScheduleError, match="not a WMMA shape"):
        kd.intrin.wmma(16, 16, 8)
    with pytest.raises(ScheduleError, match="inputs of float32 are not supported"):
        kd.intrin.wmma(16, 16, 16, dtype=kd.float32)
    with pytest.raises(ScheduleError, match="not a layout"):
        kd.intrin.wmma(16, 16, 16, layout_b="diagonal")


# ------------------------------------------------------------------ warp rules (hand-built IR)
F16, F32 = dt.float16, dt.float32


def _c(v):
    return n.const(v)


def _warp_kernel(guard_lanes=None, scalar_read=False, tile_row=0):
    """One block of (32, 2) threads; warp ty stores A's 16x16 tile ty into O (via a fragment
    pair: load A into matrix_a, fill the accumulator, mma with an identity B, store)."""
    A = n.Buffer("A", F16, (_c(32), _c(16)), param=True)
    I = n.Buffer("I", F16, (_c(16), _c(16)), param=True)
    O = n.Buffer("O", F32, (_c(32), _c(16)), param=True)
    fa = n.Buffer("fa", F16, (_c(16), _c(16)), scope=n.Scope.WMMA_MATRIX_A)
    fb = n.Buffer("fb", F16, (_c(16), _c(16)), scope=n.Scope.WMMA_MATRIX_B)
    fc = n.Buffer("fc", F32, (_c(16), _c(16)), scope=n.Scope.WMMA_ACCUMULATOR)
    ty, tx = n.var("ty"), n.var("tx")
    sh, z, t0 = (16, 16, 16), (_c(0), _c(0)), (_c(tile_row), _c(0))
    full = (_c(16), _c(16))
    ops = [n.WmmaLoad(fa, t0, sh, A, (mk.mul(ty, 16), _c(0)), n.WmmaLayout.ROW_MAJOR, full),
           n.WmmaLoad(fb, z, sh, I, z, n.WmmaLayout.ROW_MAJOR, full),
           n.WmmaFill(fc, z, sh, n.const(0.0, F32)),
           n.WmmaMma(fc, z, fa, t0, fb, z, fc, z, sh),
           n.WmmaStore(O, (mk.mul(ty, 16), _c(0)), n.WmmaLayout.ROW_MAJOR, fc, z, sh, full)]
    body = n.Seq(tuple(ops))
    if guard_lanes is not None:
        body = n.IfThenElse(mk.lt(guard_lanes(ty, tx), 16), body)
    if scalar_read:
        body = n.Seq((body, n.Store(O, (_c(0), _c(0)), n.Load(F32, fc, (_c(0), _c(0))))))
    for b in (fc, fb, fa):
        body = n.Allocate(b, body)
    body = n.For(ty, _c(0), _c(2), n.ForKind.BOUND, body, n.ThreadTag.THREAD_Y)
    if guard_lanes is not None:      # a threadIdx.x loop of 32 lanes around the guard
        body = n.For(tx, _c(0), _c(32), n.ForKind.BOUND, body, n.ThreadTag.THREAD_X)
    return n.LoweredFunc("warp", (A, I), (O,), (), body)


def test_hand_built_warp_statements_run(rng):
    f = _warp_kernel()
    A, I = fp16(rng, (32, 16)), np.eye(16, dtype=np.float16)
    got, seq = both(f, [A, I], (32, 16))
    np.testing.assert_array_equal(got, A.astype(np.float32))
    np.testing.assert_array_equal(seq, got)


def test_a_warp_split_by_a_condition_is_reported(rng):
    f = _warp_kernel(guard_lanes=lambda ty, tx: tx)     # lanes 0..15 only
    with pytest.raises(BarrierDivergence, match="wmma statement reached by threads .* of warp 0"):
        run_simt(f, [fp16(rng, (32, 16)), np.eye(16, dtype=np.float16)], [np.zeros((32, 16), np.float32)], [])


def test_a_warp_guarded_as_a_whole_runs(rng):
    f = _warp_kernel(guard_lanes=lambda ty, tx: mk.mul(ty, 16))     # warp 0 only (ty == 0)
    A = fp16(rng, (32, 16))
    out = np.zeros((32, 16), np.float32)
    run_simt(f, [A, np.eye(16, dtype=np.float16)], [out], [])
    np.testing.assert_array_equal(out[:16], A[:16].astype(np.float32))
    assert not out[16:].any()


def test_fragment_data_is_only_reachable_through_wmma(rng):
    f = _warp_kernel(scalar_read=True)
    with pytest.raises(SimtError, match="fragment 'fc' element by element"):
        run_simt(f, [fp16(rng, (32, 16)), np.eye(16, dtype=np.float16)], [np.zeros((32, 16), np.float32)], [])


def test_a_tile_outside_its_fragment_is_reported(rng):
    f = _warp_kernel(tile_row=16)
    with pytest.raises(SimtOutOfBounds, match="tile \\(16, 0\\) of the wmma.matrix_a fragment 'fa'"):
        run_simt(f, [fp16(rng, (32, 16)), np.eye(16, dtype=np.float16)], [np.zeros((32, 16), np.float32)], [])


def test_converting_store_rounds_like_a_cast():
    """A float32 accumulator stored into a 16-bit buffer rounds to nearest even: float16 by
    numpy's cast, bfloat16 (float32 storage in the executors) by ``round_bf16``; the valid
    extents still bound what is written."""
    from kdsl.gpu import wmma_defs as wd
    from kdsl.numerics.numpy_eval import round_bf16
    tile = (np.arange(256, dtype=np.float32).reshape(16, 16) * 1.00390625 + 1 / 3).astype(np.float32)
    half = np.zeros((20, 20), np.float16)
    wd.store(half, (2, 3), False, tile, (16, 5))
    np.testing.assert_array_equal(half[2:18, 3:8], tile[:, :5].astype(np.float16))
    assert not half[:, 8:].any() and not half[:2].any()
    bf = np.zeros((16, 16), np.float32)
    wd.store(bf, (0, 0), False, tile, (16, 16), to_bf16=True)
    np.testing.assert_array_equal(bf, round_bf16(tile))
    assert not np.array_equal(bf, tile)


def test_sequential_targets_run_a_tensorized_nest_as_loops(rng):
    """The core's SEQUENTIAL table (interp, cpu) has no tensorize pass: the request stays in
    ``func.tensorize`` and the nest runs as the scalar loops it is, with the same result."""
    from kdsl.passes.pipeline import lower as core_lower
    s = Schedule(mm16_graph())
    wmma_four_warps(s)
    f = core_lower(s)
    assert f.tensorize and not collect(f.body, lambda x: type(x) in n.WMMA_STMTS)
    A, B = fp16(rng, (40, 24)), fp16(rng, (24, 33))
    out = np.full((40, 33), np.nan, np.float32)
    run_lowered(f, [A, B], [out], [])
    np.testing.assert_allclose(out, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
