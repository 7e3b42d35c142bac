"""Software pipelining (issue 9 item 7): double_buffer()/pipeline(k) on a global->shared copy
inside the K-tile loop becomes a ring of shared buffers filled by asynchronous copies; run
under the SIMT executor (race- and async-checked) and the interpreter against numpy."""
import dataclasses

import numpy as np
import pytest

from schedules import matmul_graph, mm_double_buffer, mm_shared_no_sync, rand, scale_graph
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import AsyncCopyRace, RaceError, run_simt
from kdsl.errors import ScheduleError
from kdsl.ir import nodes as n
from kdsl.ir.visitor import Mutator, collect
from kdsl.gpu.interior_blocks import edge_copy
from kdsl.gpu.pipeline import lower_sequential as lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.gpu.sequential import lower_async_copies as sequential_async
from kdsl.schedule import Schedule


def lowered(sched, graph=None, **kw):
    s = Schedule(graph or matmul_graph())
    sched(s, **kw)
    return gpu_lower(s)


SHAPES = [(16, 16, 16), (9, 13, 7), (1, 1, 1), (0, 3, 2), (3, 0, 2), (20, 30, 17), (8, 8, 8), (5, 1, 3)]


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("nkm", SHAPES)
def test_pipelined_matmul(nkm, stages, rng):
    nn, kk, mm = nkm
    f = lowered(mm_double_buffer, stages=stages)
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    simt, seq, seq2 = (np.full((nn, mm), np.nan, np.float32) for _ in range(3))
    run_simt(f, [A, B], [simt], [], block_order=np.random.default_rng(3))
    run_lowered(f, [A, B], [seq], [])
    g = sequential_async(f)
    assert not collect(g.body, lambda x: isinstance(x, (n.AsyncCopy, n.CommitGroup, n.WaitGroup)))
    run_lowered(g, [A, B], [seq2], [])
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(simt, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(simt, seq)
    np.testing.assert_array_equal(seq2, seq)


def test_printed_ring_prologue_and_epilogue():
    text = str(lowered(mm_double_buffer))
    lines = [x.strip() for x in text.splitlines()]
    # rows of 32 bytes, padded to 48 (shared_layout)
    assert "allocate A.shared: float32[2, 8, 8] strides (96, 12, 1) shared, stages=2" in lines
    assert "allocate B.shared: float32[2, 8, 8] strides (96, 12, 1) shared, stages=2" in lines
    loop = next(k for k, x in enumerate(lines) if x.startswith("for r.outer in"))
    # prologue: tile 0 into slot 0, one group
    pro = lines[:loop]
    assert any(x.startswith("async_copy(A.shared[0, ") and "when=0 < ceildiv(k, 8)" in x for x in pro)
    assert pro[-1] == "commit_group()"
    body = lines[loop:]
    assert any(x.startswith("async_copy(A.shared[(r.outer + 1) % 2, ") for x in body)
    k = body.index("commit_group()")
    assert body[k + 1:k + 3] == ["wait_group(1)", "barrier(shared)"]
    assert any("A.shared[r.outer % 2, " in x for x in body[k:])
    # epilogue: drain the (predicated-off) last group after the loop
    assert lines[-2:] == ["barrier(shared)", "wait_group(0)"]


def test_three_stages_waits_for_all_but_two():
    f = lowered(mm_double_buffer, stages=3)
    body = edge_copy(f.body)     # one copy of the block's work (kdsl.gpu.interior_blocks)
    waits = [w.pending for w in collect(body, lambda x: isinstance(x, n.WaitGroup))]
    assert waits == [2, 0]
    assert len(collect(body, lambda x: isinstance(x, n.CommitGroup))) == 3   # 2 prologue + loop


class _Drop(Mutator):
    """Remove the first statement for which ``pred`` holds."""

    def __init__(self, pred):
        super().__init__()
        self.pred, self.done = pred, False

    def visit_Seq(self, s):
        out = []
        for x in s.stmts:
            if not self.done and self.pred(x):
                self.done = True
                continue
            out.append(self.visit(x))
        return n.Seq(tuple(out))


def _drop(f, pred):
    d = _Drop(pred)
    g = dataclasses.replace(f, body=d.visit(f.body))
    assert d.done
    return g


def _args(rng, nkm=(16, 24, 16)):
    nn, kk, mm = nkm
    return [rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)], [np.zeros((nn, mm), np.float32)]


def test_read_before_wait_is_reported(rng):
    f = _drop(lowered(mm_double_buffer), lambda x: isinstance(x, n.WaitGroup) and x.pending == 1)
    ins, outs = _args(rng)
    with pytest.raises(AsyncCopyRace) as ei:
        run_simt(f, ins, outs, [])
    e = ei.value
    assert e.buffer in ("A.shared", "B.shared")
    assert e.stmts[0].startswith(f"async_copy({e.buffer}[")
    assert e.stmts[1].startswith("C[") and f"{e.buffer}[r.outer % 2" in e.stmts[1]
    assert "in flight" in str(e) and e.kernel == "mm_kernel0"
    # the sequential interpreter copies at issue and cannot see it
    run_lowered(f, ins, outs, [])


def test_missing_barrier_after_wait_is_a_race(rng):
    f = _drop(lowered(mm_double_buffer), lambda x: isinstance(x, n.Barrier))
    ins, outs = _args(rng)
    with pytest.raises(RaceError) as ei:
        run_simt(f, ins, outs, [])
    assert ei.value.kind == "read-after-write"
    assert ei.value.stmts[0].startswith("async_copy(")


def test_missing_barrier_before_refill_is_a_race(rng):
    f = lowered(mm_double_buffer)
    loop = collect(f.body, lambda x: isinstance(x, n.For) and x.var.name == "r.outer")[0]
    last = loop.body.stmts[-1]
    assert isinstance(last, n.Barrier)
    f = _drop(f, lambda x: x is last)
    ins, outs = _args(rng)
    with pytest.raises(RaceError) as ei:
        run_simt(f, ins, outs, [])
    assert ei.value.kind == "write-after-read"


def test_block_ending_with_copies_in_flight_is_reported(rng):
    """Hand IR: each thread of a block copies one element into shared memory and commits,
    and nothing waits for it."""
    from kdsl import dtypes as dt
    A = n.Buffer("A", dt.float32, (n.const(8),), param=True)
    O = n.Buffer("O", dt.float32, (n.const(8),), param=True)
    S = n.Buffer("S", dt.float32, (n.const(8),), scope=n.Scope.SHARED)
    t, b = n.var("t"), n.var("b")
    copy = n.For(t, n.const(0), n.const(8), n.ForKind.BOUND,
                 n.AsyncCopy(S, (t,), n.Load(dt.float32, A, (t,))), n.ThreadTag.THREAD_X)
    out = n.For(t, n.const(0), n.const(8), n.ForKind.BOUND,
                n.Store(O, (t,), n.const(1.0, dt.float32)), n.ThreadTag.THREAD_X)
    body = n.Allocate(S, n.Seq((copy, n.CommitGroup(), out)))
    f = n.LoweredFunc("hand", (A,), (O,), (), n.For(b, n.const(0), n.const(1), n.ForKind.BOUND, body,
                                                      n.ThreadTag.BLOCK_X))
    a = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(AsyncCopyRace, match="still in flight") as ei:
        run_simt(f, [a], [np.zeros(8, np.float32)], [])
    assert ei.value.buffer == "S"
    # with the wait, it runs (and the interpreter agrees)
    body = n.Allocate(S, n.Seq((copy, n.CommitGroup(), n.WaitGroup(0), out)))
    f = dataclasses.replace(f, body=dataclasses.replace(f.body, body=body))
    o1, o2 = np.zeros(8, np.float32), np.zeros(8, np.float32)
    run_simt(f, [a], [o1], [])
    run_lowered(f, [a], [o2], [])
    np.testing.assert_array_equal(o1, o2)


def test_no_pipelined_stage_no_change():
    from kdsl.gpu.software_pipeline import software_pipeline
    s = Schedule(matmul_graph())
    mm_shared_no_sync(s)
    f = lower(s)
    assert software_pipeline(f) is f
    assert not collect(f.body, lambda x: isinstance(x, (n.AsyncCopy, n.WaitGroup)))


# ------------------------------------------------------------- what qualifies
def _base():
    s = Schedule(matmul_graph())
    mm_shared_no_sync(s)
    return s


def _line_of(e):
    assert e.loc is not None and e.loc.file == __file__
    return e.loc.code


def test_double_buffer_on_a_computing_stage():
    s = _base()
    with pytest.raises(ScheduleError, match="not a copy") as ei:
        s["C"].double_buffer()
    assert _line_of(ei.value) == 's["C"].double_buffer()'
    assert "global memory into shared memory" in str(ei.value)


def test_double_buffer_on_a_local_buffer():
    s = Schedule(matmul_graph())
    C = s["C"]
    AL = s.cache_read("A", "local", [C])
    ko, ki = C.split(C.reduce_axes[0], factor=4)
    AL.compute_at(C, ko)
    with pytest.raises(ScheduleError, match="local memory, not shared memory") as ei:
        AL.double_buffer()
    assert _line_of(ei.value) == "AL.double_buffer()"


def test_double_buffer_at_the_root():
    s = Schedule(matmul_graph())
    AA = s.cache_read("A", "shared", [s["C"]])
    # compute_at may come later (TVM's order): checked when the schedule is finished
    AA.double_buffer()
    with pytest.raises(ScheduleError, match="computed at the root") as ei:
        s.finish()
    assert _line_of(ei.value) == "AA.double_buffer()"


def test_pipeline_on_a_thread_loop():
    s = Schedule(matmul_graph())
    C = s["C"]
    AA = s.cache_read("A", "shared", [C])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    C.bind(ji, "threadIdx.x")
    AA.compute_at(C, ji)
    with pytest.raises(ScheduleError, match="must be serial") as ei:
        AA.pipeline(2)
    assert _line_of(ei.value) == "AA.pipeline(2)"


@pytest.mark.parametrize("bad", [1, 0, 2.0, True])
def test_pipeline_stage_count(bad):
    s = _base()
    with pytest.raises(ScheduleError, match="stages >= 2"):
        s["A.shared"].pipeline(bad)


def test_copy_of_a_non_global_tensor():
    s = Schedule(scale_graph())
    O = s["O"]
    AL = s.cache_read("A", "local", [O])
    AS = s.cache_read(AL.stage.output, "shared", [O])
    io, ii = O.split(O.axes[0], factor=4)
    AS.compute_at(O, io)
    with pytest.raises(ScheduleError, match="not in global memory") as ei:
        AS.double_buffer()
    assert _line_of(ei.value) == "AS.double_buffer()"


def test_broken_after_the_call_is_reported_at_lowering():
    s = _base()
    C = s["C"]
    AA = s["A.shared"]
    AA.double_buffer()
    pipelined_at = AA.pipeline_loc
    AA.compute_at(C, C.leaf_axes[4])     # j.inner, bound to threadIdx.x: not serial
    with pytest.raises(ScheduleError, match="must be serial.*checked on the finished schedule") as ei:
        lower(s)
    assert ei.value.loc == pipelined_at


def mm_padded(s, stages=1):
    """mm_shared_no_sync with both shared tiles padded caches (``cache_read(pad=True)``):
    every element of a tile written, zero beyond A's and B's edges; pipelined for stages > 1."""
    mm_shared_no_sync(s, pad=True)
    for name in ("A.shared", "B.shared"):
        if stages > 1:
            s[name].pipeline(stages)


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("nkm", [(9, 13, 7), (16, 16, 16), (0, 3, 2), (20, 30, 17)])
def test_padded_caches(nkm, stages, rng):
    """A padded cache writes zeros where its tile leaves the array (an else branch, or the
    predicate of the asynchronous copy when pipelined): the same results everywhere."""
    nn, kk, mm = nkm
    f = lowered(mm_padded, stages=stages)
    copies = collect(f.body, lambda x: isinstance(x, n.AsyncCopy))
    if stages > 1:
        assert copies and all(c.predicate is not None for c in copies)
    else:
        zeros = collect(edge_copy(f.body), lambda x: isinstance(x, n.IfThenElse) and x.otherwise is not None
                        and isinstance(x.otherwise, n.Store) and x.otherwise.buffer.scope is n.Scope.SHARED)
        assert len(zeros) == 2
    A, B = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
    simt, seq = (np.full((nn, mm), np.nan, np.float32) for _ in range(2))
    run_simt(f, [A, B], [simt], [], block_order=np.random.default_rng(3))
    run_lowered(sequential_async(f), [A, B], [seq], [])
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(simt, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(seq, want, rtol=1e-4, atol=1e-4)


def test_pad_must_be_a_bool():
    s = Schedule(matmul_graph())
    with pytest.raises(ScheduleError, match="pad must be True or False"):
        s.cache_read("A", "shared", [s["C"]], pad="yes")
