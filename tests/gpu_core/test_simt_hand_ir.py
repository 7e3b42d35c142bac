"""The SIMT executor's checks on hand-built IR: races, barrier divergence, out-of-bounds."""
import numpy as np
import pytest

from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import BarrierDivergence, RaceError, SimtOutOfBounds, run_simt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from hand_kernels import A, F32, NB, NT, O, S, barrier, c, fill, kernel, load, reverse, tloop


def shift(b):      # S[(t+1) % NT] = 0
    return tloop(lambda t: n.Store(S, (mk.mod(mk.add(t, 1), NT),), n.const(0.0, F32)), name="w")


def run(f, A_):
    out = np.full(NB * NT, np.nan, np.float32)
    run_simt(f, [A_], [out], [])
    return out


def reversed_blocks(A_):
    return A_.reshape(NB, NT)[:, ::-1].reshape(-1)


def test_two_phases_with_a_barrier_are_race_free(rng):
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    f = kernel(fill, barrier, reverse, barrier, shift)
    np.testing.assert_array_equal(run(f, A_), reversed_blocks(A_))
    seq = np.zeros(NB * NT, np.float32)
    run_lowered(f, [A_], [seq], [])
    np.testing.assert_array_equal(seq, reversed_blocks(A_))


def test_read_after_write_without_barrier(rng):
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    with pytest.raises(RaceError) as ei:
        run(kernel(fill, reverse), A_)
    e = ei.value
    assert (e.kind, e.buffer, e.kernel) == ("read-after-write", "S", "hand.kernel0")
    # thread 0 reads S[7], which thread 7 wrote
    assert e.element == (NT - 1,) and e.threads == ((NT - 1, 0, 0), (0, 0, 0))
    assert e.stmts == ("S[t] = A[b*8 + t]", "O[b*8 + u] = S[7 - u]")
    assert "block (0, 0, 0)" in str(e) and "thread (0, 0, 0) read it in" in str(e)


def test_write_after_read_without_barrier(rng):
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    with pytest.raises(RaceError) as ei:
        run(kernel(fill, barrier, reverse, shift), A_)
    e = ei.value
    assert e.kind == "write-after-read" and e.buffer == "S"
    # thread 0 writes S[1], which thread 6 read (reverse: u reads S[7 - u])
    assert e.element == (1,) and e.threads == ((NT - 2, 0, 0), (0, 0, 0))


def test_write_after_write_within_one_statement(rng):
    same = lambda b: tloop(lambda t: n.Store(S, (c(0),), load(A, t)))
    with pytest.raises(RaceError) as ei:
        run(kernel(same), rng.standard_normal(NB * NT).astype(np.float32))
    assert ei.value.kind == "write-after-write" and ei.value.element == (0,)
    assert ei.value.stmts[0] == ei.value.stmts[1]


def test_barrier_in_a_thread_dependent_if_diverges():
    t = n.var("t")
    body = n.Seq((n.Store(S, (t,), n.const(1.0, F32)),
                  n.IfThenElse(mk.lt(t, 4), n.Barrier())))
    f = kernel(lambda b: n.For(t, c(0), c(NT), n.ForKind.BOUND, body, n.ThreadTag.THREAD_X))
    with pytest.raises(BarrierDivergence) as ei:
        run(f, np.zeros(NB * NT, np.float32))
    msg = str(ei.value)
    assert "hand.kernel0" in msg and "block (0, 0, 0)" in msg
    assert "reached by threads (0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)" in msg
    assert "not by threads (4, 0, 0), (5, 0, 0), (6, 0, 0), (7, 0, 0):" in msg


def test_barrier_in_a_uniform_if_is_fine(rng):
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    uniform = lambda b: n.IfThenElse(mk.lt(b, 100), n.Barrier())
    np.testing.assert_array_equal(run(kernel(fill, uniform, reverse), A_), reversed_blocks(A_))


def test_barrier_inside_a_shorter_thread_loop_diverges():
    f = kernel(fill, lambda b: tloop(lambda t: n.Barrier(), extent=NT // 2, name="h"))
    with pytest.raises(BarrierDivergence):
        run(f, np.zeros(NB * NT, np.float32))


def test_out_of_bounds_shared_store():
    t = n.var("t")
    f = kernel(lambda b: n.For(t, c(0), c(NT), n.ForKind.BOUND,
                               n.Store(S, (mk.add(t, 1),), n.const(0.0, F32)), n.ThreadTag.THREAD_X))
    with pytest.raises(SimtOutOfBounds) as ei:
        run(f, np.zeros(NB * NT, np.float32))
    msg = str(ei.value)
    assert "out-of-bounds store of shared buffer 'S'" in msg
    assert f"at ({NT},) by thread ({NT - 1}, 0, 0)" in msg and "S[t + 1] = 0.0f" in msg


def test_out_of_bounds_global_load_only_for_active_threads(rng):
    """Threads outside a guard never load: the guard keeps A[b*8 + t + 1] in bounds."""
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    def nxt(b):
        t = n.var("t")
        i = mk.add(mk.mul(b, NT), t)
        st = n.Store(O, (i,), load(A, mk.add(i, 1)))
        return n.For(t, c(0), c(NT), n.ForKind.BOUND,
                     n.IfThenElse(mk.lt(mk.add(i, 1), NB * NT), st), n.ThreadTag.THREAD_X)
    out = run(kernel(nxt), A_)
    np.testing.assert_array_equal(out[:-1], A_[1:])
    unguarded = lambda b: tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),),
                                                  load(A, mk.add(mk.mul(b, NT), mk.add(t, 1)))))
    with pytest.raises(SimtOutOfBounds, match=r"load of global buffer 'A'.* by thread \(7, 0, 0\)"):
        run(kernel(unguarded), A_)


def test_a_barrier_resets_the_history(rng):
    """Thread 0 writes S[0], barrier, thread 1 writes S[0]: no race."""
    one = lambda k: (lambda b: tloop(lambda t: n.IfThenElse(mk.eq(t, k), n.Store(S, (c(0),), load(A, t))),
                                     name=f"t{k}"))
    run(kernel(one(0), barrier, one(1)), np.zeros(NB * NT, np.float32))
    with pytest.raises(RaceError, match="write-after-write"):
        run(kernel(one(0), one(1)), np.zeros(NB * NT, np.float32))


# ------------------------------------------------------------------ global memory
def own_row(b):    # O[b*NT + t] = A[b*NT + t]: every thread and block its own element
    return tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),), load(A, mk.add(mk.mul(b, NT), t))))


def first_row(b):  # O[t] = A[b*NT + t]: every block writes O[0:NT]
    return tloop(lambda t: n.Store(O, (t,), load(A, mk.add(mk.mul(b, NT), t))), name="u")


def zero_row_unbound(b):   # every thread zeroes the block's whole row (an unbound init loop)
    i = n.var("i")
    return n.For(i, c(0), c(NT), n.ForKind.SERIAL, n.Store(O, (mk.add(mk.mul(b, NT), i),), n.const(0.0, F32)))


def add_own(b):    # O[b*NT + t] += A[b*NT + t]
    def body(t):
        at = mk.add(mk.mul(b, NT), t)
        return n.Store(O, (at,), n.Binary(F32, n.BinOp.ADD, load(O, at), load(A, at)))
    return tloop(body, name="v")


def test_global_outputs_each_thread_its_own_element_are_race_free(rng):
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    np.testing.assert_array_equal(run(kernel(own_row), A_), A_)


def test_two_blocks_writing_one_global_element_is_a_race(rng):
    with pytest.raises(RaceError, match="across blocks") as ei:
        run(kernel(first_row), rng.standard_normal(NB * NT).astype(np.float32))
    e = ei.value
    assert e.kind == "write-after-write across blocks" and e.buffer == "O" and e.element == (0,)
    assert "block (0, 0, 0)" in str(e) and "block (1, 0, 0)" in str(e)


def test_every_thread_zeroing_the_tile_then_accumulating_is_a_race(rng):
    """The init-nest bug that thread-bound reduction inits fixed: all threads of a block write
    every element of the row, then each thread updates its own, with no barrier between."""
    with pytest.raises(RaceError) as ei:
        run(kernel(zero_row_unbound, add_own), rng.standard_normal(NB * NT).astype(np.float32))
    assert ei.value.buffer == "O" and "across blocks" not in ei.value.kind
    # the init distributed over the threads like the update (what loop_nests emits now): each
    # thread writes only its own element, so no barrier is needed, and the sum is right
    zero_own = lambda b: tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),), n.const(0.0, F32)), name="z")
    A_ = rng.standard_normal(NB * NT).astype(np.float32)
    np.testing.assert_array_equal(run(kernel(zero_own, add_own), A_), A_)


def test_read_of_never_written_shared_memory_is_reported(rng):
    """Issue 24: a masked cooperative copy left part of a shared tile unwritten and the kernel
    read it (NaN on the SIMT executor, garbage on a GPU); the executor now says so."""
    from kdsl.gpu.simt import UninitializedRead
    half = lambda b: tloop(lambda t: n.Store(S, (t,), load(A, mk.add(mk.mul(b, NT), t))), extent=NT // 2)
    with pytest.raises(UninitializedRead) as ei:
        run(kernel(half, barrier, reverse), rng.standard_normal(NB * NT).astype(np.float32))
    e = ei.value
    # thread 0 reads S[7]; only S[0..3] were written
    assert e.buffer == "S" and e.element == (NT - 1,) and e.thread == (0, 0, 0)
    assert "which no thread of the block wrote" in str(e) and "O[b*8 + u] = S[7 - u]" in str(e)
