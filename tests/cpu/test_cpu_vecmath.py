"""The cpu backend's vectorisable math (kdsl_cpu/codegen/vecmath.py): accuracy and vectorisation.

Each function runs over values across its domain (several magnitude ranges,
near 0, near the overflow/underflow thresholds and the points where an
implementation switches method, huge arguments of sin/cos, denormals, inf,
nan, +-0) and is compared, in units in the last place, with a reference
rounded to the dtype: numpy in float64 for float32/float16, numpy in long
double for float64 (so the reference's own error does not count where long
double is wider; erf has math.erf in float64 only).
"""
import math
import re

import numpy as np
import pytest

import kdsl as kd

FLOATS = [np.float16, np.float32, np.float64]
WIDE = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant
#: max ulp distance from the correctly rounded result (float16 computes in float32 and rounds once)
MAX_ULP = {np.float16: 1, np.float32: 2, np.float64: 2 if WIDE else 3}
_ERF = np.frompyfunc(math.erf, 1, 1)
#: function -> (kernel output index, reference in numpy)
FUNCS = {"exp": (0, np.exp), "log": (1, np.log), "tanh": (2, np.tanh),
         "sigmoid": (3, lambda x: 1 / (1 + np.exp(-x))),
         "erf": (4, lambda x: _ERF(x.astype(np.float64)).astype(np.float64)),
         "sin": (5, np.sin), "cos": (6, np.cos)}


@kd.kernel
def mathfns(A):
    return (kd.exp(A), kd.log(A), kd.tanh(A), kd.sigmoid(A), kd.erf(A), kd.sin(A),
            kd.cos(A))


@kd.kernel
def exp_only(A):
    return kd.exp(A)


_UINT = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}


def _inputs(dtype):
    """Values of ``dtype`` across the domains of FUNCS, special values last."""
    fi = np.finfo(dtype)
    rng = np.random.default_rng(7)
    n = 4000 if dtype is np.float16 else 20000
    sign = rng.choice([-1.0, 1.0], n)
    big, tiny = float(fi.max), float(fi.smallest_subnormal)
    parts = [rng.uniform(-1, 1, n), rng.uniform(-10, 10, n), rng.uniform(-120, 120, n),
             rng.uniform(-800, 800, n),
             sign * np.exp(rng.uniform(np.log(tiny), np.log(big), n)),      # every magnitude
             sign * rng.uniform(0, 1e-3, n),                                # near 0
             1 + rng.uniform(-1e-3, 1e-3, n),                               # log near 1
             sign * rng.uniform(0.6, 0.65, n),                              # tanh's switch-over
             sign * rng.uniform(0.85, 0.9, n), sign * rng.uniform(3.5, 6.5, n),  # erf's
             rng.integers(-10**7, 10**7, n) * (np.pi / 2) + rng.uniform(-1e-5, 1e-5, n),
             [6381956970095103.0 * 2.0 ** 797, 1e22],     # double's hardest sin/cos reductions
             rng.uniform(0, 1, n) * float(fi.tiny)]                         # denormals
    for edge in (np.log(big), np.log(float(fi.tiny)), np.log(tiny)):       # exp: inf, denormals, 0
        parts.append(edge + rng.uniform(-2, 2, n))
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.concatenate(parts).astype(dtype)
        bits = rng.integers(0, np.iinfo(_UINT[dtype]).max, n, dtype=np.uint64, endpoint=True)
        x = np.concatenate([x, bits.astype(_UINT[dtype]).view(dtype)])    # any bit pattern
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, float(fi.tiny), big, -big, 1.0,
               -1.0]
    return np.concatenate([x[np.isfinite(x)], np.array(special, dtype)])


def _reference(f, x, dtype):
    wide = np.longdouble if dtype is np.float64 and WIDE else np.float64
    with np.errstate(all="ignore"):
        return f(x.astype(wide)).astype(dtype)


def _ulp_distance(got, want):
    """How many representable values lie between ``got`` and ``want`` (0 for two NaNs)."""
    it = {2: np.int16, 4: np.int32, 8: np.int64}[got.dtype.itemsize]

    def ordered(v):      # monotonic map of floats to integers; +0 and -0 both map to 0
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, np.int64(np.iinfo(it).min) - i, i)
    d = np.abs(ordered(got) - ordered(want)).astype(np.float64)
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    d[nan_g & nan_w] = 0
    d[nan_g != nan_w] = np.inf
    return d


_RUNS = {}


def _run(dtype, x):
    """The kernel's outputs for ``x`` (one compile and run per dtype for the whole module)."""
    key = np.dtype(dtype).name
    if key not in _RUNS:
        with np.errstate(all="ignore"):
            _RUNS[key] = mathfns(x, backend="cpu")
    return _RUNS[key]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_max_ulp_error(name, dtype):
    x = _inputs(dtype)
    got = _run(dtype, x)[FUNCS[name][0]]
    want = _reference(FUNCS[name][1], x, dtype)
    assert got.dtype == want.dtype
    d = _ulp_distance(got, want)
    k = int(np.argmax(d))
    assert d[k] <= MAX_ULP[dtype], (f"{name}({x[k]!r}) = {got[k]!r}, want {want[k]!r}: "
                                    f"{d[k]} ulp")
    zero = want == 0          # the sign of a zero result is numpy's too
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_special_values(dtype):
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, inf, -inf, nan, -1.0, 1.0], dtype)
    exp, log, tanh, sig, erf, sin, cos = mathfns(x, backend="cpu")
    np.testing.assert_array_equal(exp[:5], np.array([1, 1, inf, 0, nan], dtype))
    np.testing.assert_array_equal(log[:5], np.array([-inf, -inf, inf, nan, nan], dtype))
    assert np.isnan(log[5]) and log[6] == 0
    np.testing.assert_array_equal(tanh[:5], np.array([0, -0.0, 1, -1, nan], dtype))
    assert np.signbit(tanh[1]) and not np.signbit(tanh[0])
    np.testing.assert_array_equal(sig[:5], np.array([0.5, 0.5, 1, 0, nan], dtype))
    np.testing.assert_array_equal(erf[:5], np.array([0, -0.0, 1, -1, nan], dtype))
    assert np.signbit(erf[1]) and not np.signbit(erf[0])
    np.testing.assert_array_equal(sin[:5], np.array([0, -0.0, nan, nan, nan], dtype))
    assert np.signbit(sin[1]) and not np.signbit(sin[0])
    np.testing.assert_array_equal(cos[:5], np.array([1, 1, nan, nan, nan], dtype))


def _has_avx2() -> bool:
    from kdsl_cpu import jit
    features = jit.host()[2]
    return "+avx2" in features.split(",")


def test_exp_loop_is_vectorized():
    if not _has_avx2():
        pytest.skip("this host has no AVX2: LLVM may rightly keep a narrow or scalar loop, so "
                    "there is no vector width to check for")
    from kdsl_cpu import jit
    a = np.linspace(-5, 5, 1000, dtype=np.float32)
    asm = jit.assembly(exp_only.source(a, backend="cpu"))
    assert not re.search(r"\bexpf\b", asm), "the loop still calls libm's expf"
    # packed single-precision fma on 256- or 512-bit registers: the polynomial, vectorised
    assert re.search(r"vfmadd\w*ps\s+%[yz]mm", asm), "no vector fma in the exp loop"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_no_libm_calls_left(dtype):
    from kdsl_cpu import jit
    asm = jit.assembly(mathfns.source(np.ones(64, dtype), backend="cpu"))
    f = "f" if dtype is np.float32 else ""
    called = [m for m in ("exp", "log", "tanh", "erf", "sin", "cos")
              if re.search(rf"\b{m}{f}\b", asm)]
    assert not called, f"libm still called for {called}"
