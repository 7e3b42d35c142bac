"""np.gcd / np.lcm inside kernels, and the out= / where= / dtype= keywords of ufuncs
(issue 25 item 1): numpy in exact integers (and float64) is the oracle, edge values included
(0, the type's minimum, Fibonacci pairs: Euclid's worst case), on numpy, interp, cpu and, on a
tiny shape, interp-cuda."""
import warnings

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import DTypeError, KernelError, ShapeError
from kdsl.frontend import ufunc_gcd

BACKENDS = ["numpy", "interp", "cpu"]


@kd.kernel
def gcd_lcm(a, b):
    return np.gcd(a, b), kd.lcm(a, b)


def _numpy(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.gcd(a, b), np.lcm(a, b)


def _edge(d, rng, k=40):
    info = np.iinfo(d)
    fib = [1, 2]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    edge = [0, 1, info.max, info.min, info.min + 1, fib[-1], fib[-2], 12, 18, 7]
    edge += [-v for v in (1, 12, fib[-1]) if info.min < 0]
    rand = rng.integers(info.min, info.max, k - len(edge), endpoint=True)
    return np.array(edge + list(rand)).astype(d)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
def test_gcd_lcm_match_numpy(backend, dtype, rng):
    x = _edge(dtype, rng)
    y = np.roll(x, 3)
    y[:4] = [0, x[0], 1, x[2]]
    for a, b in ((x, y), (x[::2], y[1::2]), (x[:1], y[:0])):
        got = gcd_lcm(a, b, backend=backend)
        for g, w, what in zip(got, _numpy(a, b), ("gcd", "lcm")):
            assert g.dtype == w.dtype and np.array_equal(g, w), (what, a, b, g, w)


def test_gcd_broadcasts_and_mixes_types(rng):
    a = rng.integers(-50, 50, (3, 1)).astype(np.int16)
    b = rng.integers(0, 200, (4,)).astype(np.uint8)
    for be in ("numpy", "cpu"):
        g, lcm = gcd_lcm(a, b, backend=be)
        assert g.dtype == np.gcd(a, b).dtype and np.array_equal(g, np.gcd(a, b))
        assert np.array_equal(lcm, np.lcm(a, b))


def test_gcd_every_uint8_pair():
    """Every pair of uint8 values: Euclid's fixed trip count covers all of them."""
    v = np.arange(256, dtype=np.uint8)
    a, b = np.meshgrid(v, v)
    g, lcm = gcd_lcm(a, b, backend="cpu")
    assert np.array_equal(g, np.gcd(a, b)) and np.array_equal(lcm, np.lcm(a, b))


def test_gcd_steps_bound():
    """The trip count covers Euclid's worst case (consecutive Fibonacci numbers) per width."""
    import math
    for bits in (8, 16, 32, 64):
        f = [1, 1]
        while f[-1] < 2 ** bits:
            f.append(f[-1] + f[-2])
        a, b, terms = f[-2], f[-3], 2
        while b:
            a, b, terms = b, a % b, terms + 1
        assert ufunc_gcd.steps(bits) >= terms + 1 and math.gcd(f[-2], f[-3]) == 1


def test_gcd_interp_cuda_tiny():
    x = np.array([12, -18, 0, -128], np.int8)
    y = np.array([18, 12, 0, 0], np.int8)
    got = gcd_lcm(x, y, backend="interp-cuda")
    for g, w in zip(got, _numpy(x, y)):
        assert np.array_equal(g, w)


@pytest.mark.parametrize("args", [(np.ones(3), np.ones(3)), (np.ones(3, bool), np.ones(3, bool))])
def test_gcd_refuses_floats_and_bools(args):
    with pytest.raises(DTypeError, match="np.gcd is not supported"):
        gcd_lcm(*args, backend="numpy")


# ------------------------------------------------------------------ out= / where= / dtype=
@kd.kernel
def safe_divide(a, b):
    r = np.full_like(a, -1.0)
    np.divide(a, b, out=r, where=b != 0)
    return r


@kd.kernel
def chained(x):
    t = x * 2
    np.exp(t, out=t)               # out= an input of the call: reads the old t
    np.add(t, 1, out=t)
    q, r = np.empty_like(x), np.empty_like(x)
    np.divmod(x, 3, out=(q, r))
    return t, q, r


@kd.kernel
def into_int(x):
    r = np.zeros_like(x, dtype=np.int16)
    np.floor_divide(x, 3, out=r, where=x > 0)    # int64 -> int16: same kind, wraps as numpy
    return r


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_and_where(backend, rng):
    a = rng.uniform(-4, 4, 9)
    b = np.where(rng.random(9) < 0.4, 0.0, rng.uniform(-2, 2, 9))
    want = np.full_like(a, -1.0)
    np.divide(a, b, out=want, where=b != 0)
    assert np.array_equal(safe_divide(a, b, backend=backend), want)
    x = rng.uniform(-2, 2, (7, 3))[:, 1]                # a strided view
    t, q, r = chained(x, backend=backend)
    np.testing.assert_allclose(t, np.exp(x * 2) + 1, rtol=1e-14)
    assert np.array_equal(q, x // 3) and np.array_equal(r, x % 3)
    i = rng.integers(-100000, 100000, 11)
    w = np.zeros(11, np.int16)
    np.floor_divide(i, 3, out=w, where=i > 0)
    got = into_int(i, backend=backend)
    assert got.dtype == np.int16 and np.array_equal(got, w)
    assert safe_divide(a[:0], b[:0], backend=backend).shape == (0,)


def _refusal(fn, x, err, match):
    with pytest.raises(err, match=match) as e:
        kd.kernel(fn)(x, backend="numpy")
    assert e.value.hint and e.value.loc is not None and "test_ufunc_keywords" in e.value.loc.file


def test_out_refusals():
    x = np.ones(4)

    def argument(x):
        np.add(x, 1, out=x)
        return x

    def view(x):
        y = np.zeros_like(x)[1:]
        np.add(x[1:], 1, out=y)
        return y

    def used_before(x):
        c = np.zeros_like(x)
        d = c * 2
        np.add(x, 1, out=c)
        return d

    def bad_cast(x):
        r = np.zeros_like(x, dtype=np.int32)
        np.add(x, 1, out=r)
        return r

    def bad_shape(x):
        r = kd.zeros(1)
        np.add(x, 1, out=r)
        return r

    def where_alone(x):
        return np.sqrt(x, where=x > 0)

    def dtype_cast(x):
        return np.add(x, 1, dtype=np.int32)

    _refusal(argument, x, KernelError, "kernel argument")
    _refusal(view, x, KernelError, "view")
    _refusal(used_before, x, KernelError, "already uses it")
    _refusal(bad_cast, x, DTypeError, "same_kind")
    _refusal(bad_shape, x, ShapeError, "does not fit")
    _refusal(where_alone, x, KernelError, "uninitialised")
    _refusal(dtype_cast, x, DTypeError, "same_kind")


# ------------------------------------------------------------------ np.<ufunc>.accumulate
@kd.kernel
def accumulates(x, b):
    return (np.add.accumulate(x), np.multiply.accumulate(x, axis=1), np.maximum.accumulate(x, 1),
            np.minimum.accumulate(x), np.add.accumulate(b), np.add.accumulate(x, dtype=np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ufunc_accumulate_is_a_scan(backend, rng):
    """``np.<ufunc>.accumulate`` of add/multiply/maximum/minimum: numpy's scans (axis 0 by
    default, numpy's result dtypes: small integers widen, bools count), NaN propagating."""
    x = rng.integers(-3, 4, (5, 4)).astype(np.int8)
    b = rng.random((5, 4)) < 0.5
    f = rng.uniform(-2, 2, (6, 3))
    f[2, 1] = np.nan
    for arr in (x, f[::2], x[:0]):
        got = accumulates(arr, b[:arr.shape[0]] if arr.shape[0] else b[:0], backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = (np.add.accumulate(arr), np.multiply.accumulate(arr, axis=1),
                    np.maximum.accumulate(arr, 1), np.minimum.accumulate(arr),
                    np.add.accumulate(b[:arr.shape[0]]), np.add.accumulate(arr, dtype=np.float32))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_gcd_inside_a_compute_body_is_refused_with_the_whole_array_spelling():
    @kd.kernel
    def inside(a):
        return kd.compute(a.shape, lambda i: np.gcd(a[i], 6))

    @kd.kernel
    def outside(a):
        g = np.gcd(a, 6)
        return kd.compute(a.shape, lambda i: g[i] * 2)
    a = np.array([4, 9, 0, -12])
    with pytest.raises(KernelError, match="inside a kd.compute body") as e:
        inside(a, backend="numpy")
    assert "outside kd.compute" in e.value.hint
    assert outside(a, backend="numpy").tolist() == (np.gcd(a, 6) * 2).tolist()
