"""kd.fori_loop (issue 25 item 4): JAX's loop over a run-time count carrying arrays,
against plain Python loops in float64 on every host backend and the SIMT interpreter."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KernelError, ShapeError

BACKENDS = ["numpy", "interp", "cpu", "interp-cuda"]


@kd.kernel
def damp(x, n):
    return kd.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)


def damp_ref(x, n):
    c = x.copy()
    for _ in range(n):
        c = c * 0.5 + x
    return c


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("steps", [0, 1, 4, -3])
def test_steps_and_zero_or_negative_counts(backend, steps, rng):
    x = rng.random(5)
    np.testing.assert_allclose(damp(x, steps, backend=backend), damp_ref(x, steps), rtol=1e-13)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_sizes_zero_one_and_strided_views(backend, rng):
    for x in (rng.random(0), rng.random(1), rng.random((9, 6))[::2, ::3]):
        np.testing.assert_allclose(damp(x, 3, backend=backend), damp_ref(x, 3), rtol=1e-13)


@kd.kernel
def stats(x, lo, hi):
    # a tuple carry of a 0-d sum and a running vector, the index used as a value and an index
    def body(i, c):
        s, v = c
        return s + x[i] * i, v * 0.5 + x[i]
    return kd.fori_loop(lo, hi, body, (np.float64(0.0), kd.zeros(x.shape, np.float64)))


def test_namedtuple_and_list_carries(rng):
    from collections import namedtuple
    State = namedtuple("State", "x v")

    @kd.kernel
    def k(x, n):
        s = kd.fori_loop(0, n, lambda i, s: State(s.x + s.v, s.v * 2.0), State(x, x))
        t = kd.fori_loop(0, n, lambda i, c: [c[0] + 1.0], [x])
        return s.x, t[0]
    x = rng.random(3)
    a, b = k(x, 3, backend="numpy")
    np.testing.assert_allclose(a, x * 8.0, rtol=1e-13)      # x + x + 2x + 4x
    np.testing.assert_allclose(b, x + 3.0, rtol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_carry_with_a_scalar(backend, rng):
    x = rng.random(6)
    s, v = stats(x, 1, 5, backend=backend)
    rs, rv = 0.0, np.zeros(6)
    for i in range(1, 5):
        rs, rv = rs + x[i] * i, rv * 0.5 + x[i]
    assert s.shape == ()
    np.testing.assert_allclose(s, rs, rtol=1e-13)
    np.testing.assert_allclose(v, rv, rtol=1e-13)


@kd.kernel
def tri_loops(A):
    # nested loops, the inner count depends on the outer index (not unrolled)
    n = A.shape[0]

    def outer(i, acc):
        return kd.fori_loop(0, i + 1, lambda j, a: a + A[i, j], acc)
    return kd.fori_loop(0, n, outer, np.float64(0.0))


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu"])
def test_nested_triangular_loops(backend, rng):
    for n in (0, 1, 5):
        A = rng.random((n, n))
        np.testing.assert_allclose(tri_loops(A, backend=backend), np.tril(A).sum(), rtol=1e-13)


@kd.kernel
def power_iter(M, v, steps):
    # a body with a reduction (matrix-vector) and a normalisation: two stages per step
    def body(i, x):
        y = M @ x
        return y / np.sqrt((y * y).sum())
    return kd.fori_loop(0, steps, body, v)


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu"])     # SIMT: slow reductions
def test_body_with_reductions(backend, rng):
    M, v = rng.random((4, 4)), rng.random(4)
    x = v.copy()
    for _ in range(3):
        y = M @ x
        x = y / np.sqrt((y * y).sum())
    np.testing.assert_allclose(power_iter(M, v, 3, backend=backend), x, rtol=1e-12)


def test_inputs_are_not_written_and_out_works(rng):
    x = rng.random(4)
    keep = x.copy()
    out = np.empty(4)
    r = damp(x, 2, out=out, backend="cpu")
    assert r is out
    np.testing.assert_allclose(out, damp_ref(keep, 2), rtol=1e-13)
    np.testing.assert_array_equal(x, keep)
    for steps in (0, 3):                 # a strided out=: the last carry is copied into it
        base = np.zeros((4, 2))
        r = damp(x, steps, out=base[:, 1], backend="cpu")
        np.testing.assert_allclose(base[:, 1], damp_ref(keep, steps), rtol=1e-13)
        np.testing.assert_array_equal(base[:, 0], 0.0)


def test_hints_reach_the_body_stages(rng):
    @kd.schedule("cpu", stage="upd", parallel="j", vectorize=4)
    @kd.kernel
    def k(x, n):
        def body(i, c):
            return kd.compute(c.shape, lambda j: c[j] * 0.5 + x[j], name="upd")
        return kd.fori_loop(0, n, body, x)
    x = rng.random(37)
    np.testing.assert_allclose(k(x, 3, backend="cpu"), damp_ref(x, 3), rtol=1e-13)

    seen = []

    def explicit(s):                    # called once per part: here only the body has "upd"
        for h in s.stages:
            seen.append(h.name)
            if h.name == "upd":
                h.parallel(h.stage.axes[0])
    k2 = kd.schedule("cpu", explicit)(k)
    np.testing.assert_allclose(k2(x, 2, backend="cpu"), damp_ref(x, 2), rtol=1e-13)
    assert "upd" in seen

    bad = kd.schedule("cpu", stage="nope", parallel="j")(k)
    with pytest.raises(kd.ScheduleError, match="nope"):
        bad(x, 3, backend="cpu")


def test_loop_invariant_stages_run_once():
    from kdsl.frontend.fori import LoopStage
    from kdsl.frontend.spec import ScalarSpec, TensorSpec
    from kdsl.frontend.trace import trace

    def f(x, n):
        return kd.fori_loop(0, n, lambda i, c: c + x.sum(), x)
    g = trace(f, [TensorSpec((None,), kd.float64), ScalarSpec(kd.int64)])
    loop = next(s for s in g.stages if isinstance(s, LoopStage)).loop
    assert any(s.origin == "sum" for s in g.stages)              # hoisted before the loop
    assert not any(s.origin == "sum" for s in loop.body_stages)


# ----------------------------------------------------------------- errors
def _x():
    return np.zeros(3)


@pytest.mark.parametrize("body,err,match", [
    (lambda i, c: c.astype(np.float32), KernelError, "from float64 to float32"),
    (lambda i, c: c[1:], ShapeError, "size in dim 0 from x.shape.0. .x_0. to"),
    (lambda i, c: c[:, None], ShapeError, "from 1-d to 2-d"),
    (lambda i, c: (c, c), KernelError, "must return the carry"),
])
def test_carry_changes_are_errors_at_the_users_line(body, err, match):
    @kd.kernel
    def k(x, n):
        return kd.fori_loop(0, n, body, x)
    with pytest.raises(err, match=match) as e:
        k(_x(), 2, backend="numpy")
    assert e.value.loc is not None and e.value.hint


@pytest.mark.parametrize("bound,match", [
    (lambda x: x, "must be a scalar integer"),
    (lambda x: x.sum(), "must be a scalar integer"),
    (lambda x: x.astype(np.int64).sum(), "computed from array values"),
    (lambda x: 2.0, "must be an integer"),
])
def test_bad_bounds(bound, match):
    @kd.kernel
    def k(x):
        return kd.fori_loop(0, bound(x), lambda i, c: c + 1.0, x)
    with pytest.raises(KernelError, match=match) as e:
        k(_x(), backend="numpy")
    assert e.value.hint


def test_index_out_of_range_in_the_body_is_a_call_time_error():
    @kd.kernel
    def k(x, n):
        return kd.fori_loop(0, n, lambda i, c: c + x[i], np.float64(0.0))
    assert k(np.ones(3), 3, backend="numpy") == 3.0
    with pytest.raises(kd.KernelIndexError):
        k(np.ones(3), 4, backend="numpy")


def test_lower_and_source_show_the_loop_and_the_body(rng):
    # cpu: one kernel runs every step (kdsl.passes.fori_loop); numpy: a host loop
    text = str(damp.lower(rng.random(4), 3, backend="cpu"))
    assert "# for i in range(0, n): inside one kernel" in text and "damp_body" in text
    assert "for i in range(i_lo, i_hi):  # kd.fori_loop steps" in text
    assert "carry_1[" in text and "* 0.5" in text.replace("*0.5", "* 0.5")
    assert "host loop" not in text
    src = damp.source(rng.random(4), 3, backend="cpu")
    assert "damp_body.step" in src          # the LLVM IR of the outlined step function
    src = damp.source(rng.random(4), 3, backend="numpy")
    assert "for i in range(0, n):  # host loop" in src and "damp_body" in src


@kd.kernel
def gathers(x, idx, n):
    y = kd.compute(idx.shape, lambda k: x[idx[k]] * 2.0)          # before the loop
    return kd.fori_loop(0, n, lambda i, c: c + x[idx[n - 1 - i]], y)   # inside: per step


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_indices_read_from_arrays_are_checked_before_and_inside_the_loop(backend, rng):
    x, idx = rng.random(5), np.array([4, 0, 2])
    want = x[idx] * 2.0 + sum(x[idx[1 - i]] for i in range(2))
    np.testing.assert_allclose(gathers(x, idx, 2, backend=backend), want, rtol=1e-13)
    with pytest.raises(kd.KernelIndexError, match="x at indices"):
        gathers(x, np.array([4, 0, 7]), 1, backend=backend)      # y's gather
    with pytest.raises(kd.KernelIndexError):
        gathers(x, idx, 4, backend=backend)                      # idx[-1]: i runs past


def test_a_loop_per_element_inside_compute_is_refused():
    @kd.kernel
    def k(x, n):
        return kd.compute(x.shape, lambda j: kd.fori_loop(0, n, lambda i, c: c + 1.0, x[j]))
    with pytest.raises(KernelError, match="inside a kd.compute lambda") as e:
        k(_x(), 2, backend="numpy")
    assert "kd.scan" in e.value.hint


@kd.kernel
def chained(x, n):
    y = x * 2.0
    r = kd.fori_loop(0, n, lambda i, c: c + y, y)            # a result, the next loop's init
    r2 = kd.fori_loop(1, n, lambda i, c: c * 0.5 + r, r)     # and read inside it
    return r, r2.sum(), y


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_chained_loops_and_results_used_after(backend, rng):
    x = rng.random(4)
    for steps in (0, 1, 3):
        a, s, y = chained(x, steps, backend=backend)
        r = 2 * x + steps * 2 * x
        r2 = r.copy()
        for _ in range(1, steps):
            r2 = r2 * 0.5 + r
        np.testing.assert_allclose(a, r, rtol=1e-13)
        np.testing.assert_allclose(s, r2.sum(), rtol=1e-13)
        np.testing.assert_allclose(y, 2 * x, rtol=1e-13)
