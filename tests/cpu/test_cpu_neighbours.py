"""Parallel loops that share the cores with other libraries' threads (issue 27 item 6).

The launchers cut a loop into ``block_count(n)`` blocks that the threads claim one at a time,
so that a thread that starts late (its core held by numpy's spinning OpenBLAS workers, say)
runs fewer blocks instead of holding up the call; the thread-pool launcher never waits for a
worker that has not started.  No timing is asserted here: benchmarks/cpu_neighbours.py measures.
"""
import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import kdsl as kd
from kdsl_cpu import parallel


def _recorder():
    """A chunk callback that records ``(block, blocks, thread)`` of every call."""
    calls, lock = [], threading.Lock()

    def chunk(data, tid, nthreads):
        with lock:
            calls.append((tid, nthreads, threading.get_ident()))
    return parallel.CHUNK_FN(chunk), calls


def _launchers():
    out = [("pool", parallel.pool_launcher())]
    if parallel.workers_launcher() is not None:
        out.append(("workers", parallel.workers_launcher()))
    if parallel.omp_launcher() is not None:
        out.append(("omp", parallel.omp_launcher()))
    return out


def test_block_count():
    assert parallel.block_count(1) == 1
    assert parallel.block_count(2) == 2 * parallel.BLOCKS_PER_THREAD
    assert parallel.block_count(5) == 5 * parallel.BLOCKS_PER_THREAD


@pytest.mark.parametrize("name,addr", _launchers(), ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("n", [2, 3])
def test_every_block_runs_exactly_once(name, addr, n):
    chunk, calls = _recorder()
    parallel.LAUNCH_FN(addr)(chunk, None, n)
    nb = parallel.block_count(n)
    assert sorted(c[0] for c in calls) == list(range(nb))
    assert {c[1] for c in calls} == {nb}
    assert len({c[2] for c in calls}) <= n        # never more threads than asked


def test_pool_launcher_does_not_wait_for_workers_that_never_start(monkeypatch):
    # the only worker is busy until the launch is over: the caller must run every block
    stuck = ThreadPoolExecutor(max_workers=1)
    release = threading.Event()
    stuck.submit(release.wait)
    monkeypatch.setattr(parallel, "_get_pool", lambda workers: stuck)
    chunk, calls = _recorder()
    try:
        parallel.LAUNCH_FN(parallel.pool_launcher())(chunk, None, 2)
    finally:
        release.set()
        stuck.shutdown(wait=True)
    assert sorted(c[0] for c in calls) == list(range(parallel.block_count(2)))
    assert {c[2] for c in calls} == {threading.get_ident()}


@kd.kernel
def _axpy(a, x, y):
    return a * x + y


def test_kernels_called_from_several_threads_at_once(rng):
    # a launch while another thread's is running runs on its caller alone (never blocks)
    x = rng.standard_normal(1 << 18).astype(np.float32)
    want = 2.0 * x.astype(np.float64) + x
    bad = []

    def work(a):
        for _ in range(20):
            got = _axpy(a, x, x, backend="cpu")
            if not np.allclose(got, a * x.astype(np.float64) + x, rtol=1e-6, atol=1e-6):
                bad.append(a)
    with kd.num_threads(2):
        np.testing.assert_allclose(_axpy(2.0, x, x, backend="cpu"), want, rtol=1e-6)
        ts = [threading.Thread(target=work, args=(float(a),)) for a in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not bad


@kd.kernel
def _mm(A, B):
    return A @ B


@kd.kernel
def _rowsoftmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_do_not_depend_on_the_thread_count(threads, rng):
    # partial edge tiles (uneven blocks) and more blocks than parallel iterations
    A = rng.standard_normal((197, 70)).astype(np.float32)
    B = rng.standard_normal((70, 131)).astype(np.float32)
    X = rng.standard_normal((301, 37)).astype(np.float32)
    e = np.exp(X.astype(np.float64) - X.max(axis=1, keepdims=True))
    with kd.num_threads(threads):
        np.testing.assert_allclose(_mm(A, B, backend="cpu"), A.astype(np.float64) @ B,
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(_rowsoftmax(X, backend="cpu"),
                                   e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this OS")
def test_loaded_object_data_is_private_to_each_process():
    # regression: elfload mapped objects MAP_SHARED, so the workers' job state (a global of
    # the launcher's object) was shared by forked children, which then ran each other's blocks
    from kdsl_cpu import jit
    ir_text = """
@g = internal global i64 0
define i64 @swap_g(i64 %v) {
  %old = load i64, ptr @g
  store i64 %v, ptr @g
  ret i64 %old
}
"""
    code = jit.load_object(jit.compile_glue(ir_text), "swap_g")
    swap = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(code.address)
    assert swap(1) == 0
    pid = os.fork()
    if pid == 0:
        swap(5)
        os._exit(0)
    os.waitpid(pid, 0)
    assert swap(2) == 1


def test_workers_build_failure_is_said(monkeypatch):
    """A worker launcher that fails to build falls back to OpenMP with a RuntimeWarning that
    says why (it used to fall back silently)."""
    from kdsl_cpu import workers

    def broken(blocks):
        raise OSError("no futex here")
    monkeypatch.setattr(workers, "_code", None)
    monkeypatch.setattr(workers, "_load", broken)
    monkeypatch.setattr(workers, "supported", lambda: True)
    with pytest.warns(RuntimeWarning, match="no futex here"):
        assert workers.launcher(4) is None
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert workers.launcher(4) is None      # once per process: no second warning
