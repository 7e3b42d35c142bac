"""numpy-style reductions: axes, keepdims, dtypes, NaN rules, stage names and axes."""
import numpy as np
import pytest

import kdsl.frontend.api as kd
from kdsl import dtypes as dt
from fe_eval import trace_run

rng = np.random.default_rng(1)
KINDS = ["sum", "prod", "max", "min", "mean", "argmax", "argmin", "any", "all"]
AXES = [None, 0, 1, -1, (0, 2), (2, 0), (), (0, 1, 2)]


def _call(kind, x, axis, keepdims, style):
    kw = {} if axis is None else {"axis": axis}
    if keepdims:
        kw["keepdims"] = True
    if style == "method":
        return getattr(x, kind)(**kw)
    if style == "kd":
        return getattr(kd, kind)(x, **kw)
    return getattr(np, kind)(x, **kw)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_matches_numpy(kind, axis, keepdims):
    x = rng.random((2, 3, 4)) + 0.5
    style = ["method", "kd", "np"][hash((kind, str(axis), keepdims)) % 3]
    if kind in ("argmax", "argmin") and isinstance(axis, tuple):
        # numpy takes one axis (or None) here and raises TypeError: kdsl does the same
        with pytest.raises(TypeError):
            getattr(np, kind)(x, axis=axis)
        with pytest.raises(TypeError, match="axis must be an int or None") as ei:
            trace_run(lambda x: _call(kind, x, axis, keepdims, style), x)
        assert __file__ in str(ei.value)
        return
    _, (out,) = trace_run(lambda x: _call(kind, x, axis, keepdims, style), x)
    ref = _call(kind, x, axis, keepdims, "np")
    assert out.shape == np.shape(ref) and out.dtype == np.asarray(ref).dtype
    np.testing.assert_allclose(out, ref, rtol=1e-12)


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min", "any", "all", "mean"])
@pytest.mark.parametrize("shape,axis", [((0, 3), 0), ((0, 3), 1), ((1, 1), None), ((1, 4), 0),
                                        ((3, 0), 1)])
def test_size_zero_and_one(kind, shape, axis):
    x = rng.random(shape)
    if kind in ("max", "min") and (np.prod(shape) == 0 if axis is None else shape[axis] == 0):
        import kdsl

        def empty_reduction(x):
            return getattr(x, kind)(axis=axis)
        with pytest.raises(ValueError):
            getattr(np, kind)(x, axis=axis)
        for backend in ("numpy", "interp"):
            with pytest.raises(ValueError, match="empty axis has no identity") as ei:
                kdsl.kernel(empty_reduction)(x, backend=backend)
            assert __file__ in str(ei.value)
        return
    with np.errstate(all="ignore"):
        ref = getattr(np, kind)(x, axis=axis)
        _, (out,) = trace_run(lambda x: getattr(x, kind)(axis=axis), x)
    np.testing.assert_allclose(out, ref)


@pytest.mark.parametrize("dtype,expect", [("int8", "int64"), ("int32", "int64"), ("bool", "int64"),
                                          ("int64", "int64"), ("float32", "float32"),
                                          ("float16", "float16")])
def test_sum_dtypes(dtype, expect):
    x = (rng.random((3, 50)) * 3).astype(dtype)
    _, (s, p) = trace_run(lambda x: (x.sum(axis=1), x.prod(axis=1) if dtype == "bool" else x.sum()), x)
    assert s.dtype == np.dtype(expect)
    np.testing.assert_allclose(s.astype(np.float64), x.astype(np.float64).sum(axis=1), rtol=1e-3)


def test_float16_sum_accumulates_in_float32():
    x = np.full((1, 4096), 1.0, np.float16)
    g, (s,) = trace_run(lambda x: x.sum(axis=1), x)
    assert s.dtype == np.float16 and s[0] == 4096  # float16 accumulation would stall at 2048
    sum_stage = g.stage("sum")
    assert sum_stage.dtype is dt.float32 and g.outputs[0].dtype is dt.float16
    g, (m,) = trace_run(lambda x: x.mean(axis=1), x)
    assert m.dtype == np.float16 and m[0] == 1.0


def test_dtype_argument():
    x = rng.integers(0, 100, (3, 5)).astype(np.int8)
    _, (a, b, c) = trace_run(lambda x: (x.sum(axis=1, dtype=np.int8), kd.sum(x, 0, dtype=kd_f64()),
                                        x.mean(dtype=np.float32)), x)
    np.testing.assert_array_equal(a, x.sum(axis=1, dtype=np.int8))
    assert b.dtype == np.float64 and c.dtype == np.float32
    np.testing.assert_allclose(c, x.mean(dtype=np.float32), rtol=1e-6)


def kd_f64():
    return dt.float64


def test_max_min_propagate_nan_and_arg_first_nan():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, -1.0], [-np.inf, -np.inf, -np.inf, -np.inf]])
    _, outs = trace_run(lambda x: (x.max(axis=1), x.min(axis=1), x.argmax(axis=1), x.argmin(axis=1),
                                   x.argmax()), x)
    refs = (x.max(axis=1), x.min(axis=1), x.argmax(axis=1), x.argmin(axis=1), x.argmax())
    for o, r in zip(outs, refs):
        np.testing.assert_array_equal(o, r)


@pytest.mark.parametrize("dtype", ["int32", "bool", "uint8"])
def test_argmax_ints_ties_smallest_index(dtype):
    x = np.array([[3, 7, 7, 1], [0, 0, 0, 0], [9, 1, 9, 9]]).astype(dtype)
    _, (a, b) = trace_run(lambda x: (x.argmax(axis=1), kd.argmin(x, axis=0, keepdims=True)), x)
    np.testing.assert_array_equal(a, x.argmax(axis=1))
    np.testing.assert_array_equal(b, x.argmin(axis=0, keepdims=True))


def test_stage_names_and_axes():
    x = rng.random((3, 4, 5))
    g, _ = trace_run(lambda x: (x.sum(axis=1), x.sum(axis=(0, 2)), x.max(axis=2, keepdims=True)), x)
    assert [s.name for s in g.stages] == ["sum", "sum_1", "max"]
    s0, s1, s2 = g.stages
    assert [a.name for a in s0.axes] == ["i0", "i1"] and [a.name for a in s0.reduce_axes] == ["r0"]
    assert [a.name for a in s1.axes] == ["i0"] and [a.name for a in s1.reduce_axes] == ["r0", "r1"]
    assert [a.name for a in s2.axes] == ["i0", "i1", "i2"] and s2.origin == "max"
    assert all(s.is_reduction and s.loc is not None for s in g.stages)


def test_mean_is_sum_then_lazy_division():
    x = rng.random((3, 4))
    g, (m,) = trace_run(lambda x: x.mean(axis=0), x)
    assert [s.name for s in g.stages] == ["sum", "mean"]
    assert not g.stages[1].is_reduction
    np.testing.assert_allclose(m, x.mean(axis=0))


def test_reduction_fuses_lazy_producer():
    x = rng.random((3, 4))
    g, (s,) = trace_run(lambda x: (kd.exp(x) * 2).sum(axis=1), x)
    assert [s.name for s in g.stages] == ["sum"]
    np.testing.assert_allclose(s, (np.exp(x) * 2).sum(axis=1))


def test_softmax():
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    for shape in [(3, 5), (1, 1), (0, 4), (2, 1)]:
        x = rng.standard_normal(shape)
        g, (out,) = trace_run(softmax, x)
        e = np.exp(x - x.max(axis=1, keepdims=True)) if x.size else x
        np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True) if x.size else x)
    assert [s.name for s in g.stages] == ["max", "sum", "divide"]


def test_user_reducer_numpy_style():
    product = kd.reducer(lambda x, y: x * y, identity=1, name="product")
    bigger = kd.reducer(lambda x, y: kd.maximum(x, y), identity=lambda d: -np.inf)
    x = rng.random((3, 4)) + 0.5
    g, (p, q) = trace_run(lambda x: (product(x, axis=1), bigger(x, axis=0, keepdims=True)), x)
    np.testing.assert_allclose(p, x.prod(axis=1))
    np.testing.assert_allclose(q, x.max(axis=0, keepdims=True))
    assert g.stages[0].name == "product" and g.stages[0].body.combiner.name == "product"
