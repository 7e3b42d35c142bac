"""Issue 27's kernels on a device (mark ``cuda``; skipped without one): 16-bit vector loads
and stores (two halves a 32-bit word: lane order, odd sizes and offsets that take the scalar
fallback), the decode GEMM (split-K partials), the shared-tile transpose, RMSNorm in float16,
against numpy in float64.

    python3 -m pytest -q -m cuda tests/cuda_schedules/test_issue27_device.py
"""
import numpy as np
import pytest

import kdsl as kd


pytestmark = pytest.mark.cuda     # (tests/conftest.py skips it where there is no device)


def bias_gelu_res(x, b, r):
    y = (x + b).astype(np.float32)
    g = 0.5 * y * (1.0 + np.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))
    return (g + r.astype(np.float32)).astype(np.float16)


def rmsnorm(x, w):
    x32 = x.astype(np.float32)
    inv = 1.0 / np.sqrt((x32 * x32).mean(axis=1, keepdims=True) + 1e-6)
    return (x32 * inv * w.astype(np.float32)).astype(np.float16)


@pytest.mark.parametrize("n", [4096, 4099, 1, 0])
def test_half_vectors_lane_order(n):
    """x * 2 + y: every lane of a uint4 in its place (distinct values), the tail and misaligned
    views (offset 1 element) through the scalar fallback."""
    dtype = np.float16
    k = kd.kernel(lambda x, y: x * 2 + y)
    base = (np.arange(n + 1) % 1000).astype(dtype)
    other = (np.arange(n + 1) % 7).astype(dtype)
    for off in (0, 1):
        x, y = base[off:off + n - off], other[off:off + n - off]
        got = k(x, y, backend="cuda")
        np.testing.assert_array_equal(got, (x * dtype(2) + y))


def test_bias_gelu_residual_f16():
    rng = np.random.default_rng(0)
    for shape in [(64, 2048), (33, 1000), (1, 8)]:
        x = rng.standard_normal(shape).astype(np.float16)
        b = rng.standard_normal(shape[1]).astype(np.float16)
        r = rng.standard_normal(shape).astype(np.float16)
        got = kd.kernel(bias_gelu_res)(x, b, r, backend="cuda")
        want = bias_gelu_res(x, b, r)      # numpy: the same roundings
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=2e-3, atol=2e-3)


def test_rmsnorm_f16():
    rng = np.random.default_rng(1)
    for shape in [(64, 4096), (7, 1000), (3, 1)]:
        x = rng.standard_normal(shape).astype(np.float16)
        w = rng.standard_normal(shape[1]).astype(np.float16)
        got = kd.kernel(rmsnorm)(x, w, backend="cuda")
        x64 = x.astype(np.float64)
        want = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mkn", [(16, 4096, 4096), (1, 4096, 4096), (5, 1000, 1030), (31, 77, 300)])
def test_decode_gemm(dtype, mkn):
    rng = np.random.default_rng(2)
    m, k, n = mkn
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    got = kd.kernel(lambda a, b: a @ b)(a, b, backend="cuda").astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-3 * np.sqrt(k) if dtype == np.float32 else 4e-3 * max(1, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4096, 2048), (1000, 37), (1, 50)])
def test_transpose(shape):
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    got = kd.kernel(lambda a: a.T + 0.0)(a, backend="cuda")
    np.testing.assert_array_equal(got, a.T)


def test_half_conversions_every_pattern():
    """The prelude's branch-free float16 <-> float32 conversions (kd_h2f by bits and a 2^112
    scale; kd_f2h's NaN by select): every one of the 65536 float16 patterns to float32 and
    back, bit for bit as numpy (subnormals, infinities, NaN payloads and signs); float32
    values that round, overflow, underflow and NaNs with payloads to float16."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    h = bits.view(np.float16)
    up = kd.kernel(lambda x: x.astype(np.float32))(h, backend="cuda")
    np.testing.assert_array_equal(up.view(np.uint32), h.astype(np.float32).view(np.uint32))
    back = kd.kernel(lambda x: x.astype(np.float16))(up, backend="cuda")
    np.testing.assert_array_equal(back.view(np.uint16), up.astype(np.float16).view(np.uint16))
    f = np.concatenate([np.random.default_rng(4).standard_normal(4096).astype(np.float32) * 1e4,
                        np.array([65519.99, 65520.0, 1e-8, 6e-8, -3e-5, 0.0, -0.0, np.inf],
                                 np.float32),
                        np.array([0x7fc00001, 0xffc12345, 0x7f800001, 0x7fbfffff],
                                 np.uint32).view(np.float32)])
    with np.errstate(over="ignore", invalid="ignore"):
        want = f.astype(np.float16)
    got = kd.kernel(lambda x: x.astype(np.float16))(f, backend="cuda")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_half_products_with_nans_and_subnormals():
    """Products of float16 operands (converted by value: kd_h2fv) with NaNs, infinities,
    subnormals and signed zeros: NaN where numpy has one, every other value bit for bit."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    x = bits.view(np.float16)
    y = np.random.default_rng(5).permutation(bits).view(np.float16)
    got = kd.kernel(lambda x, y: x.astype(np.float32) * y.astype(np.float32))(x, y, backend="cuda")
    with np.errstate(all="ignore"):
        want = x.astype(np.float32) * y.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("mkn", [(8192, 64, 8192), (1000, 64, 1030), (513, 37, 260)])
def test_skinny_gemm_vector_stores(mkn):
    """The tiled GEMM's 16-byte output stores (interior blocks, aligned rows) and their
    scalar fallback (edge tiles; 1030 columns: rows not 16-byte aligned)."""
    rng = np.random.default_rng(6)
    m, k, n = mkn
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = kd.kernel(lambda a, b: a @ b)(a, b, backend="cuda").astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4 * np.sqrt(k), atol=1e-4 * np.sqrt(k))
