"""Elementwise ops: numpy dtype rules, broadcasting, weak scalars, lazy composition."""
import numpy as np
import pytest

import kdsl.frontend.api as kd
from kdsl import dtypes as dt
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from fe_eval import trace_run

rng = np.random.default_rng(0)


def _arr(shape, dtype):
    if np.dtype(dtype) == bool:
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(1, 9, size=shape).astype(dtype)
    return (rng.random(shape) + 0.5).astype(dtype)


BINOPS = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b), ("floordiv", lambda a, b: a // b), ("mod", lambda a, b: a % b),
    ("pow", lambda a, b: a ** b), ("lt", lambda a, b: a < b), ("eq", lambda a, b: a == b),
    ("ge", lambda a, b: a >= b), ("ne", lambda a, b: a != b),
]


@pytest.mark.parametrize("name,op", BINOPS)
@pytest.mark.parametrize("da,db", [("float32", "float32"), ("float32", "float64"),
                                   ("int32", "int32"), ("int8", "int16"), ("int32", "float32"),
                                   ("float16", "float16"), ("uint8", "int8")])
def test_binary_matches_numpy(name, op, da, db):
    a, b = _arr((3, 4), da), _arr((4,), db)
    if name == "pow" and np.dtype(da).kind in "iu":
        b = np.abs(b) % 3
    g, (out,) = trace_run(op, a, b)
    ref = op(a, b)
    assert out.dtype == ref.dtype
    assert g.outputs[0].dtype is dt.as_dtype(ref.dtype)
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=2e-3)


def test_floor_semantics_of_negative_ints_and_floats():
    a = np.array([-7, -3, 5, 7], np.int32)
    b = np.array([2, -2, -3, 3], np.int32)
    _, (q, r) = trace_run(lambda a, b: (a // b, a % b), a, b)
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    _, (qf, rf) = trace_run(lambda a, b: (a // b, a % b), af, bf)
    np.testing.assert_array_equal(qf, af // bf)
    np.testing.assert_array_equal(rf, af % bf)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "int32", "uint8"])
def test_python_scalars_are_weak(dtype):
    a = _arr((5,), dtype)
    g, (out,) = trace_run(lambda a: a * 2 + 1, a)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, a * 2 + 1)
    g, (out,) = trace_run(lambda a: a * 0.5, a)
    assert out.dtype == (a * 0.5).dtype


def test_scalar_argument_is_weak_and_symbolic():
    a = _arr((4,), "float32")
    g, (out,) = trace_run(lambda a, s: a * s, a, 1.5)
    assert out.dtype == np.float32
    assert len(g.scalars) == 1 and g.scalars[0].dtype is dt.float64 and g.scalars[0].name == "s"
    np.testing.assert_allclose(out, a * np.float32(1.5))


def test_numpy_scalar_is_strong():
    a = _arr((4,), "float16")
    g, (out,) = trace_run(lambda a: a * np.float32(2), a)
    assert out.dtype == np.float32


def test_bool_arithmetic_and_logic():
    a, b = _arr((6,), bool), _arr((6,), bool)
    _, outs = trace_run(lambda a, b: (a + b, a * b, a & b, a | b, ~a, a ^ b), a, b)
    for o, r in zip(outs, (a + b, a * b, a & b, a | b, ~a, a ^ b)):
        assert o.dtype == r.dtype
        np.testing.assert_array_equal(o, r)


def test_int_bitwise_and_invert():
    a, b = _arr((5,), "int32"), _arr((5,), "int32")
    _, (x, y, z) = trace_run(lambda a, b: (a & b, a | 3, ~a), a, b)
    np.testing.assert_array_equal(x, a & b)
    np.testing.assert_array_equal(y, a | 3)
    np.testing.assert_array_equal(z, ~a)


@pytest.mark.parametrize("fname", ["exp", "log", "sqrt", "sin", "cos", "tanh"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int8", "bool"])
def test_math_functions_follow_numpy_dtypes(fname, dtype):
    a = _arr((3, 2), dtype)
    f = getattr(kd, fname)
    _, (out,) = trace_run(lambda a: f(a), a)
    ref = getattr(np, fname)(a)
    assert out.dtype == ref.dtype
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=2e-3)


def test_rsqrt_erf_sigmoid_abs_neg():
    import math
    a = (rng.random((7,)) - 0.5) * 4
    _, (r, e, s, ab, ng) = trace_run(
        lambda a: (kd.rsqrt(kd.abs(a)), kd.erf(a), kd.sigmoid(a), abs(a), -a), a)
    np.testing.assert_allclose(r, 1 / np.sqrt(np.abs(a)))
    np.testing.assert_allclose(e, [math.erf(v) for v in a])
    np.testing.assert_allclose(s, 1 / (1 + np.exp(-a)))
    np.testing.assert_array_equal(ab, np.abs(a))
    np.testing.assert_array_equal(ng, -a)


def test_where_maximum_minimum_clip_nan():
    a = np.array([1.0, np.nan, -3.0, 4.0, 0.5])
    b = np.array([2.0, 1.0, np.nan, 0.0, 0.5])
    _, (w, mx, mn, c) = trace_run(
        lambda a, b: (kd.where(a > b, a, b), kd.maximum(a, b), kd.minimum(a, b),
                      kd.clip(a, -1, 2)), a, b)
    np.testing.assert_array_equal(w, np.where(a > b, a, b))
    np.testing.assert_array_equal(mx, np.maximum(a, b))
    np.testing.assert_array_equal(mn, np.minimum(a, b))
    np.testing.assert_array_equal(c, np.clip(a, -1, 2))


def test_where_dtype_promotion_and_int_cond():
    a, c = _arr((4,), "float32"), np.array([0, 2, 0, 1], np.int32)
    _, (w,) = trace_run(lambda c, a: kd.where(c, a, 0), c, a)
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, np.where(c, a, 0))


def test_astype_and_method_clip():
    a = (rng.random((3, 3)) - 0.5) * 10
    g, (x, y) = trace_run(lambda a: (a.astype(np.int32), a.clip(0, None).astype(kd_float32())), a)
    np.testing.assert_array_equal(x, a.astype(np.int32))
    np.testing.assert_array_equal(y, a.clip(0, None).astype(np.float32))
    assert [s.name for s in g.stages] == ["astype", "astype_1"]


def kd_float32():
    return dt.float32


@pytest.mark.parametrize("sa,sb", [((3, 1), (1, 4)), ((1,), (2, 3)), ((2, 1, 3), (4, 1)),
                                   ((0, 3), (1, 3)), ((1, 1), (1,)), ((), (3,))])
def test_broadcasting(sa, sb):
    a, b = _arr(sa, "float64"), _arr(sb, "float64")
    _, (out,) = trace_run(lambda a, b: a - b, a, b, specialize=True)
    np.testing.assert_array_equal(out, a - b)


def test_power_small_ints_expand_to_multiplication():
    a = _arr((4,), "float32")
    g, (out,) = trace_run(lambda a: a ** 2, a)
    body = g.stages[0].body
    assert not collect(body, lambda e: isinstance(e, n.Binary) and e.op is n.BinOp.POW)
    np.testing.assert_allclose(out, a ** 2)


def test_repeated_use_shares_subtrees_and_stays_bounded():
    a = _arr((3,), "float64") * 0.01

    def f(x):
        for _ in range(40):
            x = x * x + x
        return x
    g, (out,) = trace_run(f, a)
    ref = a.copy()
    for _ in range(40):
        ref = ref * ref + ref
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    assert 1 <= len(g.stages) <= 12


def test_lazy_ops_make_one_stage_named_after_last_op():
    a, b = _arr((2, 3), "float32"), _arr((3,), "float32")
    g, _ = trace_run(lambda a, b: kd.exp(a * b + 1) - a, a, b)
    assert [s.name for s in g.stages] == ["subtract"]
    s = g.stages[0]
    assert [ax.name for ax in s.axes] == ["i0", "i1"] and s.reduce_axes == ()
    assert s.dtype is dt.float32 and s.loc is not None and s.loc.file.endswith(".py")


def test_true_division_of_ints_gives_float64():
    a = np.arange(1, 5, dtype=np.int32)
    _, (out,) = trace_run(lambda a: a / 2, a)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, a / 2)
