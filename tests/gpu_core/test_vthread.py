"""vthread loops (issue 9 item 6): unrolled into each thread's body, interleaved, local buffers
one per virtual thread; run under the SIMT executor and the interpreter against numpy."""
import numpy as np
import pytest

from schedules import matmul_graph, mm_vthread, rand
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import run_simt
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.pipeline import lower_sequential as lower
from kdsl.schedule import Schedule


def lowered(sched, **kw):
    s = Schedule(matmul_graph())
    sched(s, **kw)
    return lower(s)


def _loops(f):
    return collect(f.body, lambda x: isinstance(x, n.For) and x.thread is not None)


def test_no_vthread_loop_remains_and_local_is_replicated():
    f = lowered(mm_vthread)
    tags = {x.thread for x in _loops(f)}
    assert not any(t.is_vthread for t in tags)
    assert {n.ThreadTag.THREAD_X, n.ThreadTag.THREAD_Y} <= tags
    # one per copy of the thread's work (full_thread_tiles: interior and edge threads)
    cls = [a for a in collect(f.body, lambda x: isinstance(x, n.Allocate)) if a.buffer.name == "C.local"]
    assert cls and all([int(x.value) for x in cl.buffer.shape] == [2, 2, 2, 2] for cl in cls)
    # interleaved: the four virtual threads' stores of C sit in one innermost loop body
    text = str(f)
    for vy in (0, 1):
        for vx in (0, 1):
            assert f"C.local[{vy}, {vx}, " in text
    # the local buffer lives inside the thread loops (one per thread), not above them
    tx = [x for x in _loops(f) if x.thread is n.ThreadTag.THREAD_X][0]
    assert all(cl in collect(tx.body, lambda x: isinstance(x, n.Allocate)) for cl in cls)


def test_vthread_pass_is_a_no_op_without_vthreads():
    from kdsl.gpu.vthread import inject_vthreads
    from schedules import mm_threads
    s = Schedule(matmul_graph())
    mm_threads(s)
    f = lower(s)
    assert inject_vthreads(f) is f


@pytest.mark.parametrize("nkm", [(32, 6, 32), (19, 7, 23), (1, 1, 1), (0, 3, 2), (3, 0, 5), (17, 2, 1)])
def test_warp_tiled_matmul(nkm, rng):
    nn, kk, mm = nkm
    f = lowered(mm_vthread)
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    simt, seq = (np.full((nn, mm), np.nan, np.float32) for _ in range(2))
    run_simt(f, [A, B], [simt], [])
    run_lowered(f, [A, B], [seq], [])
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(simt, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(simt, seq)


def test_three_virtual_threads_per_axis(rng):
    f = lowered(mm_vthread, block=12, vthreads=3, threads=2)
    A, B = rand(rng, (25, 4), np.float32), rand(rng, (4, 13), np.float32)
    out = np.full((25, 13), np.nan, np.float32)
    run_simt(f, [A, B], [out], [])
    np.testing.assert_allclose(out, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
