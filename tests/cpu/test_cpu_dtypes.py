"""Every dtype of SPEC §2 through the cpu backend, against the numpy reference backend.

Integers must match exactly (wrap-around, floor division and modulo with
Python's signs, division by zero giving 0); floats to a tolerance that fits
the dtype; NaNs where numpy has NaNs.
"""
import numpy as np
import pytest

import kdsl as kd

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8]
FLOATS = [np.float16, np.float32, np.float64]
TOL = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}

try:
    import ml_dtypes
    BF16 = [ml_dtypes.bfloat16]
    TOL[ml_dtypes.bfloat16] = 1e-2
except ImportError:
    BF16 = []


def _data(dtype, shape, rng, nonneg=False):
    d = np.dtype(dtype)
    if d.kind == "b":
        return rng.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        lo = 0 if nonneg else max(info.min, -1000)
        return rng.integers(lo, min(info.max, 1000), size=shape, endpoint=True).astype(d)
    x = rng.standard_normal(shape) * 3
    return (np.abs(x) if nonneg else x).astype(d)


def _same(got, want, dtype):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        tol = TOL.get(dtype, 1e-6)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol, equal_nan=True)


def _both(k, *args):
    return k(*args, backend="cpu"), k(*args, backend="numpy")


@kd.kernel
def arith(A, B):
    return (A + B, A - B, A * B, kd.maximum(A, B), kd.minimum(A, B), A < B, A == B, A >= B)


@kd.kernel
def intdiv(A, B):
    return A // B, A % B, A & B, A | B, A ^ B, -A, abs(A), ~A


@kd.kernel
def floatops(A, B):
    return (A / B, A // B, A % B, kd.exp(A), kd.log(abs(A)), kd.sqrt(abs(A)), kd.sin(A), kd.cos(A),
            kd.tanh(A), kd.erf(A), kd.sigmoid(A), kd.rsqrt(abs(A) + 1), abs(A), -A, A ** 2)


@kd.kernel
def reductions(A):
    return A.sum(axis=1), A.max(axis=1), A.min(axis=0), A.argmax(axis=1), A.argmin(axis=0)


@pytest.mark.parametrize("dtype", INTS + FLOATS + BF16, ids=lambda d: np.dtype(d).name)
def test_arith_and_compare(dtype, rng):
    a, b = _data(dtype, (7, 13), rng), _data(dtype, (7, 13), rng)
    for g, w in zip(*_both(arith, a, b)):
        _same(g, w, dtype)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_int_floor_division_modulo_bitwise(dtype, rng):
    a, b = _data(dtype, (9, 11), rng), _data(dtype, (9, 11), rng)
    b[0, :] = 0                       # division by zero gives 0, like numpy
    if np.dtype(dtype).kind == "i":
        b[1, :] = -1
        a[1, 0] = np.iinfo(dtype).min  # MIN // -1 wraps (no UB in the generated code)
        b[2, :] = -7
    with np.errstate(all="ignore"):
        for g, w in zip(*_both(intdiv, a, b)):
            _same(g, w, dtype)


def test_int_wraparound(rng):
    a = np.array([127, -128, 100, 50], np.int8)
    got = arith(a, a, backend="cpu")
    np.testing.assert_array_equal(got[0], (a + a))
    np.testing.assert_array_equal(got[2], (a * a))


@pytest.mark.parametrize("dtype", FLOATS + BF16, ids=lambda d: np.dtype(d).name)
def test_float_math(dtype, rng):
    a, b = _data(dtype, (6, 10), rng), _data(dtype, (6, 10), rng)
    b[0, 0] = 0
    a[1, 1] = np.nan
    b[2, 2] = np.nan
    with np.errstate(all="ignore"):
        for g, w in zip(*_both(floatops, a, b)):
            _same(g, w, dtype)


def test_min_max_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, 1.0, np.nan], np.float32)
    got = arith(a, b, backend="cpu")
    np.testing.assert_array_equal(got[3], np.maximum(a, b))
    np.testing.assert_array_equal(got[4], np.minimum(a, b))


@pytest.mark.parametrize("dtype", INTS + FLOATS + [np.bool_] + BF16, ids=lambda d: np.dtype(d).name)
def test_reductions(dtype, rng):
    a = _data(dtype, (5, 17), rng)
    k = reductions if np.dtype(dtype).kind != "b" else kd.kernel(lambda A: (A.any(axis=1), A.all(axis=0)))
    for g, w in zip(*_both(k, a)):
        _same(g, w, dtype)


@pytest.mark.parametrize("src", INTS + FLOATS + [np.bool_] + BF16, ids=lambda d: np.dtype(d).name)
def test_casts_to_every_dtype(src, rng):
    a = _data(src, (4, 9), rng)
    if np.dtype(src).kind == "f":
        a = (a * 40).astype(src)     # out of int8 range: wraps like numpy's astype
    targets = INTS + FLOATS + [np.bool_] + BF16

    @kd.kernel
    def casts(A):
        return tuple(A.astype(t) for t in targets)
    for g, w, t in zip(*_both(casts, a), targets):
        _same(g, w, t)


def test_bool_logic(rng):
    a, b = rng.random((5, 6)) < 0.5, rng.random((5, 6)) < 0.5

    @kd.kernel
    def logic(A, B):
        return A & B, A | B, ~A, A == B, A != B, kd.where(A, B, ~B)
    for g, w in zip(*_both(logic, a, b)):
        _same(g, w, np.bool_)


@pytest.mark.parametrize("scalar", [3, 2.5, True, -7, 1e300])
def test_scalar_arguments(scalar, rng):
    a = _data(np.float32, (4, 5), rng)

    @kd.kernel
    def scale(A, s):
        return A * s + s
    _same(*_both(scale, a, scalar), np.float32)


def test_float64_to_float16_rounds_once_without_libcalls():
    """double -> half is correctly rounded (ties, overflow, subnormals, NaN) and calls nothing
    outside the module (LLVM's __truncdfhf2 is missing from processes without libgcc >= 12)."""
    import re
    from kdsl_cpu import jit
    rng = np.random.default_rng(7)
    base = rng.standard_normal(4000).astype(np.float16).astype(np.float64)
    half_ulp = np.spacing(np.abs(base).astype(np.float16)).astype(np.float64) / 2
    vals = np.concatenate([base + half_ulp, base - half_ulp, base + half_ulp * (1 + 1e-12),
                           base + half_ulp * (1 - 1e-12), rng.standard_normal(500) * 1e5,
                           rng.standard_normal(500) * 1e-7,
                           [np.nan, np.inf, -np.inf, 65504.0, 65519.99, 65520.0, 0.0, -0.0, 1e-300,
                            2.0 ** -25, 2.0 ** -25 * (1 + 1e-15)]])
    k = kd.kernel(lambda A: A.astype(np.float16))
    got = k(vals, backend="cpu")
    with np.errstate(over="ignore"):
        want = vals.astype(np.float16)
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), vals[~same][:5]
    asm = jit.assembly(k.source(kd.TensorSpec((None,), np.float64), backend="cpu"))
    assert not re.search(r"__\w+hf2", asm)
