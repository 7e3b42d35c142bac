"""Explicit schedules (issue 8, item 13 and the schedule part of item 11): the random search's
reproducers, legality checked at the primitive call in the user's vocabulary, and regions that
stay tight whatever the split factors.  Executed by the loop-IR interpreter, which bounds-checks
every access, against numpy in float64."""
import re

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ScheduleError
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.passes.pipeline import lower
from kdsl.schedule import Schedule

RNG = np.random.default_rng(8)
IR_REPR = re.compile(r"\b(IterVar|Var|Const|Binary|TensorRead|Range|Compare|Load)\(")


def mm_k(A, B):
    """A matmul whose reduce axis is named k (the F13 reproducer's kernel)."""
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n, B.shape[1]), lambda i, j: kd.sum(A[i, k] * B[k, j], axis=k), name="C")


def unrolled_rfactor(s):
    """F13: an unrolled split, a tile, then rfactor: the final reduction reads the partials with
    a run-time stride (LLVM once spent minutes emulating gathers in each unrolled copy)."""
    C = s["C"]
    C.split(C.axis("j"), factor=7)
    C.unroll(C.axis("j.inner"))
    C.split(C.axis("j.outer"), factor=2)
    C.reorder(C.axis("j.outer.inner"), C.axis("i"), C.axis("j.outer.outer"))
    C.tile(C.axis("j.outer.inner"), C.axis("i"), 16, 2)
    s.rfactor(C, C.axis("k"))


def run(body, sched, *args, backend="interp"):
    k = kd.kernel(body)
    k.schedule(backend)(sched)
    return k(*args, backend=backend), k


def sched_of(body, *shapes):
    return Schedule(trace(body, [TensorSpec(sh, "float64") for sh in shapes]))


def assert_fair(err, line_text):
    """A user error: the user's line, no IR reprs, a hint."""
    text = str(err)
    assert line_text in text, text
    assert not IR_REPR.search(text), text
    assert err.hint, text


# ------------------------------------------------------------------ kernels
def rowsum_from_1(A):
    n, m = A.shape
    k = kd.reduce_axis((1, m), name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")


def chain(A):
    n, = A.shape
    S = kd.compute((n,), lambda i: A[i] * 2.0, name="S")
    return kd.compute((n,), lambda i: S[i] + 1.0, name="M")


def chain3(A):
    n, = A.shape
    T = kd.compute((n,), lambda i: A[i] * 2.0, name="T")
    U = kd.compute((n,), lambda i: T[i] + 1.0, name="U")
    return kd.compute((n,), lambda i: U[i] * 3.0 + T[i], name="V")


def chain3b(A):
    n, = A.shape
    T = kd.compute((n,), lambda i: A[i] * 2.0, name="T")
    U = kd.compute((n,), lambda i: T[i] + 1.0, name="U")
    return kd.compute((n,), lambda i: U[i] * 3.0, name="V")


def chain2d(A):
    n, m = A.shape
    T = kd.compute((n, m), lambda i, j: A[i, j] * 2.0, name="T")
    return kd.compute((n, m), lambda i, j: T[i, j] + 1.0, name="U")


def rowsum(A):
    return A.sum(axis=1)


def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ------------------------------------------------------------------ reproducers
@pytest.mark.parametrize("shape", [(3, 4), (5, 1), (4, 9), (0, 3)])
def test_cache_write_keeps_a_reduction_that_starts_at_1(shape):
    a = RNG.standard_normal(shape)
    out, k = run(rowsum_from_1, lambda s: s.cache_write(s["B"], "local"), a)
    np.testing.assert_allclose(out, a[:, 1:].sum(1), atol=1e-12)
    if shape[1] > 1:
        assert "A[i, k + 1]" in str(k.lower(a, backend="interp"))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 13])
def test_split_after_compute_at_keeps_the_attachment(n):
    def sched(s):
        S, M = s["S"], s["M"]
        S.compute_at(M, M.leaf_axes[0])
        o, i = M.split(M.leaf_axes[0], factor=4)
        assert S.attach_axis is i          # per iteration of the original axis: the inner loop
    a = RNG.standard_normal(n)
    out, k = run(chain, sched, a)
    np.testing.assert_allclose(out, a * 2 + 1)
    assert "allocate S: float64[1] local" in str(k.lower(a, backend="interp"))


def test_fuse_after_compute_at_keeps_the_attachment():
    def sched(s):
        T, U = s["T"], s["U"]
        T.compute_at(U, U.axes[1])
        U.fuse(U.axes[0], U.axes[1])
    a = RNG.standard_normal((5, 3))
    out, _ = run(chain2d, sched, a)
    np.testing.assert_allclose(out, a * 2 + 1)


def _consumer_in_split_loop(s):
    T, U = s["T"], s["U"]
    to, ti = T.split(T.axes[0], factor=3)
    U.compute_at(T, to)


@pytest.mark.parametrize("n", [0, 1, 5, 9, 10])
def test_consumer_in_a_split_loop_of_its_producer(n):
    """U (read by V at the root) computed inside T's split loop: U keeps a whole buffer."""
    a = RNG.standard_normal(n)
    out, k = run(chain3, _consumer_in_split_loop, a)
    np.testing.assert_allclose(out, (a * 2 + 1) * 3 + a * 2)
    text = str(k.lower(a, backend="interp"))
    assert "allocate U: float64[A_0] global" in text or "allocate U: float64[" in text


def _consumer_in_fused_split_loop(s):
    T, U = s["T"], s["U"]
    fo, fi = T.split(T.fuse(T.axes[0], T.axes[1]), factor=7)
    T.parallel(fo)
    U.compute_at(T, fo)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (4, 7), (6, 13)])
def test_consumer_in_a_fused_then_split_loop(shape):
    """The hull of a fused run covers parts of rows: only what this iteration wrote is computed."""
    a = RNG.standard_normal(shape)
    out, k = run(chain2d, _consumer_in_fused_split_loop, a)
    np.testing.assert_allclose(out, a * 2 + 1)
    if min(shape) > 1:
        text = str(k.lower(a, backend="interp"))
        assert "== i.j.fused.outer" in text           # the written-here guard
        assert "for i in range(min(8, A_0))" in text  # a few rows per run of 7, not all of them


def _producer_at_fused_split(s):
    T, U = s["T"], s["U"]
    fo, fi = U.split(U.fuse(U.axes[0], U.axes[1]), factor=4)
    T.compute_at(U, fo)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (6, 4)])
def test_producer_attached_through_a_fused_then_split_axis(shape):
    """Once rejected ("cannot bound the region"): a legal attach."""
    a = RNG.standard_normal(shape)
    out, k = run(chain2d, _producer_at_fused_split, a)
    np.testing.assert_allclose(out, a * 2 + 1)
    if min(shape) > 1:     # rows that a run of 4 fused elements touches: at most 4 // A_1 + 2 <= 5
        assert "allocate T: float64[5, A_1] local" in str(k.lower(a, backend="interp"))


def _rfactor_non_dividing(s):
    B = s.outputs[0]
    ko, _ = B.split(B.reduce_axes[0], nparts=8)
    BF = s.rfactor(B, ko)
    BF.compute_at(B, B.axes[0])
    a, b = B.split(B.reduce_axes[0], factor=16)
    c, d = B.split(b, factor=7)
    B.split(d, factor=64)
    BF.unroll(BF.axes[0])


@pytest.mark.parametrize("shape", [(3, 50), (2, 5), (4, 0)])
def test_rfactor_region_does_not_grow_with_split_factors(shape):
    a = RNG.standard_normal(shape)
    out, k = run(rowsum, _rfactor_non_dividing, a)
    np.testing.assert_allclose(out, a.sum(1), atol=1e-12)
    text = str(k.lower(a, backend="interp"))
    assert "allocate sum.rf: float64[8, 1] local" in text, text
    assert "range(16)" not in text and "range(64)" not in text     # loops no longer than the axis


def test_split_larger_than_a_constant_extent():
    s = sched_of(rowsum, (5, 6))
    B = s.outputs[0]
    o, i = B.split(B.reduce_axes[0], factor=64)
    assert "range(6)" in str(lower(s)) and "range(64)" not in str(lower(s))


# ------------------------------------------------------------------ legality at the call
def test_reader_outside_the_attach_loop_fails_at_compute_at():
    s = sched_of(chain3, (10,))
    V = s["V"]
    vo, vi = V.split(V.axes[0], factor=4)
    s["T"].compute_at(s["U"], s["U"].axes[0])       # T is also read by V, at the root
    with pytest.raises(ScheduleError) as ei:        # checked when the schedule is finished
        s.finish()
    assert "its reader V runs at the root, outside that loop" in str(ei.value)
    assert_fair(ei.value, 's["T"].compute_at(s["U"], s["U"].axes[0])')
    with pytest.raises(ScheduleError, match="its reader V runs at the root") as ei:
        lower(s)                                    # and at lowering, at the same line
    assert_fair(ei.value, 's["T"].compute_at(s["U"], s["U"].axes[0])')
    s["T"].compute_root()                           # a later primitive resolves it
    lower(s)


def test_reorder_that_breaks_an_attachment_names_both_calls():
    s = sched_of(chain3, (10,))
    T, U, V = s["T"], s["U"], s["V"]
    vo, vi = V.split(V.axes[0], factor=4)
    U.compute_at(V, vi)
    T.compute_at(V, vo)                 # read by U (inside vi) and V: legal
    V.reorder(vi, vo)                   # now U runs outside vo
    with pytest.raises(ScheduleError) as ei:
        s.finish()
    msg = str(ei.value)
    assert msg.startswith("reorder: stage T is computed inside loop i.outer of V"), msg
    assert "compute_at at test_schedule_legality.py:" in msg and "U runs inside loop i.inner" in msg
    assert_fair(ei.value, "V.reorder(vi, vo)")
    V.reorder(vo, vi)                   # undone: legal again
    lower(s)


@pytest.mark.parametrize("case", ["consumer_in_reduction", "not_at_own_axes", "cycle", "inline_target",
                                  "rfactor_attached", "inline_attached", "partial_producer"])
def test_illegal_primitives_raise_at_the_call(case):
    """Argument errors raise at the call; placement conflicts when the schedule is finished
    (a later primitive may resolve them, as in TVM), at the line of the call."""
    if case == "consumer_in_reduction":
        s = sched_of(softmax, (4, 5))
        s["divide"].compute_at(s["sum"], s["sum"].leaf_axes[2])
        with pytest.raises(ScheduleError, match="reduction loop r0") as ei:
            s.finish()
        line = 's["divide"].compute_at(s["sum"], s["sum"].leaf_axes[2])'
    elif case == "not_at_own_axes":
        s = sched_of(lambda A: kd.compute((A.shape[0] - 1,), lambda i: A[i] * 2.0 + A[i + 1], name="V"), (6,))
        s.cache_read("A", "local", [s["V"]])
        s["V"].compute_at(s["A.local"], s["A.local"].axes[0])
        with pytest.raises(ScheduleError, match="must read A.local at its own axes") as ei:
            s.finish()
        line = 's["V"].compute_at(s["A.local"], s["A.local"].axes[0])'
    elif case == "cycle":
        s = sched_of(chain3, (6,))
        s["U"].compute_at(s["T"], s["T"].axes[0])
        s["T"].compute_at(s["U"], s["U"].axes[0])
        with pytest.raises(ScheduleError, match="cycle: T inside U inside T") as ei:
            s.finish()
        line = 's["T"].compute_at(s["U"], s["U"].axes[0])'
    elif case == "inline_target":
        s = sched_of(chain3, (6,))
        s["U"].compute_inline()
        with pytest.raises(ScheduleError, match="U is inlined") as ei:
            s["T"].compute_at(s["U"], s["U"].axes[0])
        line = 's["T"].compute_at(s["U"], s["U"].axes[0])'
    elif case == "rfactor_attached":
        s = sched_of(lambda A: A.sum(axis=1), (4, 9))
        B = s.outputs[0]
        AL = s.cache_read("A", "local", [B])
        ko, ki = B.split(B.reduce_axes[0], factor=4)
        AL.compute_at(B, ko)
        with pytest.raises(ScheduleError, match="attached to the reduction loop r0.outer of sum") as ei:
            s.rfactor(B, ki)
        line = "s.rfactor(B, ki)"
    elif case == "inline_attached":
        s = sched_of(chain3b, (6,))
        s["T"].compute_at(s["U"], s["U"].axes[0])
        with pytest.raises(ScheduleError, match="T is attached to loop i of U") as ei:
            s["U"].compute_inline()
        line = 's["U"].compute_inline()'
    else:   # a consumer computed inside a stage that computes only what its own reader needs
        s = sched_of(chain3, (6,))
        V = s["V"]
        s["U"].compute_at(s["T"], s["T"].axes[0])
        s["T"].compute_at(V, V.axes[0])
        with pytest.raises(ScheduleError, match="which compute only the part of T that V reads") as ei:
            s.finish()
        line = 's["T"].compute_at(V, V.axes[0])'
    assert_fair(ei.value, line)
    if case in ("inline_target", "rfactor_attached", "inline_attached"):
        lower(s)    # refused at the call (no later primitive fixes it): the schedule is unchanged
    else:           # placements: checked on the finished schedule, reported at the call's line
        with pytest.raises(ScheduleError):
            lower(s)


def test_cross_thread_rules_at_bind_and_reorder():
    s = sched_of(rowsum, ("n", "m"))
    B = s.outputs[0]
    with pytest.raises(ScheduleError, match="no constant extent") as ei:
        B.bind(B.reduce_axes[0], "threadIdx.x")
    assert_fair(ei.value, 'B.bind(B.reduce_axes[0], "threadIdx.x")')
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    with pytest.raises(ScheduleError, match="must be the outermost reduction loop"):
        B.bind(ki, "threadIdx.x")
    B.reorder(ki, ko)
    B.bind(ki, "threadIdx.x")
    with pytest.raises(ScheduleError, match="every spatial loop must be outside it") as ei:
        B.reorder(ki, B.axes[0])
    assert "bound to threadIdx.x at test_schedule_legality.py:" in str(ei.value)   # the bind's line
    a = RNG.standard_normal((4, 64))
    from kdsl.backends.interpreter import run_lowered
    out = np.zeros(4)
    run_lowered(lower(s), [a], [out], [])
    np.testing.assert_allclose(out, a.sum(1))


def test_spatial_thread_axis_inside_the_reduction_is_a_plain_loop():
    """The column-sum schedule: rows reduced outside a thread-bound column loop."""
    def sched(s):
        B = s.outputs[0]
        jo, ji = B.split(B.axes[0], factor=4)
        B.bind(jo, "blockIdx.x")
        B.reorder(jo, B.reduce_axes[0], ji)
        B.bind(ji, "threadIdx.x")
    a = RNG.standard_normal((6, 10))
    out, _ = run(lambda A: A.sum(axis=0), sched, a)
    np.testing.assert_allclose(out, a.sum(0))


def test_empty_cross_thread_reduction_stores_the_identity():
    def sched(s):
        B = s["B"]
        B.bind(B.reduce_axes[0], "threadIdx.x")
    a = RNG.standard_normal((5, 1))
    from kdsl.backends.interpreter import run_lowered
    s = sched_of(rowsum_from_1, (5, 1))
    sched(s)
    out = np.full(5, 7.0)
    run_lowered(lower(s), [a], [out], [])
    np.testing.assert_array_equal(out, np.zeros(5))


# ------------------------------------------------------------------ softmax-style consumers
def _softmax_rows(s):
    """divide computed row by row right after its row's sum (a broadcast read sum[i, 0])."""
    mx, sm, dv = s["max"], s["sum"], s["divide"]
    sm.compute_at(mx, mx.axes[0])
    dv.compute_at(sm, sm.axes[0])


@pytest.mark.parametrize("shape", [(1, 1), (3, 4), (5, 7)])
def test_softmax_consumers_attached_row_by_row(shape):
    x = RNG.standard_normal(shape)
    out, k = run(softmax, _softmax_rows, x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True))
    if shape[0] > 1:
        text = str(k.lower(x, backend="interp"))
        assert text.count("for i0 in range") == 1, text     # one row loop for all three stages


# ------------------------------------------------------------------ item 11: pack, store predicates
def matmul(A, B):
    return A @ B


def test_pack_by_name_with_default_readers():
    a, b = RNG.standard_normal((5, 6)), RNG.standard_normal((6, 7))
    out, _ = run(matmul, lambda s: s.pack("B", axis=1, factor=4), a, b)
    np.testing.assert_allclose(out, a @ b)


@pytest.mark.parametrize("call, text", [
    ('s.pack("B")', "give the panel width"),
    ('s.pack("B", [s.outputs[0]], 1)', "give the panel width"),
    ('s.pack("Q", factor=4)', "there is no stage 'Q'"),
    ('s.pack("B", 5, factor=4)', "readers must be stages"),
    ('s.pack("B", factor=4, axis=2)', "has 2 axes"),
    ('s.pack("B", factor=4, colour=1)', "unexpected keyword argument 'colour'"),
])
def test_pack_mistakes_are_schedule_errors(call, text):
    s = sched_of(matmul, (5, 6), (6, 7))
    with pytest.raises(ScheduleError) as ei:
        eval(call)
    assert text in str(ei.value), str(ei.value)
    assert ei.value.loc is not None and ei.value.loc.file == "<string>"   # the line of the call (eval's)
    assert not IR_REPR.search(str(ei.value))


def test_store_predicate_on_an_axis_comparison():
    def sched(s):
        C = s.outputs[0]
        C.set_store_predicate(C.axes[0] < 3)
    a = RNG.standard_normal((6, 4))
    k = kd.kernel(lambda A: A * 2.0)
    k.schedule("interp")(sched)
    out = np.full((6, 4), -1.0)
    k(a, backend="interp", out=out)
    np.testing.assert_allclose(out[:3], a[:3] * 2)
    np.testing.assert_array_equal(out[3:], -1.0)


def test_store_predicate_forms():
    s = sched_of(lambda A: A * 2.0, (6, 4))
    C = s.outputs[0]
    C.set_store_predicate(lambda i, j: i < j)        # no axes: the stage's own
    with pytest.raises(ScheduleError, match="compares the objects") as ei:
        C.set_store_predicate(C.axes[0] == 0)
    assert_fair(ei.value, "C.set_store_predicate(C.axes[0] == 0)")
    with pytest.raises(ScheduleError, match="does not take 2") as ei:
        C.set_store_predicate(lambda i: i < 3)
    assert_fair(ei.value, "C.set_store_predicate(lambda i: i < 3)")
    io, ii = C.split(C.axes[0], factor=4)             # a predicate on a split axis still lowers
    assert "if" in str(lower(s))


@pytest.mark.parametrize("form", ["arith", "and_or_not", "two_axes", "reflected"])
def test_store_predicate_with_axis_arithmetic(form, backend="interp"):
    # axis arithmetic used to raise a raw TypeError in the user's schedule (tests/cpu runs it on cpu)
    conds = {
        "arith": (lambda i, j: i * 2 + j // 2 - 1 < 5, lambda C: C.axes[0] * 2 + C.axes[1] // 2 - 1 < 5),
        "and_or_not": (lambda i, j: ((i % 3 == 1) | (j >= 2)) & ~(i == j),
                       lambda C: ((C.axes[0] % 3 == 1) | (C.axes[1] >= 2)) & ~(C.axes[0] - C.axes[1] == 0)),
        "two_axes": (lambda i, j: i < j, lambda C: C.axes[0] < C.axes[1]),
        "reflected": (lambda i, j: 7 - i > 2 * j, lambda C: 7 - C.axes[0] > 2 * C.axes[1]),
    }
    want_mask, pred = conds[form]

    def sched(s):
        C = s.outputs[0]
        C.set_store_predicate(pred(C))
    a = RNG.standard_normal((7, 5))
    k = kd.kernel(lambda A: A * 2.0)
    k.schedule(backend)(sched)
    out = np.full((7, 5), -1.0)
    k(a, backend=backend, out=out)
    mask = want_mask(*np.indices((7, 5)))
    assert 0 < mask.sum() < mask.size
    np.testing.assert_allclose(out[mask], a[mask] * 2)
    np.testing.assert_array_equal(out[~mask], -1.0)


@pytest.mark.parametrize("call, text", [
    ("C.set_store_predicate(C.axes[0] / 2 < 1)", "true division"),
    ("C.set_store_predicate(C.axes[0] < 2.5)", "axes are integers"),
    ("C.set_store_predicate(0 < C.axes[0] < 2)", "no Python truth value"),
    ("C.set_store_predicate((C.axes[0] < 2) | (C.axes[1] != 0))", "compare the objects"),
    ("C.set_store_predicate(C.axes[0] + 1)", "integer axis expression"),
    ("C.set_store_predicate((C.axes[0] < 2) + 1)", "not a condition"),
])
def test_store_predicate_axis_arithmetic_mistakes(call, text):
    s = sched_of(lambda A: A * 2.0, (6, 4))
    C = s.outputs[0]
    with pytest.raises(ScheduleError, match=text) as ei:
        eval(call)
    assert ei.value.hint
    assert ei.value.loc is not None and ei.value.loc.file == "<string>"


def test_primitive_with_wrong_arguments():
    s = sched_of(rowsum, (4, 5))
    B = s.outputs[0]
    with pytest.raises(ScheduleError) as ei:
        B.split()
    assert "split: missing a required argument: 'axis'" in str(ei.value)
    assert "split(axis, factor" in ei.value.hint
    assert_fair(ei.value, "B.split()")
    with pytest.raises(ScheduleError, match="cache_read: .*'scope'"):
        s.cache_read("A")


def test_messages_through_a_kernel_point_at_the_schedule_line():
    def sched(s):
        T, U = s["T"], s["U"]
        to, ti = U.split(U.axes[0], factor=2)
        T.compute_at(U, to)
        U.reorder(ti, to)       # fine: T is read by U only, inside both loops
        s["T"].compute_inline()
        s["U"].bind(ti, "threadIdx.w")  # the bad line
    k = kd.kernel(chain2d)
    k.schedule("interp")(sched)
    with pytest.raises(ScheduleError) as ei:
        k(np.ones((3, 3)), backend="interp")
    assert_fair(ei.value, 's["U"].bind(ti, "threadIdx.w")  # the bad line')


def test_new_stages_get_unique_names():
    # F17: cache_write twice made two stages called B.local; s[name] must name one stage
    def sched(s):
        B = s["B"]
        w1, w2 = s.cache_write(B, "local"), s.cache_write(B, "local")
        r1, r2 = s.cache_read("A", "local", [w1]), s.cache_read("A.local", "local", [w1])
        names = [h.name for h in s.stages]
        assert len(names) == len(set(names)), names
        assert (w1.name, w2.name, r1.name, r2.name) == ("B.local", "B.local_1", "A.local", "A.local.local")
        for h in (w1, w2, r1, r2, B):
            assert s[h.name] is h
    a = RNG.standard_normal((4, 5))
    out, _ = run(rowsum_from_1, sched, a)
    np.testing.assert_allclose(out, a[:, 1:].sum(1))


def test_rfactor_twice_names_and_result():
    def sched(s):
        B = s["B"]
        ko, ki = B.split(B.axis("k"), factor=2)
        rf1 = s.rfactor(B, ki)
        rf2 = s.rfactor(B, B.axis("k.inner.v"))
        assert (rf1.name, rf2.name) == ("B.rf", "B.rf_1") and s["B.rf_1"] is rf2
    a = RNG.standard_normal((3, 7))
    out, _ = run(rowsum_from_1, sched, a)
    np.testing.assert_allclose(out, a[:, 1:].sum(1))
