"""Where kdsl used to depart from numpy 2, it now follows it (issue 8, items 11 and 13).

Each case runs on every executor (numpy reference, loop-IR interpreter, cpu)
and is compared with what numpy itself returns or raises.
"""
import numpy as np
import pytest

import kdsl as kd

BACKENDS = ["numpy", "interp"] + (["cpu"] if "cpu" in kd.backends() else [])


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _on_all(k, *args, want, backends=None):
    for b in backends or BACKENDS:
        got = k(*args, backend=b)
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                _same(g, w)
        else:
            _same(got, want)


def _raises_like_numpy(np_call, k, *args, numpy_exc, kd_exc, match):
    with pytest.raises(numpy_exc):
        np_call()
    for b in BACKENDS:
        with pytest.raises(kd_exc, match=match) as ei:
            k(*args, backend=b)
        assert isinstance(ei.value, numpy_exc)
        assert __file__ in str(ei.value), "the error names the user's line"


# ------------------------------------------------------------------ integer sums
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64", "int8", "int32", "bool"])
def test_integer_sums_widen_like_numpy(dtype):
    @kd.kernel
    def sums(A):
        return A.sum(), A.sum(axis=0), A.prod(axis=1), np.sum(A, axis=1), A.mean()
    rng = np.random.default_rng(5)
    a = rng.integers(0, 200, (4, 6)).astype(dtype)
    with np.errstate(all="ignore"):
        want = (a.sum(), a.sum(axis=0), a.prod(axis=1), np.sum(a, axis=1), a.mean())
    _on_all(sums, a, want=want)


# ------------------------------------------------------------------ Python ints out of range
def test_uint8_plus_300_raises_overflow_like_numpy():
    @kd.kernel
    def f(A):
        return A + 300
    a = np.arange(3, dtype=np.uint8)
    _raises_like_numpy(lambda: a + 300, f, a, numpy_exc=OverflowError,
                       kd_exc=kd.IntegerOverflowError, match="300 out of bounds for uint8")


@pytest.mark.parametrize("expr", [lambda A, m: A * -1, lambda A, m: A // 300,
                                  lambda A, m: A & 256, lambda A, m: m(A, -1),
                                  lambda A, m: A + 2 ** 63, lambda A, m: A + 2 ** 64])
def test_other_out_of_range_literals_raise_like_numpy(expr):
    a = np.arange(3, dtype=np.uint8)
    _raises_like_numpy(lambda: expr(a, np.maximum), kd.kernel(lambda A: expr(A, kd.maximum)), a,
                       numpy_exc=OverflowError, kd_exc=kd.IntegerOverflowError,
                       match="out of bounds|does not fit")


def test_scalar_argument_out_of_range_raises_at_the_call():
    @kd.kernel
    def f(A, c):
        return A + c
    a = np.arange(3, dtype=np.uint8)
    _on_all(f, a, 3, want=a + 3)
    _on_all(f, a, 255, want=(a + np.uint8(255)))
    for c in (256, -1):
        _raises_like_numpy(lambda: a + c, f, a, c, numpy_exc=OverflowError,
                           kd_exc=kd.IntegerOverflowError, match="out of bounds for uint8")
    for b in BACKENDS:     # the check survives the cached fast call path
        for _ in range(20):
            f(a, 7, backend=b)
        with pytest.raises(OverflowError):
            f(a, 256, backend=b)


def test_uint64_takes_python_ints_beyond_int64():
    @kd.kernel
    def f(A):
        return A + 2 ** 63, A < 2 ** 64 - 1
    a = np.array([0, 5], np.uint64)
    _on_all(f, a, want=(a + 2 ** 63, a < 2 ** 64 - 1))


# ------------------------------------------------------------------ integer powers
def test_int_to_negative_literal_power_raises_like_numpy():
    @kd.kernel
    def f(A):
        return A ** -1
    a = np.arange(1, 4)
    _raises_like_numpy(lambda: a ** -1, f, a, numpy_exc=ValueError, kd_exc=kd.KernelValueError,
                       match="negative integer powers")


def test_int_to_negative_scalar_argument_power_raises_at_the_call():
    @kd.kernel
    def f(A, e):
        return A ** e
    a = np.arange(1, 4)
    _on_all(f, a, 3, want=a ** 3)
    _raises_like_numpy(lambda: a ** -2, f, a, -2, numpy_exc=ValueError, kd_exc=kd.KernelValueError,
                       match="negative integer powers")


def test_int_to_negative_array_power_raises_like_numpy():
    """An exponent that is array data is checked on the data before the kernel runs."""
    @kd.kernel
    def f(A, E):
        return A ** E
    a = np.array([1, -1, -1, 2, -3, 5, 0], np.int64)
    e = np.array([-3, -1, -2, -1, -2, 2, 0], np.int64)
    _raises_like_numpy(lambda: a ** e, f, a, e, numpy_exc=ValueError, kd_exc=kd.KernelValueError,
                       match="negative integer powers")
    e = np.abs(e)
    _on_all(f, a, e, want=a ** e)


# ------------------------------------------------------------------ argmax over several axes
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_take_one_axis_like_numpy(kind):
    x = np.ones((2, 3))
    k = kd.kernel(lambda A: getattr(A, kind)(axis=(0, 1)))
    _raises_like_numpy(lambda: getattr(np, kind)(x, axis=(0, 1)), k, x, numpy_exc=TypeError,
                       kd_exc=kd.KernelError, match="axis must be an int or None")


# ------------------------------------------------------------------ comparisons by value
_LITERALS = [-1, 300, -129, 128, 70000, 2 ** 63, 2 ** 64, -2 ** 70, 0, 3]


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int32", "uint64", "bool"])
def test_comparisons_with_python_ints_are_by_value(dtype):
    a = np.array([0, 1, 3, 100, 127], dtype=dtype) if dtype != "bool" else np.array([True, False])
    # the results are decided while tracing: the cpu backend runs a few (compiling is slow)
    backends = BACKENDS if dtype in ("uint8", "uint64") else ["numpy", "interp"]
    for v in _LITERALS:
        k = kd.kernel(lambda A: (A < v, A <= v, A > v, A >= v, A == v, A != v, v < A, v == A))
        try:
            want = (a < v, a <= v, a > v, a >= v, a == v, a != v, v < a, v == a)
        except OverflowError:      # a bool array compares in int64: 2**63 does not fit
            _raises_like_numpy(lambda: a < v, k, a, numpy_exc=OverflowError,
                               kd_exc=kd.IntegerOverflowError, match="out of bounds for int64")
            continue
        _on_all(k, a, want=want, backends=backends)


@kd.kernel
def _cmp_scalar(A, c):
    return A < c, A <= c, A > c, A >= c, A == c, A != c, c < A, c >= A


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint32", "uint64", "bool"])
def test_comparisons_with_scalar_arguments_are_by_value(dtype):
    info = np.iinfo(dtype) if dtype != "bool" else None
    a = (np.array([0, 1, 3, info.max], dtype=dtype) if info is not None
         else np.array([True, False]))
    for c in (-1, 3, 300, -2 ** 40, 2 ** 62):
        want = (a < c, a <= c, a > c, a >= c, a == c, a != c, c < a, c >= a)
        _on_all(_cmp_scalar, a, c, want=want)


def test_comparison_with_index_values_is_by_value():
    @kd.kernel
    def f(A):
        n, = A.shape
        return kd.compute((n,), lambda i: A[i] < i + 250)
    a = np.full(10, 255, np.uint8)
    _on_all(f, a, want=a.astype(np.int64) < np.arange(10) + 250)


# ------------------------------------------------------------------ np.clip
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("signed", ["int8", "int32", "int64"])
@pytest.mark.parametrize("opname", ["less", "less_equal", "greater", "greater_equal", "equal",
                                    "not_equal"])
def test_uint64_against_signed_arrays_compares_exactly(backend, signed, opname):
    # numpy 2 compares uint64 with signed integers by value; float64 (their common type)
    # would round 2**53 + 1 to 2**53 and 2**64 - 1 to 2**64
    info = np.iinfo(signed)
    u = np.array([0, 1, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1], np.uint64)
    v = np.array(sorted({int(info.min), -1, 0, 1, min(2**53, int(info.max)),
                         min(2**53 + 1, int(info.max)), int(info.max)}), signed)
    U, S = np.meshgrid(u, v)
    op = getattr(np, opname)

    @kd.kernel
    def both(x, y):
        return op(x, y), op(y, x)
    r1, r2 = both(U, S, backend=backend)
    np.testing.assert_array_equal(r1, op(U, S))
    np.testing.assert_array_equal(r2, op(S, U))


@pytest.mark.parametrize("lo,hi", [(-1, 3), (None, 300), (-1, None), (-200, 200), (5, 2),
                                   (2, 3)])
def test_clip_drops_harmless_out_of_range_bounds_like_numpy(lo, hi):
    a = np.arange(0, 256, 51, dtype=np.uint8)
    b = np.array([-128, -3, 0, 5, 127], np.int8)
    k = kd.kernel(lambda A, B: (kd.clip(A, lo, hi), np.clip(B, lo, hi), A.clip(lo, hi)))
    _on_all(k, a, b, want=(np.clip(a, lo, hi), np.clip(b, lo, hi), a.clip(lo, hi)))


@pytest.mark.parametrize("lo,hi", [(300, 400), (-5, -1), (3, -1)])
def test_clip_with_a_harmful_out_of_range_bound_raises_like_numpy(lo, hi):
    a = np.arange(6, dtype=np.uint8)
    k = kd.kernel(lambda A: kd.clip(A, lo, hi))
    _raises_like_numpy(lambda: np.clip(a, lo, hi), k, a, numpy_exc=OverflowError,
                       kd_exc=kd.IntegerOverflowError, match="out of bounds for uint8")


def test_clip_with_scalar_argument_bounds():
    @kd.kernel
    def f(A, lo, hi):
        return kd.clip(A, lo, hi)
    a = np.arange(0, 256, 51, dtype=np.uint8)
    for lo, hi in ((-1, 300), (52, 140), (-10 ** 6, 100), (5, 2)):
        _on_all(f, a, lo, hi, want=np.clip(a, lo, hi))
    for lo, hi in ((300, 400), (0, -1)):
        _raises_like_numpy(lambda: np.clip(a, lo, hi), f, a, lo, hi, numpy_exc=OverflowError,
                           kd_exc=kd.IntegerOverflowError, match="out of bounds for uint8")


# ------------------------------------------------------------------ strong and weak scalars
def test_numpy_float64_scalars_are_strong():
    @kd.kernel
    def f(A):
        return A * np.float64(2), A + 2.0, A * np.float32(3), np.float64(0.5) - A
    a = np.arange(3, dtype=np.float32)
    _on_all(f, a, want=(a * np.float64(2), a + 2.0, a * np.float32(3), np.float64(0.5) - a))
    h = np.arange(3, dtype=np.float16)
    _on_all(f, h, want=(h * np.float64(2), h + 2.0, h * np.float32(3), np.float64(0.5) - h))


def test_where_with_two_python_scalars_is_strong():
    @kd.kernel
    def f(c, s, U):
        w = kd.where(c, 1000, s)
        return w, w + U, kd.where(c, 1, 2.5) * U, np.where(c, 7, 3) + U
    c = np.array([True, False])
    u = np.array([1, 2], np.uint8)
    w = np.where(c, 1000, 3)
    _on_all(f, c, 3, u, want=(w, w + u, np.where(c, 1, 2.5) * u, np.where(c, 7, 3) + u))
