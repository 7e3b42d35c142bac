"""Every step of the seed-002 GEMM ladder, scaled down, as kdsl schedules lowered for the
``cuda`` target (the GPU table: device kernels with launches, barriers, rings), run as a GPU
would (``run_simt``, race-checked, blocks shuffled) and sequentially (``run_lowered`` on the
sequential table), against numpy in float64, on shapes that do and do not divide the tiles.

Scale: 32x32 block tiles, BK = 8, 8x8 threads, 4x4 outputs per thread (the seed: 128x128,
BK = 8, 16x16 threads, 8x8 per thread). Steps: naive, blocked (shared tiles), thread tiling
(shared + local caches), warp tiling (vthreads spread each thread's outputs), vectorised
copies (each thread copies 4 consecutive elements), double buffering (rings of shared tiles
filled by asynchronous copies).
"""
import numpy as np
import pytest

from schedules import (ladder_blocked, ladder_naive, ladder_thread_tiling, matmul_graph,
                       rand)
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import run_simt
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.interior_blocks import edge_copy
from kdsl.gpu.pipeline import lower_sequential as lower
from kdsl.gpu.pipeline import GPU_SEQUENTIAL, PIPELINE
from kdsl.schedule import Schedule

BLOCK, BK, THREADS, VEC = 32, 8, 8, 4


LADDER = [ladder_naive, ladder_blocked, ladder_thread_tiling(),
          ladder_thread_tiling(vthreads=2),                      # warp tiling
          ladder_thread_tiling(vthreads=2, vec=VEC),             # vectorised copies
          ladder_thread_tiling(vthreads=2, vec=VEC, stages=2)]   # double buffering
MM_SHAPES = [(64, 16, 64), (37, 13, 45), (1, 1, 1), (0, 3, 2), (5, 0, 3), (33, 9, 70)]


def _lower(sched, target):
    s = Schedule(matmul_graph())
    sched(s)
    return lower(s, pipeline=PIPELINE if target == "cuda" else GPU_SEQUENTIAL)


@pytest.fixture(scope="module")
def ladder():
    """step name -> (the cuda lowering, the sequential lowering)."""
    return {s.__name__: (_lower(s, "cuda"), _lower(s, None)) for s in LADDER}


@pytest.mark.parametrize("nkm", MM_SHAPES)
@pytest.mark.parametrize("step", [s.__name__ for s in LADDER])
def test_every_ladder_step_matches_numpy(step, nkm, ladder, rng):
    nn, kk, mm = nkm
    gpu, seq = ladder[step]
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    got_simt, got_seq = np.full((nn, mm), np.nan, np.float32), np.full((nn, mm), np.nan, np.float32)
    run_simt(gpu, [A, B], [got_simt], [], block_order=np.random.default_rng(7))
    run_lowered(seq, [A, B], [got_seq], [])
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(got_simt, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_seq, want, rtol=1e-4, atol=1e-4)


def _kinds(f, cls):
    return collect(f.body, lambda x: isinstance(x, cls))


def test_printed_steps_read_like_the_seed_cuda(ladder):
    """What a CUDA code generator receives: one kernel with its launch, block-sized shared
    tiles at block level, per-thread local tiles, barriers only where threads exchange data,
    the ring and its asynchronous copies in the double-buffered step."""
    for name, (gpu, _) in ladder.items():
        (k,) = _kinds(gpu, n.DeviceKernel)
        text = str(gpu)
        if name == "ladder_naive":
            assert k.launch.block == (32, 1, 1) and not _kinds(gpu, n.Barrier)
            continue
        threads = (8, 8, 1)
        assert k.launch.block == threads, name
        shared = {a.buffer.name: a for a in _kinds(gpu, n.Allocate) if a.buffer.scope is n.Scope.SHARED}
        assert set(shared) == {"A.shared", "B.shared"}, name
        if name.startswith("ladder_blocked"):
            continue
        tile_a = [int(e.value) for e in shared["A.shared"].buffer.shape]
        if name.endswith("stages2"):
            assert tile_a == [2, BLOCK, BK] and shared["A.shared"].stages == 2
            assert _kinds(gpu, n.AsyncCopy) and _kinds(gpu, n.WaitGroup) and _kinds(gpu, n.CommitGroup)
            assert "async_copy(A.shared[" in text and "wait_group(1)" in text
        else:
            assert tile_a == [BLOCK, BK], name
            # RAW after the copy, WAR before the next (in each copy of the block's work:
            # kdsl.gpu.interior_blocks)
            assert len(collect(edge_copy(gpu.body), lambda x: isinstance(x, n.Barrier))) == 2, name
        local = {a.buffer.name: [int(e.value) for e in a.buffer.shape]
                 for a in _kinds(gpu, n.Allocate) if a.buffer.scope is n.Scope.LOCAL}
        per_thread = BLOCK // THREADS
        if "vthreads" in name:    # one 2x2 tile per virtual thread
            assert local["C.local"] == [2, 2, per_thread // 2, per_thread // 2], name
        else:
            assert local["C.local"] == [per_thread, per_thread], name
        if "_vec" in name:
            assert any(f.kind is n.ForKind.VECTORIZED for f in _kinds(gpu, n.For)), name
        assert text.splitlines()[1].lstrip().startswith("kernel mm_kernel0<<<grid=(ceildiv(m, 32), ceildiv(n, 32), 1)")
