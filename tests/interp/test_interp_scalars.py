"""Scalar semantics of the IR interpreter, with numpy arrays as the oracle."""
import math

import numpy as np
import pytest

from kdsl import dtypes as dt
from kdsl.numerics import numpy_eval
from kdsl.backends.interpreter import run_lowered
from kdsl.numerics.pyexec_rt import round_bf16
from kdsl.ir import nodes as n

from interp_build import binop, c, elementwise, kernel, load, loop, store

pytestmark = pytest.mark.filterwarnings("error")
B = n.BinOp


def run1(f, *arrays, out_dtype=None, scalars=()):
    out = np.zeros(arrays[0].shape, out_dtype or arrays[0].dtype)
    run_lowered(f, list(arrays), [out], list(scalars))
    return out


def ref(fn, *arrays):
    with np.errstate(all="ignore"):
        return fn(*arrays)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("op,npf", [(B.ADD, np.add), (B.SUB, np.subtract), (B.MUL, np.multiply)])
def test_int_ops_wrap_around(dtype, op, npf):
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max - 1, 7, 0, info.max // 2 + 3], dtype)
    b = np.array([1, info.min, info.max, info.max, info.min, 3], dtype)
    f = elementwise("op", dtype, dtype, lambda x, y: binop(op, x, y), nin=2)
    out = run1(f, a, b)
    np.testing.assert_array_equal(out, ref(npf, a, b))
    assert out.dtype == np.dtype(dtype)


def test_int64_scalar_argument_wraps():
    def body(A, Out, s):
        i = n.var("i")
        return loop(i, A.shape[0], store(Out, (i,), binop(B.MUL, load(A, i), s)))
    f = kernel("scale", [("A", "int64", 1)], [("O", "int64", 1)], body, scalars=[("s", "int64")])
    a = np.array([2**62, -3, 5], np.int64)
    np.testing.assert_array_equal(run1(f, a, scalars=[4]), ref(np.multiply, a, np.int64(4)))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "float32", "float64"])
def test_floor_division_and_mod_signs(dtype):
    a = np.array([7, -7, 7, -7, 0, 5, -5, 3], dtype)
    b = np.array([2, 2, -2, -2, 3, 0, 0, -1], dtype)
    for op, npf in [(B.FLOORDIV, np.floor_divide), (B.MOD, np.remainder)]:
        f = elementwise("fd", dtype, dtype, lambda x, y, op=op: binop(op, x, y), nin=2)
        out = run1(f, a, b)
        np.testing.assert_array_equal(out, ref(npf, a, b))   # ints: x // 0 == x % 0 == 0


def test_index_floordiv_by_zero_does_not_crash():
    """Python-int index arithmetic (loop variables) must also give 0 for a zero divisor."""
    def body(A, Out):
        i = n.var("i")
        return loop(i, A.shape[0], store(Out, (i,), binop(B.FLOORDIV, c(5), i)))
    f = kernel("iz", [("A", "int64", 1)], [("O", "int64", 1)], body)
    np.testing.assert_array_equal(run1(f, np.zeros(3, np.int64)), [0, 5, 2])


def test_int_pow_and_true_division():
    a = np.array([2, 3, -1, -1, 1, 2, 0], np.int32)
    b = np.array([10, 21, 3, -3, -5, -1, 0], np.int32)
    f = elementwise("pow", "int32", "int32", lambda x, y: binop(B.POW, x, y), nin=2)
    wrapped = ref(np.power, a[1:2], b[1:2])[0]          # 3**21 wraps in int32
    np.testing.assert_array_equal(run1(f, a, b), [1024, wrapped, -1, -1, 1, 0, 1])
    x = np.array([1.0, -2.0, 0.0, 3.0], np.float32)
    y = np.array([3.0, 0.0, 0.0, -7.0], np.float32)
    fd = elementwise("div", "float32", "float32", lambda p, q: binop(B.DIV, p, q), nin=2)
    np.testing.assert_array_equal(run1(fd, x, y), ref(np.true_divide, x, y))


def test_float16_rounds_after_every_op():
    rng = np.random.default_rng(1)
    a, b, cc = (rng.standard_normal(64).astype(np.float16) * 10 for _ in range(3))

    def fn(x, y, z):
        return binop(B.MUL, binop(B.ADD, x, y), binop(B.SUB, z, c(0.1, dt.float16)))
    f = elementwise("f16", "float16", "float16", fn, nin=3)
    out = run1(f, a, b, cc)
    expect = (a + b) * (cc - np.float16(0.1))
    np.testing.assert_array_equal(out, expect)
    wide = (a.astype(np.float32) + b) * (cc.astype(np.float32) - np.float32(0.1))
    assert not np.array_equal(out, wide.astype(np.float16))   # per-op rounding is visible


@pytest.mark.parametrize("op", [B.MAX, B.MIN])
def test_nan_propagates_through_min_max_reduction(op):
    def body(A, Out):
        i, k = n.var("i"), n.var("k")
        init = store(Out, (i,), c(-math.inf if op is B.MAX else math.inf, dt.float32))
        upd = store(Out, (i,), binop(op, load(Out, i), load(A, i, k)))
        return loop(i, A.shape[0], n.Seq((init, loop(k, A.shape[1], upd))))
    f = kernel("mx", [("A", "float32", 2)], [("O", "float32", 1)], body)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    a[0, 0] = np.nan      # first
    a[1, 3] = np.nan      # last
    out = np.zeros(3, np.float32)
    run_lowered(f, [a], [out], [])
    red = np.max if op is B.MAX else np.min
    np.testing.assert_array_equal(out, red(a, axis=1))
    assert np.isnan(out[:2]).all() and not np.isnan(out[2])


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float64", "int8"), ("float32", "uint8"),
                                     ("int32", "int8"), ("int64", "uint8"), ("int8", "float16"),
                                     ("float32", "bool"), ("bool", "int32"), ("float64", "float16")])
def test_casts_match_numpy_astype(src, dst):
    if dt.as_dtype(src).is_float:
        a = np.array([2.7, -2.7, 0.5, -0.5, 300.0, -129.5, np.nan, np.inf, 1e10, 0.0], src)
    elif src == "bool":
        a = np.array([True, False, True])
    else:
        a = np.array([5, -1, 300, -128, 255, 0] if src != "int8" else [5, -1, 100, -128, 127], src)
    f = elementwise("cast", src, dst, lambda x: n.Cast(dt.as_dtype(dst), x))
    out = run1(f, a, out_dtype=dst)
    with np.errstate(all="ignore"):
        expect = a.astype(dst)
    finite = np.isfinite(a) & (np.abs(a) < 1e9) if a.dtype.kind == "f" else np.ones(a.shape, bool)
    np.testing.assert_array_equal(out[finite], expect[finite])


MATH = [(n.UnOp.EXP, np.exp), (n.UnOp.LOG, np.log), (n.UnOp.SQRT, np.sqrt),
        (n.UnOp.SIN, np.sin), (n.UnOp.COS, np.cos), (n.UnOp.TANH, np.tanh),
        (n.UnOp.FLOOR, np.floor), (n.UnOp.CEIL, np.ceil), (n.UnOp.ABS, np.abs),
        (n.UnOp.NEG, np.negative),
        (n.UnOp.RSQRT, lambda x: 1 / np.sqrt(x)),
        (n.UnOp.SIGMOID, lambda x: 1 / (1 + np.exp(-x))),
        (n.UnOp.ERF, np.vectorize(math.erf))]


@pytest.mark.parametrize("op,npf", MATH, ids=[m[0].value for m in MATH])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_math_functions(op, npf, dtype):
    a = np.array([0.3, 1.7, -2.5, 4.0, 0.0, -0.0, 10.0, np.nan], dtype)
    f = elementwise("m", dtype, dtype, lambda x: n.Unary(x.dtype, op, x))
    out = run1(f, a)
    # numpy_eval defines the semantics (16-bit rsqrt/sigmoid in float32, erf in float64)
    with np.errstate(all="ignore"):
        oracle = numpy_eval.fix(numpy_eval.UNARY[op](a), dt.as_dtype(dtype))
        np.testing.assert_allclose(oracle.astype(np.float64), ref(npf, a.astype(np.float64)),
                                   rtol=2e-3, atol=1e-3, equal_nan=True)
    np.testing.assert_array_equal(out, oracle)


def test_isnan_not_and_bool_logic():
    a = np.array([1.0, np.nan, -np.inf, np.nan], np.float32)
    f = elementwise("isn", "float32", "bool", lambda x: n.Unary(dt.bool_, n.UnOp.NOT,
                                                              n.Unary(dt.bool_, n.UnOp.ISNAN, x)))
    np.testing.assert_array_equal(run1(f, a, out_dtype=bool), ~np.isnan(a))
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    for op, npf in [(B.AND, np.logical_and), (B.OR, np.logical_or), (B.XOR, np.logical_xor)]:
        g = elementwise("lg", "bool", "bool", lambda x, y, op=op: binop(op, x, y), nin=2)
        np.testing.assert_array_equal(run1(g, p, q), npf(p, q))
    inv = elementwise("inv", "uint8", "uint8", lambda x: n.Unary(dt.uint8, n.UnOp.NOT, x))
    u = np.array([0, 1, 255], np.uint8)
    np.testing.assert_array_equal(run1(inv, u), ~u)


def test_compare_and_select_dtypes():
    a = np.array([1, 5, -3, 7], np.int16)
    b = np.array([2, 5, -4, 9], np.int16)

    def fn(x, y):
        return n.Select(dt.int16, n.Compare(dt.bool_, n.CmpOp.GE, x, y), x, binop(B.SUB, y, x))
    f = elementwise("cs", "int16", "int16", fn, nin=2)
    np.testing.assert_array_equal(run1(f, a, b), np.where(a >= b, a, b - a))


def test_bfloat16_rounding_matches_reference():
    rng = np.random.default_rng(2)
    vals = np.concatenate([rng.standard_normal(200).astype(np.float32) * 1e3,
                           np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -(1 + 2**-8),
                                     3.4e38, -3.4e38, np.inf, np.nan, 0.0, -0.0, 1e-40], np.float32)])
    got = np.array([round_bf16(v) for v in vals], np.float32)
    np.testing.assert_array_equal(got, numpy_eval.round_bf16(vals))
    assert round_bf16(np.float32(1 + 2**-8)) == 1.0            # tie -> even
    assert round_bf16(np.float32(1 + 3 * 2**-8)) == 1 + 2**-6  # tie -> even (up)


def test_bfloat16_temporary_rounds_each_op():
    """out = float32((bf16(x) + bf16(y)) * bf16(y)) through a bfloat16 temporary."""
    def body(X, Y, Out):
        i = n.var("i")
        T = n.Buffer("T", dt.bfloat16, (c(1),))
        bx, by = n.Cast(dt.bfloat16, load(X, i)), n.Cast(dt.bfloat16, load(Y, i))
        val = binop(B.MUL, binop(B.ADD, bx, by), by)
        st = n.Seq((store(T, (0,), val), store(Out, (i,), n.Cast(dt.float32, load(T, 0)))))
        return loop(i, X.shape[0], n.Allocate(T, st))
    f = kernel("bf", [("X", "float32", 1), ("Y", "float32", 1)], [("O", "float32", 1)], body)
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(50).astype(np.float32), rng.standard_normal(50).astype(np.float32)
    out = run1(f, x, y)
    r = numpy_eval.round_bf16
    np.testing.assert_array_equal(out, r(r(r(x) + r(y)) * r(y)))
