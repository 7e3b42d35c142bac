"""The seed-002 GEMM ladder (scaled down) and a 3x3 convolution with a shared input tile,
run as a GPU would (``run_simt``: race-checked) and sequentially (``run_lowered``), against
numpy in float64, on shapes that divide the tiles and shapes that do not (1 and 0 too)."""
import numpy as np
import pytest

from schedules import (conv3x3_graph, conv_shared_tile, ladder_blocked, ladder_naive,
                       ladder_thread_tiling, matmul_graph, rand)
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import run_simt
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.pipeline import lower_sequential as lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule

MM_SHAPES = [(64, 16, 64), (37, 13, 45), (1, 1, 1), (0, 3, 2), (5, 0, 3), (33, 9, 1)]
LADDER = [ladder_naive, ladder_blocked, ladder_thread_tiling()]


def lowered(graph, sched):
    s = Schedule(graph)
    sched(s)
    return lower(s)


def both(f, args, shape, dtype=np.float32):
    simt, seq = np.full(shape, np.nan, dtype), np.full(shape, np.nan, dtype)
    run_simt(f, args, [simt], [], block_order=np.random.default_rng(1))
    run_lowered(f, args, [seq], [])
    return simt, seq


@pytest.fixture(scope="module")
def ladder_funcs():
    return {s.__name__: lowered(matmul_graph(), s) for s in LADDER}


@pytest.mark.parametrize("nkm", MM_SHAPES)
@pytest.mark.parametrize("step", [s.__name__ for s in LADDER])
def test_ladder_step_matches_numpy(step, nkm, ladder_funcs, rng):
    f = ladder_funcs[step]
    nn, kk, mm = nkm
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    got, seq = both(f, [A, B], (nn, mm))
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


def test_thread_tiling_places_tiles_and_barriers(ladder_funcs):
    f = ladder_funcs[ladder_thread_tiling().__name__]
    text = str(f)
    assert "allocate A.shared: float32[32, 8] shared" in text
    assert "allocate B.shared: float32[8, 32] shared" in text
    assert "allocate C.local: float32[4, 4] local" in text
    # shared tiles at block level: outside every threadIdx loop
    lines = text.splitlines()
    first_thread = next(k for k, ln in enumerate(lines) if "bound threadIdx" in ln)
    assert all(k < first_thread for k, ln in enumerate(lines) if ".shared:" in ln)
    # per K tile: one barrier before the copies (WAR) and one after them (RAW); the long-K
    # compensated branch of blocked_sums repeats the loop
    ko_loops = [x for x in collect(f.body, lambda x: isinstance(x, n.For) and x.var.name == "r.outer")]
    for ko in ko_loops:
        assert len(collect(ko.body, lambda x: isinstance(x, n.Barrier))) == 2
        assert isinstance(ko.body.stmts[0], n.Barrier)


def test_full_size_thread_tiling_tiles():
    """The seed's thread-tiling step: 128x128 block tile, BK 8, 16x16 threads, 8x8 each."""
    f = lowered(matmul_graph(), ladder_thread_tiling(128, 8, 16))
    text = str(f)
    assert "A.shared: float32[128, 8] shared" in text
    assert "B.shared: float32[8, 128] shared" in text
    assert "C.local: float32[8, 8] local" in text
    assert "A.shared.local: float32[8, 1] local" in text


def test_naive_step_has_no_barrier(ladder_funcs):
    assert not collect(ladder_funcs["ladder_naive"].body, lambda x: isinstance(x, n.Barrier))


@pytest.mark.parametrize("hw", [(10, 10), (13, 21), (3, 3), (2, 5), (2, 2), (19, 4)])
def test_conv3x3_shared_input_tile(hw, rng):
    f = lowered(conv3x3_graph(), conv_shared_tile)
    assert "allocate I.shared: float32[10, 10] shared" in str(f)
    s = Schedule(conv3x3_graph())
    conv_shared_tile(s)
    gpu = gpu_lower(s)              # the cuda form: one kernel of 8x8 threads
    (k,) = collect(gpu.body, lambda x: isinstance(x, n.DeviceKernel))
    assert k.launch.block == (8, 8, 1) and collect(gpu.body, lambda x: isinstance(x, n.Barrier))
    h, w = hw
    I, W = rand(rng, (h, w), np.float32), rand(rng, (3, 3), np.float32)
    got, seq = both(f, [I, W], (h - 2, w - 2))
    on_gpu = np.full((h - 2, w - 2), np.nan, np.float32)
    run_simt(gpu, [I, W], [on_gpu], [], block_order=np.random.default_rng(2))
    np.testing.assert_array_equal(on_gpu, got)
    I64, W64 = I.astype(np.float64), W.astype(np.float64)
    want = sum(I64[di:di + h - 2, dj:dj + w - 2] * W64[di, dj] for di in range(3) for dj in range(3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


@pytest.mark.parametrize("nkm", [(5, 3, 7), (0, 3, 2)])
def test_sequential_targets_run_the_gpu_ladder_as_plain_loops(nkm, rng):
    """interp/cpu run the core's SEQUENTIAL table: thread bindings, virtual threads, vector
    copies and a double buffer lower to plain loops (no GPU pass, no barrier, no async copy)."""
    from kdsl.passes.pipeline import lower as core_lower
    from kdsl.schedule import Schedule
    s = Schedule(matmul_graph())
    ladder_thread_tiling(vthreads=2, vec=4, stages=2)(s)
    f = core_lower(s)
    assert set(f.attrs["pass_times"]) == {"scan_legality", "placement", "inline", "bound_inference", "padded_compute",
                                          "storage", "loop_nests", "simplify", "lower_cross_thread", "blocked_sums"}
    assert not collect(f.body, lambda x: isinstance(x, (n.Barrier, n.AsyncCopy, n.DeviceKernel)))
    nn, kk, mm = nkm
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    out = np.full((nn, mm), np.nan, np.float32)
    run_lowered(f, [A, B], [out], [])
    np.testing.assert_allclose(out, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
