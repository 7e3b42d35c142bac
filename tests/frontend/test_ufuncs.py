"""numpy's ufuncs inside kernels (issue 25 item 1): every supported ufunc against numpy on every
backend, edge values included (NaN, +-inf, +-0, denormals, the largest floats, integer
minima/maxima, shifts by negative and too-large amounts, division by zero), numpy's result
dtypes, the refusals, and the docs' coverage table.

Many ufuncs share one kernel per (backend, dtype), so each backend compiles a few kernels.
Floats must be within ``ULP`` of numpy's result in the same dtype (numpy itself runs
different code for arrays and scalars: the interpreter's scalar results differ from numpy's
SIMD loops by an ulp); integers and bools must be equal.
"""
import math
import warnings

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import DTypeError, KernelError
from kdsl.frontend import ufuncs

BACKENDS = ["numpy", "interp", "cpu", "interp-cuda"]

UNARY_FLOAT = ["tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
               "arctanh", "log1p", "expm1", "log2", "log10", "exp2", "cbrt", "rint", "trunc",
               "square", "reciprocal", "sign", "fabs", "deg2rad", "rad2deg", "spacing", "exp",
               "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil", "negative", "absolute",
               "positive", "conjugate", "isinf", "isfinite", "signbit", "isnan"]
BINARY_FLOAT = ["arctan2", "hypot", "fmod", "copysign", "nextafter", "logaddexp", "logaddexp2",
                "heaviside", "fmax", "fmin", "float_power", "add", "subtract", "multiply",
                "divide", "floor_divide", "remainder", "power", "maximum", "minimum",
                "equal", "less", "greater_equal", "logical_and", "logical_xor"]
UNARY_INT = ["invert", "bitwise_count", "square", "sign", "reciprocal", "absolute", "negative",
             "isinf", "isfinite", "signbit", "trunc", "rint", "fabs", "cbrt", "log1p"]
BINARY_INT = ["left_shift", "right_shift", "bitwise_and", "bitwise_or", "bitwise_xor", "fmod",
              "fmax", "fmin", "floor_divide", "remainder", "heaviside", "arctan2", "hypot",
              "copysign", "maximum", "minimum", "logaddexp", "float_power"]
#: the largest difference from numpy allowed, in units in the last place of the result dtype
ULP = {np.float16: 1, np.float32: 4, np.float64: 4}


def _calls(unary, binary):
    def fn(x, y):
        return tuple(getattr(np, k)(x) for k in unary) + tuple(getattr(np, k)(x, y) for k in binary)
    return fn


_KERNELS = {}


def _kernel(unary, binary):
    key = (tuple(unary), tuple(binary))
    if key not in _KERNELS:
        _KERNELS[key] = kd.kernel(_calls(unary, binary))
    return _KERNELS[key]


def _float_inputs(d, rng):
    fi = np.finfo(d)
    edge = [0.0, -0.0, np.inf, -np.inf, np.nan, fi.tiny, -fi.tiny, fi.smallest_subnormal,
            -fi.smallest_subnormal * 3, fi.max, -fi.max, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.5,
            1e-3, 0.999, -0.999, 100.0, -100.0, 1.5, 1000.0, -7.25]
    k = 48 - len(edge)
    rand = rng.choice([-1, 1], k) * 10.0 ** rng.uniform(-3, 3, k)
    x = np.array(edge + list(rand), dtype=d)
    y = np.roll(x, 7)
    y[:6] = [1.0, -1.0, 0.0, -0.0, np.nan, np.inf]      # pairs with 0, +-inf, NaN
    return x, y


def _ulp_diff(g, w, d):
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    both_nan = np.isnan(g64) & np.isnan(w64)
    same = (g64 == w64) | both_nan
    with np.errstate(all="ignore"):
        ulp = np.spacing(np.abs(w).astype(d)).astype(np.float64)
        diff = np.where(same, 0.0, np.abs(g64 - w64) / ulp)
    return np.where(np.isnan(diff), np.inf, diff)


def _check(got, want, names, backend, tag):
    bad = []
    for name, g, w in zip(names, got, want):
        if g.dtype != w.dtype:
            bad.append(f"{name}: dtype {g.dtype} != numpy's {w.dtype}")
            continue
        if w.dtype.kind == "f":
            diff = _ulp_diff(g, w, w.dtype.type)
            if diff.max(initial=0) > ULP[w.dtype.type]:
                k = int(np.argmax(diff))
                bad.append(f"{name}: {diff[k]:.3g} ulp at element {k}: {g[k]!r} vs numpy {w[k]!r}")
        elif not np.array_equal(g, w):
            k = int(np.flatnonzero(g != w)[0])
            bad.append(f"{name}: element {k}: {g[k]!r} vs numpy {w[k]!r}")
    assert not bad, f"{backend} {tag}:\n" + "\n".join(bad)


def _numpy(unary, binary, x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _calls(unary, binary)(x, y)


def _cases(dtypes, simt_dtypes):
    """(backend, dtype) pairs: interp-cuda (whose every run the NVRTC hook also compiles, ~5-15 s
    a kernel this size) takes only ``simt_dtypes`` to keep the file short."""
    return [pytest.param(b, d, id=f"{b}-{np.dtype(d).name}") for b in BACKENDS for d in dtypes
            if b != "interp-cuda" or d in simt_dtypes]


@pytest.mark.parametrize("backend,dtype", _cases([np.float64, np.float32, np.float16],
                                                 [np.float32, np.float16]))
def test_float_ufuncs_match_numpy(backend, dtype, rng):
    x, y = _float_inputs(dtype, rng)
    k = _kernel(UNARY_FLOAT, BINARY_FLOAT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = k(x, y, backend=backend)
    _check(got, _numpy(UNARY_FLOAT, BINARY_FLOAT, x, y), UNARY_FLOAT + BINARY_FLOAT, backend,
           np.dtype(dtype).name)


def _int_inputs(d, rng):
    info = np.iinfo(d)
    base = [0, 1, 2, 7, 63, 64, 65, 100, 3, 5]
    if info.min < 0:
        base += [-1, -2, -7, -65]
    x = np.array(base + [0, 0, 0, 0] + list(rng.integers(info.min, info.max, 30, dtype=d,
                                                          endpoint=True)), dtype=d)
    x[len(base):len(base) + 4] = [info.min, info.min + 1, info.max, info.max - 1]
    # shift amounts from -3 to 70 (wrapped into unsigned types), zeros for division
    y = rng.integers(-3, 71, x.size).astype(d)      # (negative amounts wrap in unsigned types)
    y[:6] = [0, 0, 1, 8 * np.dtype(d).itemsize, 1, 0]
    if info.min < 0:
        y[6:9] = [-1, -1, -1]
        x[6] = info.min
    return x, y


INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("backend,dtype", _cases(INT_TYPES, [np.int8, np.uint32, np.int64]))
def test_integer_ufuncs_match_numpy(backend, dtype, rng):
    x, y = _int_inputs(dtype, rng)
    unary = [u for u in UNARY_INT if not (u == "negative" and np.dtype(dtype).kind == "u")]
    got = _kernel(unary, BINARY_INT)(x, y, backend=backend)
    _check(got, _numpy(unary, BINARY_INT, x, y), unary + BINARY_INT, backend,
           np.dtype(dtype).name)


@kd.kernel
def operators(x, y):
    return x << y, x >> y, x << 3, 100 >> y, x & y, x | 5, x ^ y, ~x, x >> 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_bit_operators(backend, rng):
    for d in (np.int8, np.uint32, np.int64):
        x, y = _int_inputs(d, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = (x << y, x >> y, x << 3, 100 >> y, x & y, x | 5, x ^ y, ~x, x >> 1)
        got = operators(x, y, backend=backend)
        _check(got, want, ["<<", ">>", "<< 3", "100 >>", "&", "| 5", "^", "~", ">> 1"], backend,
               np.dtype(d).name)
    b = np.array([True, False, True, False])
    c = np.array([True, True, False, False])
    got = operators(b, c, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = (b << c, b >> c, b << 3, 100 >> c, b & c, b | 5, b ^ c, ~b, b >> 1)
    _check(got, want, ["<<", ">>", "<< 3", "100 >>", "&", "| 5", "^", "~", ">> 1"], backend, "bool")


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_result_dtypes_follow_numpy(dtype):
    """np.tan(int8) is float16, np.tan(int32) float64, np.left_shift(bool, bool) int8..."""
    unary = [u for u in UNARY_FLOAT if u not in ("negative", "positive", "sign")
             or dtype is not np.bool_]
    binary = [b for b in BINARY_FLOAT if b not in ("subtract",) or dtype is not np.bool_]
    x = np.array([0, 1, 1, 0], dtype=dtype)
    y = np.array([1, 1, 0, 0], dtype=dtype)
    got = _kernel(unary, binary)(x, y, backend="numpy")
    _check(got, _numpy(unary, binary, x, y), unary + binary, "numpy", np.dtype(dtype).name)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_strided_and_empty_inputs(backend, rng):
    names = ["tan", "arcsinh", "log1p", "cbrt", "rint", "sign"]
    binary = ["arctan2", "hypot", "nextafter", "logaddexp", "fmax"]
    x, y = _float_inputs(np.float32, rng)
    k = _kernel(names, binary)
    got = k(x[::3], y[1::3], backend=backend)
    _check(got, _numpy(names, binary, x[::3], y[1::3]), names + binary, backend, "strided")
    got = k(x[:0], y[:0], backend=backend)
    assert all(g.shape == (0,) for g in got)


@kd.kernel
def scalar_args(x, s):
    return np.left_shift(x, s), np.arctan2(x.astype(kd.float32), s), kd.square(s) + x


def test_kd_names_and_scalars():
    x = np.arange(-4, 4, dtype=np.int32)
    got = scalar_args(x, 3, backend="cpu")
    np.testing.assert_array_equal(got[0], np.left_shift(x, 3))
    np.testing.assert_allclose(got[1], np.arctan2(x.astype(np.float32), 3), rtol=1e-6)
    np.testing.assert_array_equal(got[2], 9 + x)
    for name in ufuncs.PUBLIC:
        assert callable(getattr(kd, name)), name
    assert kd.abs is not None and kd.bitwise_left_shift is not None


def test_divmod_and_modf_give_two_arrays():
    @kd.kernel
    def k(x, y):
        q, r = np.divmod(x, y)
        f, w = np.modf(x)
        return q, r, f, w
    x = np.array([7.5, -7.5, np.inf, -0.0, 3.0])
    y = np.array([2.0, 2.0, 3.0, 1.0, -0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.divmod(x, y) + np.modf(x)
        for b in ("numpy", "cpu"):
            _check(k(x, y, backend=b), want, ["div", "mod", "frac", "whole"], b, "float64")


def test_refused_ufuncs_say_why():
    @kd.kernel
    def k(x):
        return np.isnat(x)
    with pytest.raises(KernelError, match="np.isnat is not supported") as e:
        k(np.arange(4), backend="numpy")
    assert "datetime64" in str(e.value)


def test_refused_keywords_and_methods():
    @kd.kernel
    def with_where(x):
        return np.sqrt(x, where=x > 0)

    @kd.kernel
    def outer(x):
        return np.add.outer(x, x)

    @kd.kernel
    def float_bits(x):
        return np.left_shift(x, 1)

    x = np.ones(4)
    with pytest.raises(KernelError, match="where="):
        with_where(x, backend="numpy")
    with pytest.raises(KernelError, match="outer"):
        outer(x, backend="numpy")
    with pytest.raises(DTypeError):
        float_bits(x, backend="numpy")


def test_every_numpy_ufunc_is_classified():
    """Every ufunc numpy has is supported or refused with a reason (the docs' table)."""
    rows = ufuncs.coverage()
    names = {r[0] for r in rows}
    assert {u.__name__ for u in vars(np).values() if isinstance(u, np.ufunc)} == names
    for name, _aliases, status, note in rows:
        assert status in ("supported", "refused")
        assert status == "supported" or note, name


def test_docs_table_is_current():
    import os
    page = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "kernels.md")
    with open(page) as f:
        text = f.read()
    assert ufuncs.coverage_markdown() in text, \
        "docs/kernels.md's ufunc table is stale: paste kdsl.frontend.ufuncs.coverage_markdown()"


# ------------------------------------------------------------------ shapes in float math
@kd.kernel
def scaled_symbolic(q):
    return q * (1 / math.sqrt(q.shape[-1]))


@kd.kernel(specialize=True)
def scaled_static(q):
    return q * (1 / math.sqrt(q.shape[-1])) + math.log(q.shape[0]) + float(q.shape[0])


@kd.kernel
def scaled_weak(q):
    return q * q.shape[-1] ** -0.5


@kd.kernel
def unified_later(a):
    n = a.shape[0]                                  # symbolic here...
    b = a + kd.compute((4,), lambda i: 1.0)         # ...and 4 once broadcasting unifies it
    return b * math.sqrt(n), b * int(n)


def test_shape_math():
    """issue 25 item 6: math.sqrt/math.log/float()/int() of a size."""
    q = np.full((3, 16), 2.0, np.float16)
    with pytest.raises(KernelError, match="only known when the kernel is called") as e:
        scaled_symbolic(q, backend="numpy")
    assert "d ** -0.5" in str(e.value) and "kd.sqrt" in str(e.value)
    got = scaled_static(q, backend="numpy")
    np.testing.assert_allclose(got, q / 4 + np.log(3) + 3, rtol=1e-3)
    weak = scaled_weak(q, backend="cpu")
    assert weak.dtype == np.float16            # np.sqrt(d) would make it float64
    np.testing.assert_array_equal(weak, q * np.float16(0.25))
    a = np.arange(4.0)
    s, i = unified_later(a, backend="interp")
    np.testing.assert_allclose(s, (a + 1) * 2.0)
    np.testing.assert_array_equal(i, (a + 1) * 4)


@kd.kernel
def bf16_calls(x, y):
    return (np.tan(x), np.arctan2(x, y), np.logaddexp(x, y), np.sign(x), np.isinf(x),
            np.fmod(x, y), np.copysign(x, y), np.rint(x), np.cbrt(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16(backend):
    """bfloat16 computes in float32 and rounds once: numpy's float32 result, rounded."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = ml_dtypes.bfloat16
    x = np.array([0.5, -1.5, 2.0, np.inf, np.nan, -0.0, 3.25], np.float32)
    y = np.array([1.0, 2.0, -3.0, 1.0, 1.0, 2.0, -1.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = (np.tan(x), np.arctan2(x, y), np.logaddexp(x, y), np.sign(x), np.isinf(x),
                np.fmod(x, y), np.copysign(x, y), np.rint(x), np.cbrt(x))
    got = bf16_calls(x.astype(bf), y.astype(bf), backend=backend)
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.astype(bf).astype(np.float32) if w.dtype.kind == "f" else w
        np.testing.assert_array_equal(np.asarray(g, np.float32 if w.dtype.kind == "f" else bool), w,
                                      err_msg=f"output {k}")
    with pytest.raises(DTypeError):
        operators(x.astype(bf), y.astype(bf), backend="numpy")


@kd.kernel
def python_scalars(x):
    return np.hypot(x, 2.0), np.copysign(2, x), kd.tan(0.5) + x, np.heaviside(x, 0.5), kd.fmax(x, 3)


def test_python_scalar_operands():
    x = np.array([-1.0, 0.0, 2.0, np.nan], np.float32)
    got = python_scalars(x, backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = (np.hypot(x, 2.0), np.copysign(2, x), np.tan(0.5) + x, np.heaviside(x, 0.5), np.fmax(x, 3))
    for k in range(5):
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6)
    xi = np.arange(5, dtype=np.int16)

    @kd.kernel
    def shifted(x):
        return np.left_shift(1, x), np.right_shift(x, 1), kd.bitwise_and(x, 6)
    got = shifted(xi, backend="interp")
    for g, w in zip(got, (np.left_shift(1, xi), np.right_shift(xi, 1), np.bitwise_and(xi, 6))):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@kd.kernel
def frexp_ldexp(x, i):
    m, e = np.frexp(x)
    return m, e, np.ldexp(x, i), np.ldexp(m, e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_frexp_and_ldexp_are_exact(backend, rng):
    """Built on the bits: equal to numpy, signs of zero included, subnormals rounded once."""
    for d in (np.float64, np.float32, np.float16):
        fi = np.finfo(d)
        x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.smallest_subnormal,
                      -fi.smallest_subnormal * 3, fi.tiny, fi.max, -3.0, 1.5, 0.75, 1e-3, 7.0,
                      -2.5, 1.0, 1.0, 1.0, 3.0, -5.0], d)
        i = np.array([3, -3, 5, 1, 2, 0, 10, -1, 1, -2000, 2000, -5, 7, -1000, -20, -1074,
                      -1075, -1076, -149, -16], np.int64)
        n = 12 if backend == "interp-cuda" else 60
        x = np.concatenate([x, (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(d)])
        i = np.concatenate([i, rng.integers(-40, 40, n)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.frexp(x) + (np.ldexp(x, i), np.ldexp(*np.frexp(x)))
        got = frexp_ldexp(x, i, backend=backend)
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype, (d, k)
            assert np.array_equal(g, w, equal_nan=True), (d, k, g, w)
            assert np.array_equal(np.signbit(g), np.signbit(w)), (d, k)
