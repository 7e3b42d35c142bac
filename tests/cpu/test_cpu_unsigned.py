"""The unsigned dtypes (uint8, uint16, uint32, uint64) on every executor, against numpy itself.

Every op and every cast to and from them: integers must match numpy exactly
(wrap-around, unsigned division, comparison and conversion), on the numpy
reference backend, the loop-IR interpreter and the cpu backend.
"""
import numpy as np
import pytest

import kdsl as kd

UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
ALL = [np.bool_, np.int8, np.int16, np.int32, np.int64, *UNSIGNED, np.float16, np.float32,
       np.float64]
BACKENDS = ["numpy", "interp", "cpu"]


def _udata(dtype, shape, rng):
    """Random values over the whole range, with zeros and the extremes mixed in."""
    info = np.iinfo(dtype)
    a = rng.integers(0, info.max, size=shape, dtype=dtype, endpoint=True)
    flat = a.reshape(-1)
    flat[: min(4, flat.size)] = [0, 1, info.max, info.max - 1][: min(4, flat.size)]
    return a


@kd.kernel
def ops(A, B):
    return (A + B, A - B, A * B, A // B, A % B, A / B, A ** 3, kd.maximum(A, B), kd.minimum(A, B),
            A & B, A | B, A ^ B, -A, abs(A), ~A, A < B, A <= B, A > B, A >= B, A == B, A != B,
            kd.where(A > B, A, B), A + 7, 200 - A, A // 3, A % 7)


def _ops_ref(A, B):
    with np.errstate(all="ignore"):
        return (A + B, A - B, A * B, A // B, A % B, A / B, A ** 3, np.maximum(A, B),
                np.minimum(A, B), A & B, A | B, A ^ B, -A, abs(A), ~A, A < B, A <= B, A > B,
                A >= B, A == B, A != B, np.where(A > B, A, B), A + 7, 200 - A, A // 3, A % 7)


def _check(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-15, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda d: np.dtype(d).name)
def test_every_op_matches_numpy(dtype, backend, rng):
    a, b = _udata(dtype, (7, 13), rng), _udata(dtype, (7, 13), rng)
    b[1, :4] = 0                                     # division by zero gives 0, like numpy
    if dtype is np.uint8:
        a = a[:, ::-2]                               # a strided, reversed view
        b = b[:, :7]
    for k, (g, w) in enumerate(zip(ops(a, b, backend=backend), _ops_ref(a, b))):
        _check(g, w)


@kd.kernel
def reductions(A):
    return A.sum(axis=1), A.prod(axis=0), A.max(axis=1), A.min(axis=0), A.argmax(axis=1), \
        A.argmin(axis=0), A.mean(axis=1), A.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (40, 33)])
def test_reductions_widen_to_uint64_like_numpy(dtype, shape, backend, rng):
    a = _udata(dtype, shape, rng)
    got = reductions(a, backend=backend)
    with np.errstate(all="ignore"):
        want = (a.sum(axis=1), a.prod(axis=0), a.max(axis=1), a.min(axis=0), a.argmax(axis=1),
                a.argmin(axis=0), a.mean(axis=1), a.sum())
    assert got[0].dtype == np.uint64 and got[7].dtype == np.uint64   # numpy: not int64
    for g, w in zip(got, want):
        _check(np.asarray(g), np.asarray(w))


def _cast_values(src):
    d = np.dtype(src)
    if d.kind == "b":
        return np.array([True, False, True])
    if d.kind == "f":
        v = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, -1.0, 2.5, 100.7, 255.9, 256.0, -300.0, 65535.5,
             7e4, 2.0 ** 31, -2.0 ** 31, 4e9, 2.0 ** 62, 2.0 ** 63, 1.5 * 2.0 ** 63,
             np.inf, -np.inf, np.nan]
        with np.errstate(all="ignore"):
            return np.array(v, dtype=np.float64).astype(src)
    info = np.iinfo(d)
    v = [0, 1, 2, 127, 128, 255, 256, 300, 65535, 65536, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 + 1,
         2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1]
    return np.array([x for x in v + [-x for x in v] if info.min <= x <= info.max], dtype=d)


def _defined(a, dst):
    """Where numpy's float -> int conversion is defined (C's rules: the truncated value fits
    the target), plus the small negative values that numpy wraps into unsigned types on every
    platform kdsl runs on."""
    with np.errstate(all="ignore"):
        t = np.trunc(a.astype(np.float64))
    info = np.iinfo(dst)
    fits = (t >= float(info.min)) & (t <= float(info.max))
    return fits | ((t < 0) & (t >= -2.0 ** 31))


_CASTS = {}


def _cast_kernel(dst):
    if dst not in _CASTS:
        _CASTS[dst] = kd.kernel(lambda A: A.astype(dst))
    return _CASTS[dst]


@pytest.mark.parametrize("src", ALL, ids=lambda d: np.dtype(d).name)
def test_casts_to_and_from_unsigned(src):
    """Every cast into and out of the unsigned types: numpy's result wherever numpy defines
    one, and the same value on every backend everywhere."""
    a = _cast_values(src)
    dsts = UNSIGNED if src not in UNSIGNED else ALL
    for dst in dsts:
        got = {b: _cast_kernel(dst)(a, backend=b) for b in BACKENDS}
        for b in BACKENDS:
            assert got[b].dtype == np.dtype(dst)
            np.testing.assert_array_equal(got[b], got["numpy"], err_msg=f"{b}: {src} -> {dst}")
        with np.errstate(all="ignore"):
            want = a.astype(dst)
        ok = _defined(a, dst) if np.dtype(src).kind == "f" and np.dtype(dst).kind in "iu" else \
            np.ones(a.shape, bool)
        np.testing.assert_array_equal(got["numpy"][ok], want[ok], err_msg=f"{src} -> {dst}")


def test_float_to_uint64_beyond_int64():
    """[2**63, 2**64) converts exactly into uint64 (the cpu backend's fptosi alone saturates);
    beyond, and NaN, give numpy's x86 results (issue 24 item 5: 2**64 -> 0, NaN -> 2**63)."""
    a = np.array([2.0 ** 63, 1.5 * 2.0 ** 63, 2.0 ** 64 - 2048, 2.0 ** 64, 1e30, -1.0, np.nan])
    want = np.array([2 ** 63, 3 * 2 ** 62, 2 ** 64 - 2048, 0, 0, 2 ** 64 - 1, 2 ** 63],
                    dtype=np.uint64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(a.astype(np.uint64), want)    # numpy on this machine
    for b in BACKENDS:
        np.testing.assert_array_equal(_cast_kernel(np.uint64)(a, backend=b), want)
        np.testing.assert_array_equal(_cast_kernel(np.uint64)(a.astype(np.float32), backend=b)[:2],
                                      want[:2])


@kd.kernel
def mixed(A, B, C):
    return A + B, A * C, B - C, A < C, A.astype(kd.float32) + 0.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_signedness_promotes_like_numpy(backend, rng):
    a = _udata(np.uint32, (6,), rng)
    b = rng.integers(-100, 100, 6).astype(np.int8)
    c = _udata(np.uint64, (6,), rng)
    got = mixed(a, b, c, backend=backend)
    with np.errstate(all="ignore"):
        want = (a + b, a * c, b - c, a < c, a.astype(np.float32) + 0.5)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_public_names():
    assert kd.uint16 == np.uint16 and kd.uint32 == np.uint32 and kd.uint64 == np.uint64
    assert kd.TensorSpec((3,), "uint64").dtype is kd.uint64
