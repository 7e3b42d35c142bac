"""The sync pass (kdsl.gpu.sync) and predication (kdsl.gpu.predicate): barriers exactly
where threads of a block exchange shared memory, none under divergent control flow; every
result checked by the race-checking SIMT executor and the sequential interpreter."""
import dataclasses

import numpy as np
import pytest

from schedules import (elementwise_2d, ladder_blocked, ladder_thread_tiling, matmul_graph,
                       mm_shared_no_sync, mm_threads, rand, scale_graph)
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import BarrierDivergence, RaceError, run_simt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.visitor import Mutator, collect
from kdsl.gpu.pipeline import GPU_SEQUENTIAL, lower_sequential as lower
from kdsl.gpu.predicate import predicate_kernel
from kdsl.gpu.sync import sync
from kdsl.schedule import Schedule
from hand_kernels import A, F32, NB, NT, O, S, c, fill, kernel, load, reverse, tloop



def lowered(graph, sched, **kw):
    s = Schedule(graph)
    sched(s)
    return lower(s, **kw)


def barriers(f):
    return collect(f.body if isinstance(f, n.LoweredFunc) else f, lambda x: isinstance(x, n.Barrier))


class DropBarrier(Mutator):
    """Test-only IR pass: removes the ``k``-th barrier (in program order)."""

    def __init__(self, k):
        super().__init__()
        self.k, self.seen = k, 0

    def visit_Seq(self, s):
        out = []
        for x in s.stmts:
            if isinstance(x, n.Barrier):
                self.seen += 1
                if self.seen - 1 == self.k:
                    continue
                out.append(x)
            else:
                out.append(self.visit(x))
        return out[0] if len(out) == 1 else n.Seq(tuple(out))


def drop_barrier(k):
    def drop_one_barrier(func):
        return dataclasses.replace(func, body=DropBarrier(k).visit(func.body))
    return drop_one_barrier


# ------------------------------------------------------------------ schedules
def test_no_barrier_without_shared_memory():
    assert not barriers(lowered(matmul_graph(), mm_threads))
    assert not barriers(lowered(scale_graph(), elementwise_2d))


def test_cpu_lowering_is_untouched():
    s = Schedule(matmul_graph())
    C = s["C"]
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    s.cache_read("A", "local", [C]).compute_at(C, jo)
    f = lower(s, pipeline=GPU_SEQUENTIAL.replace("sync", ("nosync", lambda f: f)))
    assert sync(f) is f


@pytest.mark.parametrize("k,kind,buffer", [(0, "write-after-read", "A.shared"),
                                           (1, "read-after-write", "A.shared")])
def test_deleting_a_barrier_of_the_ladder_is_a_race(k, kind, buffer, rng):
    """Each barrier of the thread-tiling step is needed: without the first (WAR: the next K
    tile overwrites the tile still being read) or the second (RAW: the copies before the
    reads) the race checker reports the race on the buffer."""
    sched = ladder_thread_tiling()
    f = lowered(matmul_graph(), sched, extra_passes=[drop_barrier(k)])
    A, B = rand(rng, (40, 24), np.float32), rand(rng, (24, 40), np.float32)
    with pytest.raises(RaceError) as ei:
        run_simt(f, [A, B], [np.zeros((40, 40), np.float32)], [])
    assert ei.value.kind == kind and ei.value.buffer == buffer
    assert buffer in str(ei.value)


def test_blocked_step_needs_both_barriers(rng):
    for k in (0, 1):
        f = lowered(matmul_graph(), ladder_blocked, extra_passes=[drop_barrier(k)])
        A, B = rand(rng, (16, 24), np.float32), rand(rng, (24, 16), np.float32)
        with pytest.raises(RaceError):
            run_simt(f, [A, B], [np.zeros((16, 16), np.float32)], [])


def test_init_nest_keeps_thread_bindings():
    """The reduction's init nest (reduction loop outside the thread loops) is distributed
    over the same threads as the update: each thread zeroes only its own element."""
    f = lowered(matmul_graph(), mm_shared_no_sync)
    inits = collect(f.body, lambda x: isinstance(x, n.Store) and isinstance(x.value, n.Const))
    assert inits
    kernel = f.body
    for init in inits:
        path = _path_to(kernel, init)
        tags = {x.thread for x in path if isinstance(x, n.For) and x.thread is not None}
        assert {n.ThreadTag.THREAD_X, n.ThreadTag.THREAD_Y} <= tags


def _path_to(root, target):
    if root is target:
        return [root]
    for child in _children(root):
        p = _path_to(child, target)
        if p:
            return [root] + p
    return []


def _children(s):
    if isinstance(s, n.Seq):
        return list(s.stmts)
    if isinstance(s, n.IfThenElse):
        return [s.then] + ([s.otherwise] if s.otherwise is not None else [])
    if isinstance(s, (n.For, n.Allocate, n.LetStmt)):
        return [s.body]
    return []


# ------------------------------------------------------------------ hand-built kernels
def own(b):         # O[b*NT + t] = S[t] * 2  (each thread reads what it wrote)
    return tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),),
                                   n.Binary(F32, n.BinOp.MUL, load(S, t), n.const(2.0, F32))), name="u")


def rotate(b):      # S[t] = S[t] + 1, twice over a serial loop, then read reversed
    r = n.var("r")
    inc = tloop(lambda t: n.Store(S, (t,), n.Binary(F32, n.BinOp.ADD, load(S, t), n.const(1.0, F32))),
                name="v")
    return n.For(r, c(0), c(2), n.ForKind.SERIAL, inc)


def run_both(f):
    a = np.random.default_rng(3).standard_normal(NB * NT).astype(np.float32)
    o1, o2 = np.zeros(NB * NT, np.float32), np.zeros(NB * NT, np.float32)
    run_simt(f, [a], [o1], [])
    run_lowered(f, [a], [o2], [])
    np.testing.assert_array_equal(o1, o2)
    return a, o1


def test_each_thread_reading_its_own_elements_needs_no_barrier():
    f = sync(kernel(fill, own))
    assert not barriers(f)
    a, o = run_both(f)
    np.testing.assert_array_equal(o, a * 2)


def test_a_serial_loop_over_own_elements_needs_no_barrier():
    f = sync(kernel(fill, rotate, own))
    assert not barriers(f)
    a, o = run_both(f)
    np.testing.assert_array_equal(o, (a + 2) * 2)


def test_reading_another_threads_element_gets_one_barrier():
    f0 = kernel(fill, reverse)
    with pytest.raises(RaceError):
        run_simt(f0, [np.zeros(NB * NT, np.float32)], [np.zeros(NB * NT, np.float32)], [])
    f = sync(f0)
    assert len(barriers(f)) == 1
    a, o = run_both(f)
    np.testing.assert_array_equal(o, a.reshape(NB, NT)[:, ::-1].ravel())


def test_war_across_serial_iterations():
    """for r: S[t] = A[..] + r; O[..] += S[NT-1-t]: a barrier after the copy (RAW) and one
    before the next iteration's copy (WAR)."""
    def body(b):
        r = n.var("r")
        cp = tloop(lambda t: n.Store(S, (t,), n.Binary(F32, n.BinOp.ADD, load(A, mk.add(mk.mul(b, NT), t)),
                                                        n.Cast(F32, r))))
        acc = tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),),
                                      n.Binary(F32, n.BinOp.ADD, load(O, mk.add(mk.mul(b, NT), t)),
                                               load(S, mk.sub(NT - 1, t)))), name="u")
        return n.For(r, c(0), c(3), n.ForKind.SERIAL, n.Seq((cp, acc)))
    f0 = kernel(body)
    f = sync(f0)
    loop = collect(f.body, lambda x: isinstance(x, n.For) and x.var.name == "r")[0]
    assert len(barriers(loop)) == 2
    a, o = run_both(f)
    rev = a.reshape(NB, NT)[:, ::-1].ravel()
    np.testing.assert_allclose(o, 3 * rev + 3, rtol=1e-6)
    # either barrier alone is not enough
    for k in (0, 1):
        g = dataclasses.replace(f, body=DropBarrier(k).visit(f.body))
        with pytest.raises(RaceError):
            run_simt(g, [a], [np.zeros(NB * NT, np.float32)], [])


def _guarded_exchange(b, half, barrier=True, outer=NT):
    """for t (threadIdx.x, extent ``outer``): if t < half: copy S[:half] cooperatively;
    [barrier;] O[t3] = S[(t3 + 1) % half] (inner loops of the same tag: the same thread)."""
    t = n.var("t")
    cp = tloop(lambda t2: n.Store(S, (t2,), load(A, mk.add(mk.mul(b, NT), t2))), extent=half, name="t2")
    rd = tloop(lambda t3: n.Store(O, (mk.add(mk.mul(b, NT), t3),), load(S, mk.mod(mk.add(t3, 1), half))),
               extent=half, name="t3")
    inner = n.Seq((cp, n.Barrier(), rd) if barrier else (cp, rd))
    if outer == NT:
        inner = n.IfThenElse(mk.lt(t, half), inner)
    return n.For(t, c(0), c(outer), n.ForKind.BOUND, inner, n.ThreadTag.THREAD_X)


def _want_exchange(a, half):
    want = np.zeros(NB * NT, np.float32)
    for blk in range(NB):
        src = a[blk * NT: blk * NT + half]
        want[blk * NT: blk * NT + half] = np.roll(src, -1)
    return want


def _not_under_if(f):
    for bar in barriers(f):
        assert not any(isinstance(x, n.IfThenElse) for x in _path_to(f.body, bar))


def test_barrier_under_a_thread_guard_is_predicated():
    """if t < half encloses a phase pair with its barrier: the guard moves onto the phases,
    the barrier runs on every thread."""
    half = NT // 2
    f0 = kernel(lambda b: _guarded_exchange(b, half))
    with pytest.raises(BarrierDivergence):
        run_simt(f0, [np.zeros(NB * NT, np.float32)], [np.zeros(NB * NT, np.float32)], [])
    f = dataclasses.replace(f0, body=predicate_kernel(f0.body))
    _not_under_if(f)
    a, o = run_both(f)
    np.testing.assert_array_equal(o, _want_exchange(a, half))


def test_barrier_in_a_masked_thread_loop_is_predicated():
    """A thread loop shorter than the block (another loop of its tag is longer) holding a
    barrier runs to the block's extent with its body guarded."""
    half = NT // 2

    def body(b):
        full = tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),), n.const(0.0, F32)), name="z")
        return n.Seq((full, _guarded_exchange(b, half, outer=half)))
    f0 = kernel(body)
    with pytest.raises(BarrierDivergence):
        run_simt(f0, [np.zeros(NB * NT, np.float32)], [np.zeros(NB * NT, np.float32)], [])
    f = dataclasses.replace(f0, body=predicate_kernel(f0.body))
    a, o = run_both(f)
    np.testing.assert_array_equal(o, _want_exchange(a, half))


def test_sync_predicates_guards_around_its_barriers():
    """The pass itself: the barrier it needs inside a guarded region lands outside the guard."""
    half = NT // 2
    f0 = kernel(lambda b: _guarded_exchange(b, half, barrier=False))
    with pytest.raises(RaceError):
        run_simt(f0, [np.zeros(NB * NT, np.float32)], [np.zeros(NB * NT, np.float32)], [])
    f = sync(f0)
    assert len(barriers(f)) == 1
    _not_under_if(f)
    a, o = run_both(f)
    np.testing.assert_array_equal(o, _want_exchange(a, half))
