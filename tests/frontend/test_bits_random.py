"""Bits and randomness (issue 25 item 5) and float -> int casts (issue 24 item 5).

- ``x.view(dtype)`` bitcasts, bit for bit, on every backend;
- ``astype`` of NaN, +-inf and out-of-range floats to every integer type gives numpy's x86
  result (numpy on this machine is the oracle; its contiguous ``astype``);
- ``kd.random``: Philox-4x32-10 bits equal a pure-numpy reference (itself checked against
  Random123's known-answer vectors) on every backend; uniform/normal floats from them.
"""
import math
import warnings

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import DTypeError, KernelError
from kdsl.random import philox_numpy

BACKENDS = ["numpy", "interp", "cpu", "interp-cuda"]
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


# ------------------------------------------------------------------ view
@kd.kernel
def views(x, y, h, i):
    return (x.view(np.int32), x.view(kd.uint32), y.view(np.int64), y.view(np.uint64),
            h.view(np.int16), i.view(np.float32), (x.view(np.int32) >> 23) & 0xFF,
            (i + 1).view(kd.float32), h.view(np.uint16).view(np.float16))


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_is_a_bitcast(backend, rng):
    x = np.concatenate([np.array([1.0, -0.0, np.nan, -np.nan, np.inf, -2.5, 1e-40, 3.4e38],
                                 np.float32), rng.standard_normal(8).astype(np.float32)])
    y, h = x.astype(np.float64), x.astype(np.float16)
    i = rng.integers(-2 ** 31, 2 ** 31, x.size).astype(np.int32)
    i[:3] = [0x7F800000, 0x3F800000, -1]
    want = (x.view(np.int32), x.view(np.uint32), y.view(np.int64), y.view(np.uint64),
            h.view(np.int16), i.view(np.float32), (x.view(np.int32) >> 23) & 0xFF,
            (i + 1).view(np.float32), h)
    got = views(x, y, h, i, backend=backend)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, k
        assert g.tobytes() == w.tobytes(), f"output {k}: {g} vs {w}"


def test_view_refusals():
    @kd.kernel
    def wider(x):
        return x.view(np.int64)

    @kd.kernel
    def boolean(x):
        return x.view(np.bool_)

    with pytest.raises(DTypeError, match="item size"):
        wider(np.ones(3, np.float32), backend="numpy")
    with pytest.raises(DTypeError, match="bool"):
        boolean(np.ones(3, np.int8), backend="numpy")


# ------------------------------------------------------------------ astype
@kd.kernel
def to_ints(x):
    return tuple(x.astype(d) for d in INTS)


_SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 1e20, -1e20, 3e9, -3e9, 2.0 ** 31, -2.0 ** 31 - 1,
            2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 1e19, -1.5, 300.7, -300.7, 131072.0,
            4294967301.0, -4294967301.0, 2.0 ** 32 - 1, 0.0, -0.0, 127.9, -129.2, 65535.5]


@pytest.mark.parametrize("src", [np.float64, np.float32, np.float16], ids=lambda d: d.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_astype_of_special_floats_is_numpys(backend, src):
    """NaN, +-inf and out-of-range values: numpy's (x86) integers, not saturation."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.array(_SPECIAL, src)
        want = [x.astype(d) for d in INTS]
    got = to_ints(x, backend=backend)
    for d, g, w in zip(INTS, got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"{np.dtype(src).name} -> {d} on {backend}")


def test_astype_reproducer_of_issue_24():
    @kd.kernel
    def k(x):
        return x.astype(kd.int32)
    x = np.array([np.nan, np.inf, -np.inf, 1e20], np.float32)
    for b in ("numpy", "interp", "cpu"):
        np.testing.assert_array_equal(k(x, backend=b), np.full(4, -2 ** 31, np.int32))


# ------------------------------------------------------------------ random
def test_reference_philox_matches_random123_known_answers():
    """Random123's kat_vectors for philox4x32_10."""
    cases = [((0, 0), (0, 0, 0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
             ((0xffffffff, 0xffffffff), (0xffffffff,) * 4,
              (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
             ((0xa4093822, 0x299f31d0), (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
              (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for key, ctr, want in cases:
        assert tuple(int(v) for v in philox_numpy(*key, *ctr)) == want


@kd.kernel
def philox_block(c0, c1, c2, c3, seed):
    return kd.random.philox(seed, c0, c1, c2, c3)


@kd.kernel
def streams(off, seed):
    return kd.random.randint4x(seed, off) + (
        kd.random.randint(seed, off), kd.random.uniform(seed, off),
        kd.random.uniform(seed, off, kd.float64), kd.random.uniform(seed, off, kd.float16),
        kd.random.normal(seed, off), kd.random.normal(seed, off, kd.float64))


def _uniform_ref(w, bits, d):
    return ((w >> np.uint32(32 - bits)).astype(np.float64) * 2.0 ** -bits).astype(d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_bits_equal_the_reference_everywhere(backend, rng):
    # the known answers through the kernel, keys and counters as arrays and scalars
    c = np.array([[0, 0xffffffff, 0x243f6a88], [0, 0xffffffff, 0x85a308d3],
                  [0, 0xffffffff, 0x13198a2e], [0, 0xffffffff, 0x03707344]], np.uint32)
    got = philox_block(*c, 0, backend=backend)
    assert [int(g[0]) for g in got] == [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    seed = int(rng.integers(0, 2 ** 63))
    off = np.concatenate([np.arange(8), rng.integers(0, 2 ** 40, 24)]).astype(np.int64)
    w = philox_numpy(seed & 0xFFFFFFFF, seed >> 32, off & 0xFFFFFFFF, off >> 32)
    got = streams(off, seed, backend=backend)
    for k in range(4):
        np.testing.assert_array_equal(got[k], w[k], err_msg=f"word {k}")
    np.testing.assert_array_equal(got[4], w[0])
    np.testing.assert_array_equal(got[5], _uniform_ref(w[0], 24, np.float32))
    top53 = (w[0].astype(np.uint64) << np.uint64(21)) | (w[1] >> np.uint32(11)).astype(np.uint64)
    np.testing.assert_array_equal(got[6], top53.astype(np.float64) * 2.0 ** -53)
    np.testing.assert_array_equal(got[7], _uniform_ref(w[0], 11, np.float16))
    u1 = ((w[0] >> np.uint32(8)).astype(np.float64) + 1) * 2.0 ** -24
    u2 = (w[1] >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    z = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    np.testing.assert_allclose(got[8], z, rtol=2e-6, atol=2e-6)
    assert got[8].dtype == np.float32 and got[9].dtype == np.float64
    assert np.all(np.isfinite(got[9]))


@kd.kernel
def dropout(x, seed, p):
    keep = kd.random.rand(seed, x.shape) >= p
    return kd.where(keep, x / (1 - p), 0.0)


def test_dropout_and_distribution():
    x = np.ones((64, 96), np.float32)
    y = dropout(x, 1234, 0.25, backend="cpu")
    np.testing.assert_array_equal(y, dropout(x, 1234, 0.25, backend="numpy"))
    kept = np.count_nonzero(y) / y.size
    assert abs(kept - 0.75) < 4 * math.sqrt(0.75 * 0.25 / y.size)       # 4 sigma
    assert np.all((y == 0) | np.isclose(y, 1 / 0.75))
    assert not np.array_equal(y, dropout(x, 1235, 0.25, backend="cpu"))  # another seed

    @kd.kernel
    def normals(seed):
        return kd.random.randn(seed, (200, 50), kd.float64)
    z = normals(7, backend="cpu")
    assert abs(z.mean()) < 4 / math.sqrt(z.size) and abs(z.std() - 1) < 0.03


def test_random_refusals():
    @kd.kernel
    def float_offsets(x):
        return kd.random.uniform(1, x)

    @kd.kernel
    def int_dtype(x):
        return kd.random.uniform(1, x, kd.int32)

    with pytest.raises(KernelError, match="integers"):
        float_offsets(np.ones(3), backend="numpy")
    with pytest.raises(KernelError, match="randint"):
        int_dtype(np.arange(3), backend="numpy")
