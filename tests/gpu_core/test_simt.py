"""The SIMT executor (kdsl.gpu.simt): GPU schedules run as a GPU would, against numpy
and the sequential interpreter, and the race checker's reports (on races the lowering once
had, and on IR with a barrier removed)."""
import numpy as np
import pytest

from schedules import (elementwise_2d, matmul_graph, mm_shared_no_sync, mm_threads, rand,
                       row_per_block, rowsum_graph, scale_graph)
from seed_schedules import bind_rows, cross_thread
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import RaceError, run_simt
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.pipeline import lower_sequential as lower
from kdsl.schedule import Schedule


def lowered(graph, sched):
    s = Schedule(graph)
    sched(s)
    return lower(s)


def both(f, args, out_shapes, dtype, **kw):
    """Outputs of the SIMT executor and of the sequential interpreter."""
    simt = [np.full(sh, np.nan, dtype) for sh in out_shapes]
    seq = [np.full(sh, np.nan, dtype) for sh in out_shapes]
    run_simt(f, args, simt, [], **kw)
    run_lowered(f, args, seq, [])
    return simt, seq


ROW_SHAPES = [(64, 64), (70, 33), (1, 1), (3, 17), (0, 5), (5, 0)]


@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("sched", [bind_rows, row_per_block])
def test_rowsum_matches_numpy_and_interpreter(sched, shape, rng):
    f = lowered(rowsum_graph(), sched)
    if sched is row_per_block:   # the cross-thread reduction, with its barrier
        assert collect(f.body, lambda x: isinstance(x, n.Barrier))
    A = rand(rng, shape, np.float32)
    (got,), (seq,) = both(f, [A], [shape[:1]], np.float32)
    np.testing.assert_allclose(got, A.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


@pytest.mark.parametrize("shape", [(8, 16), (9, 13), (1, 1), (0, 3), (4, 8)])
def test_elementwise_2d_blocks_and_threads(shape, rng):
    f = lowered(scale_graph(), elementwise_2d)
    A = rand(rng, shape, np.float64)
    (got,), (seq,) = both(f, [A], [shape], np.float64)
    np.testing.assert_array_equal(got, A * 2 + 1)
    np.testing.assert_array_equal(seq, got)


def test_elementwise_strided_view(rng):
    f = lowered(scale_graph(), elementwise_2d)
    A = rand(rng, (20, 30), np.float64)[::2, ::-3]
    (got,), _ = both(f, [A], [A.shape], np.float64)
    np.testing.assert_array_equal(got, A * 2 + 1)


@pytest.mark.parametrize("nkm", [(16, 8, 16), (9, 7, 10), (1, 1, 1), (0, 3, 2)])
def test_matmul_one_element_per_thread(nkm, rng):
    nn, kk, mm = nkm
    f = lowered(matmul_graph(), mm_threads)
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    (got,), (seq,) = both(f, [A, B], [(nn, mm)], np.float32)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


def test_block_order_does_not_matter(rng):
    f = lowered(matmul_graph(), mm_threads)
    A, B = rand(rng, (19, 5), np.float32), rand(rng, (5, 17), np.float32)
    (ordered,), _ = both(f, [A, B], [(19, 17)], np.float32)
    shuffled = np.full((19, 17), np.nan, np.float32)
    run_simt(f, [A, B], [shuffled], [], block_order=np.random.default_rng(7))
    np.testing.assert_array_equal(shuffled, ordered)


def drop_barriers(func):
    """Test-only: ``func`` with every barrier removed (the IR the sync pass would start from)."""
    import dataclasses
    from kdsl.ir.visitor import Mutator

    class Drop(Mutator):
        def visit_Seq(self, s):
            s = self.generic(s)
            kept = tuple(x for x in s.stmts if not isinstance(x, n.Barrier))
            return kept[0] if len(kept) == 1 else n.Seq(kept)
    return dataclasses.replace(func, body=Drop().visit(func.body))


@pytest.mark.parametrize("nkm", [(16, 16, 16), (9, 13, 10), (1, 1, 1), (0, 3, 2)])
def test_shared_cache_read_is_synchronised(nkm, rng):
    """The tiles copied into shared memory by the block's threads and read by other threads
    of the compute nest: the sync pass puts a barrier after the copies (RAW) and one before
    the next K tile's copies (WAR), and the result is race-free."""
    f = lowered(matmul_graph(), mm_shared_no_sync)
    assert len(collect(f.body, lambda x: isinstance(x, n.Barrier))) >= 2
    nn, kk, mm = nkm
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    (got,), (seq,) = both(f, [A, B], [(nn, mm)], np.float32)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)


def test_shared_cache_read_without_barrier_is_a_race(rng):
    """The same IR with its barriers removed: the race checker reports the copy/compute race."""
    f = drop_barriers(lowered(matmul_graph(), mm_shared_no_sync))
    assert not collect(f.body, lambda x: isinstance(x, n.Barrier))
    A, B = rand(rng, (16, 16), np.float32), rand(rng, (16, 16), np.float32)
    with pytest.raises(RaceError) as ei:
        run_simt(f, [A, B], [np.zeros((16, 16), np.float32)], [])
    e = ei.value
    assert e.kind == "read-after-write"
    assert e.buffer in ("A.shared", "B.shared")
    assert e.kernel == "mm.kernel0"
    assert e.threads[0] != e.threads[1]
    msg = str(e)
    assert f"shared buffer {e.buffer!r}" in msg and "block (0, 0, 0)" in msg
    # the writer is the copy statement, the reader the compute statement
    assert e.stmts[0].startswith(e.buffer + "[")
    assert e.stmts[1].startswith("C[") and e.buffer + "[" in e.stmts[1]
    # the sequential interpreter runs the phases in order and hides it
    out = np.zeros((16, 16), np.float32)
    run_lowered(f, [A, B], [out], [])
    np.testing.assert_allclose(out, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(64, 64), (70, 33), (1, 1), (0, 5), (5, 0)])
def test_seed_cross_thread_is_race_free_across_threadidx_y(shape, rng):
    """seed-000's cross-thread schedule binds rows to threadIdx.y outside the reduction: the
    CrossThreadReduce statement reduces over threadIdx.x only, and its lowering for sequential
    executors allocates B.red per block, indexed by both thread indices (it used to be one
    16-element buffer inside the threadIdx.y loop, raced on by the 32 rows of a block)."""
    f = lowered(rowsum_graph(), cross_thread)
    red = [a.buffer for a in collect(f.body, lambda x: isinstance(x, n.Allocate))
           if a.buffer.scope is n.Scope.SHARED]
    assert [tuple(e.value for e in b.shape) for b in red] == [(32, 16)]
    A = rand(rng, shape, np.float32)
    (got,), (seq,) = both(f, [A], [shape[:1]], np.float32)
    np.testing.assert_allclose(got, A.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, seq)
