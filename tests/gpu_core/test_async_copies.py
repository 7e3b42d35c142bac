"""The ``async_copies`` pass on hand-built kernels: a block's one-shot copy of global memory
into shared memory becomes cp.async + commit + wait(0), run race-checked on the SIMT executor;
copies it must leave alone (inside a serial loop, of a buffer the kernel writes, mixed with
computation, zero-filled) stay as they are."""
import numpy as np
import pytest

from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import RaceError, run_simt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.async_copies import async_copies
from hand_kernels import A, F32, NB, NT, O, S, barrier, c, fill, kernel, load, reverse, tloop


def kinds(f):
    return [type(x).__name__ for x in collect(f.body, lambda x: isinstance(x, (
        n.Store, n.AsyncCopy, n.CommitGroup, n.WaitGroup, n.Barrier)))]


def reversed_blocks(A_):
    return A_.reshape(NB, NT)[:, ::-1].reshape(-1)


def test_one_shot_copy_becomes_async_and_waits_before_the_barrier(rng):
    f = async_copies(kernel(fill, barrier, reverse))
    # the copy, then its commit and wait, then the barrier sync placed for the other threads
    assert kinds(f) == ["AsyncCopy", "CommitGroup", "WaitGroup", "Barrier", "Store"]
    (w,) = collect(f.body, lambda x: type(x) is n.WaitGroup)
    assert w.pending == 0
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    out = np.full(NB * NT, np.nan, np.float32)
    run_simt(f, [A_], [out], [])
    np.testing.assert_array_equal(out, reversed_blocks(A_))
    seq = np.zeros(NB * NT, np.float32)      # sequential executors copy at issue
    run_lowered(f, [A_], [seq], [])
    np.testing.assert_array_equal(seq, reversed_blocks(A_))


def test_a_missing_barrier_stays_a_race(rng):
    f = async_copies(kernel(fill, reverse))
    assert "AsyncCopy" in kinds(f)
    with pytest.raises(RaceError):
        run_simt(f, [rng.standard_normal(NB * NT).astype(np.float32)],
                 [np.zeros(NB * NT, np.float32)], [])


def test_own_elements_need_no_barrier(rng):
    """Each thread reads back what it copied (a row cache's passes): the wait suffices."""
    own = lambda b: tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),),
                                            mk.mul(load(S, t), n.const(2.0, F32))), name="u")
    f = async_copies(kernel(fill, own))
    assert kinds(f) == ["AsyncCopy", "CommitGroup", "WaitGroup", "Store"]
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    out = np.zeros(NB * NT, np.float32)
    run_simt(f, [A_], [out], [])
    np.testing.assert_array_equal(out, A_ * 2)


def test_adjacent_copies_share_one_wait(rng):
    """Two cached inputs: both copies are issued before the one wait."""
    S2 = n.Buffer("S2", F32, (c(NT),), scope=n.Scope.SHARED)
    fill2 = lambda b: tloop(lambda t: n.Store(S2, (t,), load(A, mk.add(mk.mul(b, NT), t))),
                            name="v")
    both = lambda b: tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),),
                                             mk.add(load(S, t), load(S2, t))), name="u")
    f = kernel(fill, fill2, both)
    f = n.LoweredFunc(f.name, f.inputs, f.outputs, f.scalars,
                      n.For(f.body.var, f.body.min, f.body.extent, f.body.kind,
                            n.Allocate(S2, f.body.body), f.body.thread))
    g = async_copies(f)
    assert kinds(g) == ["AsyncCopy", "AsyncCopy", "CommitGroup", "WaitGroup", "Store"]
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    out = np.zeros(NB * NT, np.float32)
    run_simt(g, [A_], [out], [])
    np.testing.assert_array_equal(out, A_ * 2)


def _serial(b):      # for k in range(2): S[t] = A[b*NT + t]  (a K loop: pipeline()'s business)
    k = n.var("k")
    return n.For(k, c(0), c(2), n.ForKind.SERIAL, fill(b))


def _from_output(b):   # O is written by the kernel: a copy of it stays a plain load and store
    return tloop(lambda t: n.Store(S, (t,), load(O, mk.add(mk.mul(b, NT), t))))


def _computed(b):      # S[t] = A[...] * 2: not a copy
    return tloop(lambda t: n.Store(S, (t,), mk.mul(load(A, mk.add(mk.mul(b, NT), t)),
                                                   n.const(2.0, F32))))


def _padded(b):        # if t < 4: S[t] = A[...] else: S[t] = 0 (a zero-filled tile)
    return tloop(lambda t: n.IfThenElse(
        mk.lt(t, c(4)), n.Store(S, (t,), load(A, mk.add(mk.mul(b, NT), t))),
        n.Store(S, (t,), n.const(0.0, F32))))


@pytest.mark.parametrize("phase", [_serial, _from_output, _computed, _padded])
def test_copies_it_leaves_alone(phase):
    f = kernel(phase, barrier, reverse)
    assert async_copies(f) is f


def test_a_function_without_shared_memory_is_returned_as_is():
    f = n.LoweredFunc("plain", (A,), (O,), (), tloop(lambda t: n.Store(O, (t,), load(A, t))))
    assert async_copies(f) is f
