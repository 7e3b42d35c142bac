"""Scans on the device (issue 25 items 2 and 4): the parallel blocked scan the default cuda
schedules choose for a long associative scan (block totals, a scan of the totals, a segmented
scan; several levels for 2**22 elements), with real block sizes, and tuple-state scans.
Exact for integers; float32 sums are reassociated, within a tolerance growing with n."""
import numpy as np
import pytest

import kdsl as kd
from cuda_support import load_suite

pytestmark = pytest.mark.cuda

P = load_suite("frontend/test_scan_parallel.py", "_kdsl_cuda_scan_parallel")


@kd.kernel
def csum(x):
    return np.cumsum(x)


@kd.kernel
def scans(x, b):
    return np.maximum.accumulate(x), np.bitwise_xor.accumulate(b), np.cumsum(b)


@pytest.mark.parametrize("n", [1, 1000, 4097, 2 ** 22 + 3])
def test_long_cumsums(n, rng):
    x = rng.random(n).astype(np.float32)
    got = csum(x, backend="cuda")
    want = np.cumsum(x.astype(np.float64))
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want) / want) < 4e-6 * max(1.0, np.log2(n))
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    np.testing.assert_array_equal(csum(xi, backend="cuda"), np.cumsum(xi))
    x[n // 2] = np.nan
    got = scans(x, xi.astype(np.int16), backend="cuda")
    np.testing.assert_array_equal(got[0], np.maximum.accumulate(x))
    np.testing.assert_array_equal(got[1], np.bitwise_xor.accumulate(xi.astype(np.int16)))
    np.testing.assert_array_equal(got[2], np.cumsum(xi.astype(np.int16)))


def test_blocked_columns(rng):
    X = rng.integers(-9, 9, (30000, 5)).astype(np.int64)[:, ::2]
    f = kd.kernel(lambda X: np.cumsum(X, axis=0))
    np.testing.assert_array_equal(f(X, backend="cuda"), np.cumsum(X, axis=0))


def test_tuple_state_scans(rng):
    P.test_tuple_state_scans("cuda", rng)


@pytest.mark.parametrize("n", [4351, 4352, 4353, 4352 * 4352 + 5])
def test_tile_scan_boundaries(n, rng):
    """The tile scan (kdsl.gpu.scan_tiles) at its tile's edges (4352 = 256 threads * 17) and
    past one tile of tiles (two levels): exact for integers, cummin/cummax with NaN."""
    xi = rng.integers(-1000, 1000, n).astype(np.int64)
    np.testing.assert_array_equal(csum(xi, backend="cuda"), np.cumsum(xi))
    x = rng.standard_normal(n)
    x[n // 3] = np.nan
    f = kd.kernel(lambda x: (np.minimum.accumulate(x), np.maximum.accumulate(x)))
    lo, hi = f(x, backend="cuda")
    np.testing.assert_array_equal(lo, np.minimum.accumulate(x))
    np.testing.assert_array_equal(hi, np.maximum.accumulate(x))


def test_tile_scan_rows(rng):
    """Rows along the last axis, each row's tiles in their own blocks; a strided view."""
    X = rng.standard_normal((7, 20001))[:, ::-2]
    f = kd.kernel(lambda X: (np.cumsum(X, axis=1), np.cumprod(1 + 1e-4 * X, axis=1)))
    s, p = f(X, backend="cuda")
    np.testing.assert_allclose(s, np.cumsum(X, 1), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(p, np.cumprod(1 + 1e-4 * X, 1), rtol=1e-9)


@pytest.mark.parametrize("m", [31, 33, 256, 257, 5000])
def test_short_row_scans(m, rng):
    """Many short rows (a block per row, threads by the row length; 31 steps: a thread per
    row): ragged row counts, float32 within reassociation error, exact integers, a strided view."""
    rows = 9000 if m < 1000 else 301
    x = rng.random((rows, m)).astype(np.float32)
    f = kd.kernel(lambda X: np.cumsum(X, axis=1))
    got = f(x, backend="cuda")
    want = np.cumsum(x.astype(np.float64), 1)
    assert got.dtype == np.float32 and np.max(np.abs(got - want) / want) < 2e-5
    xi = rng.integers(-1000, 1000, (rows, 2 * m)).astype(np.int32)[::-1, ::2]
    g = kd.kernel(lambda X: (np.cumsum(X, axis=1), np.minimum.accumulate(X, axis=1),
                             np.maximum.accumulate(X, axis=1)))
    s, lo, hi = g(xi, backend="cuda")
    np.testing.assert_array_equal(s, np.cumsum(xi, 1))
    np.testing.assert_array_equal(lo, np.minimum.accumulate(xi, 1))
    np.testing.assert_array_equal(hi, np.maximum.accumulate(xi, 1))
