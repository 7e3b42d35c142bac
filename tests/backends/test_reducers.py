"""kd.reducer: semantics come from the combine function and the identity, never from the name.

Every backend (numpy reference, loop-IR interpreter, cpu with default and
hinted schedules) computes ``identity (+) x0 (+) x1 ...``; kd.reducer checks
its arguments where it is called, and the combine function (commutative) and
identity (absorbs itself) when it is traced.
"""
import numpy as np
import pytest

import kdsl as kd

BACKENDS = ["numpy", "interp"] + (["cpu"] if "cpu" in kd.backends() else [])


def _all(k, *args):
    return {b: k(*args, backend=b) for b in BACKENDS}


def _check(k, *args, want, rtol=0.0):
    for b, got in _all(k, *args).items():
        got = np.asarray(got)
        assert got.dtype == np.asarray(want).dtype, b
        np.testing.assert_allclose(got, want, rtol=rtol, err_msg=b)


# ------------------------------------------------------------------ names are labels only
def test_a_product_named_sum_multiplies():
    r = kd.reducer(lambda x, y: x * y, identity=1, name="sum")

    @kd.kernel
    def f(x):
        return r(x, axis=0)
    x = np.array([3.0, 3.0, 2.0, 0.5])
    _check(f, x, want=np.prod(x))


def test_a_sum_named_max_adds():
    r = kd.reducer(lambda x, y: x + y, identity=0, name="max")

    @kd.kernel
    def f(A):
        return r(A, axis=1), r(A)
    a = np.random.default_rng(3).integers(-50, 50, (5, 7))
    for b, (rows, total) in _all(f, a).items():
        np.testing.assert_array_equal(rows, a.sum(axis=1), err_msg=b)
        assert total == a.sum(), b


# ------------------------------------------------------------------ the identity counts, once
def _clamped_max():
    return kd.reducer(lambda x, y: kd.maximum(x, y), identity=0.0, name="max")


@pytest.mark.parametrize("n", [0, 1, 2, 3, 100, 4099])
def test_identity_is_combined_in_for_every_extent(n):
    """A max that starts at 0 (the identity absorbs itself, so every backend's number of
    partial results is irrelevant): extent 1 included, where numpy used to skip it."""
    r = _clamped_max()

    @kd.kernel
    def f(x):
        return r(x, axis=0)
    x = -1.0 - np.random.default_rng(n).random(n)          # all negative
    _check(f, x, want=np.float64(0.0))
    if n:
        x[n // 2] = 7.5
        _check(f, x, want=np.float64(7.5))


def test_identity_zero_for_a_product_is_honoured():
    r = kd.reducer(lambda x, y: x * y, identity=0)

    @kd.kernel
    def f(A):
        return r(A, axis=1)
    a = np.random.default_rng(1).random((4, 1)) + 1.0
    _check(f, a, want=np.zeros(4))


@pytest.mark.parametrize("shape,axis", [((6, 1), 1), ((1, 5), 0), ((1, 1), None), ((3, 0), 1),
                                        ((40, 37), 0)])
def test_extent_one_and_empty_reductions_agree(shape, axis):
    r = kd.reducer(lambda x, y: kd.maximum(x, y), identity=-1.0)

    @kd.kernel
    def f(A):
        return r(A, axis=axis)
    a = -3.0 * np.random.default_rng(2).random(shape)
    want = np.maximum(np.max(a, axis=axis, initial=-np.inf), -1.0)
    _check(f, a, want=want)


def test_index_style_custom_reducer_with_extent_one_axis():
    r = kd.reducer(lambda x, y: kd.maximum(x, y), identity=0)

    @kd.kernel
    def f(A):
        n, m = A.shape
        k = kd.reduce_axis(m)
        return kd.compute((n,), lambda i: r(A[i, k], axis=k))
    a = -np.arange(1, 5).reshape(4, 1)
    _check(f, a, want=np.zeros(4, np.int64))


@pytest.mark.skipif("cpu" not in kd.backends(), reason="needs the cpu backend")
@pytest.mark.parametrize("hints,axis", [({}, None), (dict(rfactor=8), None),
                                        (dict(parallel=True), 1), (dict(vectorize=8), 0),
                                        (dict(rfactor=4, parallel=True), 0)])
def test_cpu_schedules_with_partial_results_agree(hints, axis):
    """Threads, vector lanes and rfactor slices each start from the identity."""
    r = _clamped_max()
    s = kd.reducer(lambda x, y: x + y, identity=0.0, name="prod")

    def body(A):
        return r(A, axis=axis), s(A, axis=axis)
    k = kd.kernel(kd.schedule("cpu", **hints)(body))
    a = -1.0 - np.random.default_rng(4).random((301, 1003))
    got = k(a, backend="cpu")
    assert np.all(got[0] == 0.0)
    np.testing.assert_allclose(got[1], a.sum(axis=axis), rtol=1e-12)


# ------------------------------------------------------------------ identity given as a function
def test_identity_as_a_function_of_the_dtype():
    r = kd.reducer(lambda x, y: kd.maximum(x, y),
                   identity=lambda d: np.iinfo(d.np).min if d.is_int else -np.inf)

    @kd.kernel
    def f(A, B):
        return r(A, axis=0), r(B, axis=0)
    a = np.array([-5, -7, -9], np.int32)
    b = np.array([-np.inf, -3.5], np.float32)
    for bk, (ra, rb) in _all(f, a, b).items():
        assert ra.dtype == np.int32 and ra == -5, bk
        assert rb.dtype == np.float32 and rb == -3.5, bk


# ------------------------------------------------------------------ errors at kd.reducer(...)
@pytest.mark.parametrize("args,match", [
    ((5, 0), "combine must be a function of two values"),
    ((lambda x: x, 0), r"combine takes 1 parameter\(s\) \(x\)"),
    ((lambda x, y, z: x, 0), r"combine takes 3 parameter"),
    ((np.exp, 0), "combine takes 1 input"),
    ((lambda x, y: x + y, "zero"), "identity must be a number or a function of the dtype"),
    ((lambda x, y: x + y, None), "identity must be a number"),
    ((lambda x, y: x + y, lambda: 0), "identity is a function taking no positional"),
])
def test_reducer_arguments_are_checked_at_the_call(args, match):
    with pytest.raises(kd.KernelError, match=match) as ei:
        kd.reducer(*args)
    assert __file__ in str(ei.value), "the error names the line of kd.reducer"
    assert "hint:" in str(ei.value)


def test_reducer_name_must_be_a_string():
    with pytest.raises(kd.KernelError, match="name must be a string"):
        kd.reducer(lambda x, y: x + y, 0, name=3)


def test_ufuncs_and_kdsl_functions_are_combine_functions():
    r1 = kd.reducer(np.maximum, -np.inf)
    r2 = kd.reducer(kd.minimum, np.inf)

    @kd.kernel
    def f(x):
        return r1(x), r2(x)
    x = np.array([1.0, -2.0, 5.0])
    for b, (hi, lo) in _all(f, x).items():
        assert (hi, lo) == (5.0, -2.0), b


# ------------------------------------------------------------------ errors when traced
def _trace_error(r, x=None):
    @kd.kernel
    def f(x):
        return r(x)
    return f, (np.arange(6.0) if x is None else x)


@pytest.mark.parametrize("combine,counter", [
    (lambda x, y: x - y, "combine(0.0, 1.0) = -1.0 but combine(1.0, 0.0) = 1.0"),
    (lambda x, y: 2 * x + y, "combine(0.0, 1.0) = 1.0 but combine(1.0, 0.0) = 2.0"),
    (lambda x, y: x, "combine(0.0, 1.0) = 0.0 but combine(1.0, 0.0) = 1.0"),
    (lambda x, y: kd.where(abs(x) >= abs(y), x, y), "combine(1.0, -1.0) = 1.0 but combine(-1.0, 1.0) = -1.0"),
])
def test_a_non_commutative_combine_is_an_error_with_a_counterexample(combine, counter):
    r = kd.reducer(combine, identity=0.0)   # line of the reducer: named by the error
    f, x = _trace_error(r)
    for b in BACKENDS:
        with pytest.raises(kd.KernelValueError, match="is not commutative") as ei:
            f(x, backend=b)
        assert counter in str(ei.value)
        assert "r = kd.reducer(combine, identity=0.0)" in str(ei.value)


def test_integer_combine_is_checked_on_integer_values():
    r = kd.reducer(lambda x, y: x // 2 + y, identity=0)
    f, x = _trace_error(r, np.arange(5))
    with pytest.raises(kd.KernelValueError, match=r"combine\(0, 1\) = 1 but combine\(1, 0\) = 0 \(applied at"):
        f(x, backend="numpy")


@pytest.mark.parametrize("identity,shown", [(2.0, "combine(2.0, 2.0) = 4.0"),
                                            (1.0, "combine(1.0, 1.0) = 2.0")])
def test_an_identity_that_does_not_absorb_itself_is_an_error(identity, shown):
    r = kd.reducer(lambda x, y: x + y, identity=identity)
    f, x = _trace_error(r)
    for b in BACKENDS:
        with pytest.raises(kd.KernelValueError, match="changes when combined with itself") as ei:
            f(x, backend=b)
        assert shown in str(ei.value)


def test_an_identity_the_dtype_cannot_hold_is_an_error():
    r = kd.reducer(lambda x, y: kd.maximum(x, y), identity=-np.inf)
    f, x = _trace_error(r, np.arange(4, dtype=np.int32))
    with pytest.raises(kd.KernelValueError, match="identity -inf .* is not a int32 value"):
        f(x, backend="numpy")


def test_a_combine_that_fails_when_traced_names_the_reducer():
    r = kd.reducer(lambda x, y: x + y.nonexistent, identity=0.0, name="broken")
    f, x = _trace_error(r)
    with pytest.raises(kd.KernelError, match="combine function of reducer 'broken' raised") as ei:
        f(x, backend="numpy")
    assert "check the arguments' ranks" not in str(ei.value)


def test_a_combine_returning_nothing_is_an_error():
    r = kd.reducer(lambda x, y: None, identity=0.0, name="nothing")
    f, x = _trace_error(r)
    with pytest.raises(kd.KernelError, match="returned None"):
        f(x, backend="numpy")
