"""Cross-thread reductions as one IR statement (issue 9 item 4).

Every schedule runs three ways against numpy in float64: the SIMT executor on the IR that
keeps ``CrossThreadReduce`` (executed natively, by its definition), the SIMT executor on
the IR after ``lower_cross_thread`` (shared-memory phases, race-checked) and the sequential
interpreter (which only ever sees the lowered form).  The native and lowered folds combine
in the same order, so their results agree bit for bit.
"""
import dataclasses

import numpy as np
import pytest

import kdsl as kd
from handgraph import Builder, read
from schedules import rand, row_per_block, rowsum_graph
from seed_schedules import SEED_SCHEDULES, cross_thread
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import CrossThreadDivergence, SimtError, run_simt
from kdsl.errors import InternalCompilerError, ScheduleError
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.passes.lower_cross_thread import lower_cross_thread
from kdsl.gpu.pipeline import GPU_SEQUENTIAL, lower_sequential as lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule

#: the sequential table with the statement kept (the SIMT executor runs it natively; the GPU
#: table ``PIPELINE`` keeps it too, but also refuses the seed's unbound schedules)
NATIVE = GPU_SEQUENTIAL.remove("lower_cross_thread")


def ctrs(f):
    return collect(f.body, lambda x: isinstance(x, n.CrossThreadReduce))


def lowered_pair(graph, sched):
    s = Schedule(graph)
    sched(s)
    return lower(s, pipeline=NATIVE), lower(s)


def run3(pair, args, outs):
    """Outputs (list per way) of: SIMT native, SIMT lowered, interpreter lowered."""
    native, low = pair
    assert not ctrs(low)
    got = []
    for run, f in ((run_simt, native), (run_simt, low), (run_lowered, low)):
        o = [np.full(sh, -7, dtp) for sh, dtp in outs]
        run(f, args, o, [])
        got.append(o)
    return got


def check(pair, args, outs, want, rtol=1e-5, atol=1e-5, exact=False):
    got = run3(pair, args, outs)
    for way in got:
        for g, w in zip(way, want):
            if exact:
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    for g1, g2 in zip(got[0], got[2]):        # native fold == lowered fold, bit for bit
        np.testing.assert_array_equal(g1, g2)


#: small (the SIMT executor runs host code element by element): 2 row blocks of 32 for the
#: seed schedules, partial thread tiles, 1 and 0 sizes
ROW_SHAPES = [(33, 20), (3, 17), (1, 1), (0, 5), (5, 0)]


# ------------------------------------------------------------------ row sums
@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("sched", SEED_SCHEDULES + [row_per_block], ids=lambda f: f.__name__)
def test_seed_schedules(sched, shape, rng):
    pair = lowered_pair(rowsum_graph(), sched)
    has = sched in (cross_thread, row_per_block)
    assert bool(ctrs(pair[0])) == has
    A = rand(rng, shape, np.float32)
    check(pair, [A], [(shape[:1], np.float32)], [A.astype(np.float64).sum(1)])


def test_seed_cross_thread_prints_the_statement():
    native, low = lowered_pair(rowsum_graph(), cross_thread)
    text = str(native)
    assert "B.v[0] = cross_thread_sum(B.acc[0]; over threadIdx.x)" in text
    assert "if k.inner.v == 0 and i.outer*32 + i.inner < n:" in text
    assert "barrier" not in text and "shared" not in text
    # lowered: one shared buffer for the block, outside the thread loops, indexed by both
    red = [a for a in collect(low.body, lambda x: isinstance(x, n.Allocate)) if a.buffer.scope is n.Scope.SHARED]
    assert len(red) == 1 and [e.value for e in red[0].buffer.shape] == [32, 16]
    assert red[0].body.stmts[0].thread is n.ThreadTag.THREAD_Y


def row_threads(T, two=False):
    """One row per block, the row's reduction split over T threads (directly: no rfactor);
    ``two``: over threadIdx.y x threadIdx.x (T // 8 x 8)."""
    def sched(s):
        B = s.outputs[0]
        B.bind(B.axes[0], "blockIdx.x")
        if two:
            ko, k1 = B.split(B.reduce_axes[0], factor=T)
            k1, k2 = B.split(k1, factor=8)
            B.reorder(B.axes[0], k1, k2, ko)
            B.bind(k1, "threadIdx.y")
            B.bind(k2, "threadIdx.x")
        else:
            ko, ki = B.split(B.reduce_axes[0], factor=T)
            B.reorder(B.axes[0], ki, ko)
            B.bind(ki, "threadIdx.x")
    sched.__name__ = f"row_threads_{T}" + ("_xy" if two else "")
    return sched


@pytest.mark.parametrize("shape", ROW_SHAPES[1:] + [(4, 64), (3, 200)])
@pytest.mark.parametrize("sched", [row_threads(32), row_threads(64), row_threads(32, two=True)],
                         ids=lambda f: f.__name__)
def test_row_per_block(sched, shape, rng):
    pair = lowered_pair(rowsum_graph(), sched)
    (c,) = ctrs(pair[0])
    assert set(c.threads) == ({n.ThreadTag.THREAD_X, n.ThreadTag.THREAD_Y} if "xy" in sched.__name__
                              else {n.ThreadTag.THREAD_X})
    A = rand(rng, shape, np.float32)
    check(pair, [A], [(shape[:1], np.float32)], [A.astype(np.float64).sum(1)])


def test_spatial_thread_axis_inside_the_reduction_stays_spatial(rng):
    """Rows over threadIdx.y, bound *inside* the threadIdx.x reduction: a reduction per row."""
    def sched(s):
        B = s["B"]
        io, ii = B.split(B.axes[0], factor=4)
        ko, ki = B.split(B.reduce_axes[0], factor=8)
        B.reorder(io, ki, ii, ko)
        B.bind(io, "blockIdx.x")
        B.bind(ii, "threadIdx.y")         # first: ki's bind refuses an unbound spatial loop inside
        B.bind(ki, "threadIdx.x")
    pair = lowered_pair(rowsum_graph(), sched)
    assert ctrs(pair[0])[0].threads == (n.ThreadTag.THREAD_X,)
    for shape in [(9, 21), (8, 16), (1, 1), (0, 3), (3, 0)]:
        A = rand(rng, shape, np.float32)
        check(pair, [A], [(shape[:1], np.float32)], [A.astype(np.float64).sum(1)])


# ------------------------------------------------------------------ column sum: no statement
def colsum_graph():
    b = Builder("colsum")
    A = b.input("A", ("n", "m"), dt.float32)
    j, r = b.axis("j", b.dim("m")), b.raxis("r", b.dim("n"))
    sum_ = __import__("handgraph").sum_
    return b.graph(b.compute("B", [j], sum_(read(A, r, j), [r]), [r]))


def colsum_sched(s):
    """jo -> blockIdx.x, r, ji -> threadIdx.x: each thread its own column."""
    B = s["B"]
    jo, ji = B.split(B.axes[0], factor=32)
    B.reorder(jo, B.reduce_axes[0], ji)
    B.bind(jo, "blockIdx.x")
    B.bind(ji, "threadIdx.x")


@pytest.mark.parametrize("shape", [(5, 64), (7, 70), (1, 1), (0, 5), (5, 0), (33, 3)])
def test_column_sum(shape, rng):
    pair = lowered_pair(colsum_graph(), colsum_sched)
    assert not ctrs(pair[0]) and not collect(pair[1].body, lambda x: isinstance(x, n.Barrier))
    r = [x for x in collect(pair[0].body, lambda x: isinstance(x, n.For)) if x.var.name == "r"]
    assert len(r) == 1 and r[0].kind is n.ForKind.SERIAL      # the thread loop stays inside r
    assert collect(r[0].body, lambda x: isinstance(x, n.For) and x.thread is n.ThreadTag.THREAD_X)
    A = rand(rng, shape, np.float32)
    check(pair, [A], [(shape[1:], np.float32)], [A.astype(np.float64).sum(0)])


# ------------------------------------------------------------------ argmax (two values)
def argmax_comb(dtype):
    """A user combiner (kind None) over (index, value) pairs, commutative: ties keep the
    smaller index (``handgraph.argmax_combiner`` keeps the left one, which is right only in
    index order; threads fold partials out of index order)."""
    il, vl, ir_, vr = n.var("il"), n.Var(dtype, "vl"), n.var("ir"), n.Var(dtype, "vr")
    b = dt.bool_
    take = n.Binary(b, n.BinOp.OR, n.Compare(b, n.CmpOp.GT, vr, vl),
                         mk.logical_and(n.Compare(b, n.CmpOp.EQ, vr, vl), n.Compare(b, n.CmpOp.LT, ir_, il)))
    return n.Combiner("argmax_user", (il, vl), (ir_, vr),
                      (n.Select(dt.int64, take, ir_, il), n.Select(dtype, take, vr, vl)),
                      (n.const(1 << 62, dt.int64), n.const(float("-inf"), dtype)))


def argmax_graph():
    b = Builder("argmax")
    A = b.input("A", ("n", "m"), dt.float32)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    body = n.Reduce(dt.int64, argmax_comb(dt.float32), (k.var, read(A, i, k)), (k,), None, 0)
    return b.graph(b.compute("B", [i], body, [k]))


@pytest.mark.parametrize("shape", [(4, 64), (5, 70), (3, 1), (1, 1), (0, 4), (3, 0)])
@pytest.mark.parametrize("T", [32, 64])
def test_argmax_rows_user_combiner(T, shape, rng):
    """Ties across threads: the fold must keep the smaller index whatever thread holds it."""
    pair = lowered_pair(argmax_graph(), row_threads(T))
    (c,) = ctrs(pair[0])
    assert len(c.values) == len(c.results) == 2
    A = rng.integers(0, 3, shape).astype(np.float32)           # many ties
    want = A.argmax(1) if shape[1] else np.full(shape[0], 1 << 62, np.int64)   # the identity
    check(pair, [A], [(shape[:1], np.int64)], [want], exact=True)


def _argmax(X):
    return kd.argmax(X, axis=1)


@pytest.mark.parametrize("shape", [(4, 64), (5, 70), (1, 1)])
def test_argmax_rows_traced(shape, rng):
    g = trace(_argmax, [TensorSpec(("n", "m"), "float64")])
    pair = lowered_pair(g, row_threads(32))
    assert ctrs(pair[0])[0].combiner.kind is n.CombinerKind.ARGMAX
    A = rng.standard_normal(shape)
    check(pair, [A], [(shape[:1], np.int64)], [A.argmax(1)], exact=True)


# ------------------------------------------------------------------ softmax, layernorm
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(X):
    mu = X.mean(axis=1, keepdims=True)
    d = X - mu
    return d / kd.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)


def np_softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def np_layernorm(x):
    d = x - x.mean(1, keepdims=True)
    return d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5)


def row_per_block_fused(T, local=True):
    """One row per block: every reduction attached at the block loop and reduced over T
    threads; the output's row over the same threads.  ``local``: each result kept by every
    thread (local scope, all threads store); else the default scopes and store predicate
    (shared memory, stored by thread 0 and read by every thread: the sync pass puts the
    barrier between)."""
    def sched(s):
        D = s.stages[-1]
        i0, i1 = D.axes
        D.bind(i0, "blockIdx.x")
        jo, ji = D.split(i1, factor=T)
        D.reorder(i0, ji, jo)
        D.bind(ji, "threadIdx.x")
        for R in reversed(s.stages[:-1]):     # readers first: each attaches inside its reader
            R.compute_at(D, i0)
            ko, ki = R.split(R.reduce_axes[0], factor=T)
            R.reorder(*R.axes, ki, ko)
            R.bind(ki, "threadIdx.x")
            if local:
                R.set_scope("local")
                R.set_store_predicate(lambda t: t >= 0, ki)
    return sched


@pytest.mark.parametrize("shape", [(4, 64), (3, 70), (2, 5), (1, 1), (0, 4)])
@pytest.mark.parametrize("T", [32, 64])
@pytest.mark.parametrize("fn", [softmax, layernorm], ids=lambda f: f.__name__)
def test_softmax_layernorm_row_per_block(fn, T, shape, rng):
    g = trace(fn, [TensorSpec(("n", "m"), "float32")])
    pair = lowered_pair(g, row_per_block_fused(T))
    assert len(ctrs(pair[0])) == 2
    X = rand(rng, shape, np.float32)
    want = (np_softmax if fn is softmax else np_layernorm)(X.astype(np.float64))
    check(pair, [X], [(shape, np.float32)], [want], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 64), (3, 70), (1, 1), (0, 4)])
@pytest.mark.parametrize("fn", [softmax, layernorm], ids=lambda f: f.__name__)
def test_softmax_layernorm_default_scopes(fn, shape, rng):
    g = trace(fn, [TensorSpec(("n", "m"), "float32")])
    pair = lowered_pair(g, row_per_block_fused(32, local=False))
    assert collect(pair[0].body, lambda x: isinstance(x, n.Barrier))
    X = rand(rng, shape, np.float32)
    want = (np_softmax if fn is softmax else np_layernorm)(X.astype(np.float64))
    check(pair, [X], [(shape, np.float32)], [want], rtol=1e-4, atol=1e-4)


def test_local_row_statistics_across_thread_loops_are_refused_for_cuda():
    """row_per_block_fused keeps each row statistic in a local buffer at the block loop: fine
    one iteration after another (every thread stores the same value), but on a GPU each thread
    has its own copy: the cuda lowering refuses it in the user's terms."""
    g = trace(softmax, [TensorSpec(("n", "m"), "float32")])
    s = Schedule(g)
    row_per_block_fused(32)(s)
    with pytest.raises(ScheduleError, match="is in local memory .one copy per thread.") as ei:
        gpu_lower(s)
    assert "shared memory" in ei.value.hint


# ------------------------------------------------------------------ schedules refused
def test_serial_spatial_loop_inside_the_reduction_is_refused():
    s = Schedule(rowsum_graph())
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=8)
    B.reorder(ki, ko)
    B.bind(ki, "threadIdx.x")
    with pytest.raises(ScheduleError, match="every spatial loop must be outside it or bound to threadIdx") as ei:
        B.reorder(ki, B.axes[0], ko)
    assert "i is inside" in str(ei.value) and ei.value.hint


def test_thread_loop_inside_a_serial_reduction_loop_is_refused():
    s = Schedule(rowsum_graph())
    B = s["B"]
    ko, k1 = B.split(B.reduce_axes[0], factor=16)
    k1, k2 = B.split(k1, factor=4)
    B.reorder(B.axes[0], k1, ko, k2)
    B.bind(k1, "threadIdx.x")
    with pytest.raises(ScheduleError, match="inside the serial reduction loop k.outer") as ei:
        B.bind(k2, "threadIdx.y")
    assert "k.inner.inner" in ei.value.hint
    lower(s)                  # the refused bind left the schedule as it was


# ------------------------------------------------------------------ hand IR
def _hand(cond_on_thread: bool):
    """out[tx] = sum over threadIdx.x of A[tx], the statement under ``tx < 3`` (a thread-
    dependent condition: illegal) or under a uniform one."""
    A = n.Buffer("A", dt.float64, (mk.as_expr(8),), param=True)
    O = n.Buffer("O", dt.float64, (mk.as_expr(1),), param=True)
    tx = n.var("tx")
    r = n.Buffer("r", dt.float64, (mk.as_expr(1),), scope=n.Scope.LOCAL)
    comb = __import__("handgraph").combiner("sum", dt.float64, n.BinOp.ADD, 0.0)
    zero = (mk.as_expr(0),)
    stmt = n.CrossThreadReduce(comb, (n.Load(dt.float64, A, (tx,)),), (n.ThreadTag.THREAD_X,), (r,))
    cond = mk.lt(tx, 3) if cond_on_thread else mk.lt(mk.as_expr(0), 3)
    body = n.Seq((n.IfThenElse(cond, stmt),
                  n.IfThenElse(mk.eq(tx, 0), n.Store(O, zero, n.Load(dt.float64, r, zero)))))
    loop = n.For(tx, mk.as_expr(0), mk.as_expr(8), n.ForKind.BOUND, n.Allocate(r, body), n.ThreadTag.THREAD_X)
    return n.LoweredFunc("hand", (A,), (O,), (), loop)


def test_statement_under_a_thread_condition_is_a_simt_error():
    f = _hand(True)
    a = np.arange(8.0)
    with pytest.raises(CrossThreadDivergence) as ei:
        run_simt(f, [a], [np.zeros(1)], [])
    assert isinstance(ei.value, SimtError)
    msg = str(ei.value)
    assert "reached by threads (0, 0, 0)" in msg and "(3, 0, 0)" in msg and "cross_thread_sum" in msg


def test_statement_under_a_uniform_condition_runs():
    f = _hand(False)
    a = np.arange(8.0)
    for run, g in ((run_simt, f), (run_simt, lower_cross_thread(f)), (run_lowered, lower_cross_thread(f))):
        out = np.zeros(1)
        run(g, [a], [out], [])
        assert out[0] == 28.0


def test_pass_is_a_no_op_without_the_statement():
    native, low = lowered_pair(rowsum_graph(), row_threads(32))
    assert lower_cross_thread(low) is low


def test_a_buffer_used_across_the_split_is_an_internal_error():
    f = _hand(False)
    loop = f.body
    r = loop.body.buffer
    t = n.Buffer("t", dt.float64, (mk.as_expr(1),), scope=n.Scope.LOCAL)
    zero = (mk.as_expr(0),)
    body = n.Seq((n.Store(t, zero, mk.as_expr(1.0, dt.float64)), loop.body.body,
                  n.Store(t, zero, n.Load(dt.float64, r, zero))))
    bad = dataclasses.replace(f, body=dataclasses.replace(loop, body=n.Allocate(r, n.Allocate(t, body))))
    with pytest.raises(InternalCompilerError, match="used on both sides"):
        lower_cross_thread(bad)


def test_a_cross_thread_reduction_in_a_serial_loop_closes_each_iteration_with_a_barrier(rng):
    """A serial loop between the thread loop and the statement is hoisted out of the thread
    loop; the shared buffer is reused by the next iteration, after a barrier."""
    A = n.Buffer("A", dt.float64, (mk.as_expr(3), mk.as_expr(8)), param=True)
    O = n.Buffer("O", dt.float64, (mk.as_expr(3),), param=True)
    tx, s = n.var("tx"), n.var("s")
    r = n.Buffer("r", dt.float64, (mk.as_expr(1),), scope=n.Scope.LOCAL)
    comb = __import__("handgraph").combiner("sum", dt.float64, n.BinOp.ADD, 0.0)
    zero = (mk.as_expr(0),)
    stmt = n.CrossThreadReduce(comb, (n.Load(dt.float64, A, (s, tx)),), (n.ThreadTag.THREAD_X,), (r,))
    body = n.For(s, mk.as_expr(0), mk.as_expr(3), n.ForKind.SERIAL, n.Allocate(r, n.Seq((
        stmt, n.IfThenElse(mk.eq(tx, 0), n.Store(O, (s,), n.Load(dt.float64, r, zero)))))))
    loop = n.For(tx, mk.as_expr(0), mk.as_expr(8), n.ForKind.BOUND, body, n.ThreadTag.THREAD_X)
    f = n.LoweredFunc("hand", (A,), (O,), (), loop)
    low = lower_cross_thread(f)
    assert isinstance(low.body, n.Allocate) and isinstance(low.body.body, n.For)
    assert low.body.body.kind is n.ForKind.SERIAL
    a = rng.standard_normal((3, 8))
    for run, g in ((run_simt, f), (run_simt, low), (run_lowered, low)):
        out = np.zeros(3)
        run(g, [a], [out], [])
        np.testing.assert_allclose(out, a.sum(1), rtol=1e-12)


# ------------------------------------------------------------------ through the kernel API
def _rowsum_te(A):
    n_, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n_,), lambda i: kd.sum(A[i, k], axis=k), name="B")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("sched", [cross_thread, row_threads(32, two=True)], ids=lambda f: f.__name__)
def test_sequential_backends_get_the_lowered_form(sched, backend, rng):
    k = kd.kernel(_rowsum_te)
    k.schedule(backend)(sched)
    a = rng.standard_normal((37, 45)).astype(np.float32)
    np.testing.assert_allclose(k(a, backend=backend), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    f = k.lower(a, backend=backend)
    assert not ctrs(f) and collect(f.body, lambda x: isinstance(x, n.Barrier))
