"""Default cuda schedules (no hints) run on the SIMT interpreter (``interp-cuda``: race-checked,
out-of-bounds checked) against numpy in float64, for every workload family, over shapes that
do and do not divide the tiles, size-1 and empty dimensions, strided views and several dtypes."""
import numpy as np
import pytest

import kdsl as kd
import cuda_workloads as W

F32_TOL = dict(rtol=2e-5, atol=2e-5)


def run(fn, *args):
    return kd.kernel(fn)(*args, backend="interp-cuda")


def check(fn, args, tol=None, exact=False):
    got = run(fn, *args)
    want = W.ORACLES[fn](*[a.astype(np.float64) for a in args])
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        t = tol or (F32_TOL if got.dtype != np.float64 else dict(rtol=1e-12, atol=1e-12))
        np.testing.assert_allclose(got.astype(np.float64), want, **t)


ROWS = [(5, 37), (3, 1030), (1, 1), (0, 4), (4, 0), (9, 4)]


@pytest.mark.parametrize("shape", ROWS)
@pytest.mark.parametrize("fn", [W.rowsum, W.rowsum_te, W.rowmax, W.colsum], ids=lambda f: f.__name__)
def test_reductions_f32(fn, shape, rng):
    if fn is W.rowmax and shape[1] == 0:
        pytest.skip("max of an empty row has no identity in numpy")
    check(fn, [rng.standard_normal(shape).astype(np.float32)])


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
@pytest.mark.parametrize("fn", [W.rowsum, W.colsum, W.total], ids=lambda f: f.__name__)
def test_reductions_dtypes(fn, dtype, rng):
    a = (rng.standard_normal((7, 45)) * 10).astype(dtype)
    got = run(fn, a)
    want = W.ORACLES[fn](a.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("n", [1, 7, 1025, 3000, 0])
def test_full_sum(n, rng):
    check(W.total, [rng.standard_normal(n).astype(np.float32)], tol=dict(rtol=1e-4, atol=1e-4))


def test_full_sum_2d_and_3d_trailing_axes(rng):
    check(W.total, [rng.standard_normal((6, 33)).astype(np.float32)], tol=dict(rtol=1e-4, atol=1e-4))
    check(W.sum_last2, [rng.standard_normal((3, 5, 7)).astype(np.float32)])


def test_strided_views(rng):
    base = rng.standard_normal((12, 90)).astype(np.float32)
    for view in (base[::2, 1::3], base[:, ::-1], base.T):
        for fn in (W.rowsum, W.colsum, W.softmax, W.argmax_rows):
            check(fn, [view], exact=fn is W.argmax_rows)
        check(W.scale_add, [view, view])


@pytest.mark.parametrize("shape", [(4, 64), (5, 70), (3, 1), (1, 1), (6, 1300)])
@pytest.mark.parametrize("fn", [W.argmax_rows, W.argmin_rows], ids=lambda f: f.__name__)
def test_argmax_argmin(fn, shape, rng):
    a = rng.integers(0, 3, shape).astype(np.float32)       # many ties: the first index wins
    check(fn, [a], exact=True)


@pytest.mark.parametrize("shape", [(1,), (1023,), (4097,), (0,)])
def test_elementwise_1d(shape, rng):
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    check(W.gelu_add, [a, b], tol=dict(rtol=1e-5, atol=1e-6))


@pytest.mark.parametrize("shape", [(5, 37), (1, 1), (0, 3), (3, 1030)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_elementwise_2d(shape, dtype, rng):
    a, b = ((rng.standard_normal(shape) * 10).astype(dtype) for _ in range(2))
    check(W.scale_add, [a, b])


def test_elementwise_fp16_inputs(rng):
    a, b = (rng.standard_normal((5, 37)).astype(np.float16) for _ in range(2))
    got = run(W.scale_add, a, b)
    np.testing.assert_allclose(got.astype(np.float64), a.astype(np.float64) * 2 + b, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("shape", [(4, 64), (3, 70), (2, 5), (1, 1), (0, 4), (3, 1100)])
@pytest.mark.parametrize("fn", [W.softmax, W.layernorm, W.logsumexp], ids=lambda f: f.__name__)
def test_row_chains(fn, shape, rng):
    check(fn, [rng.standard_normal(shape).astype(np.float32)], tol=dict(rtol=1e-4, atol=1e-5))


def test_row_chains_f64(rng):
    for fn in (W.softmax, W.layernorm):
        check(fn, [rng.standard_normal((3, 41))])


@pytest.mark.parametrize("shape", [(5, 5), (10, 37), (3, 3), (17, 40), (2, 9)])
def test_conv3x3(shape, rng):
    i = rng.standard_normal(shape).astype(np.float32)
    f = rng.standard_normal((3, 3)).astype(np.float32)
    check(W.conv3x3, [i, f])


@pytest.mark.parametrize("nkm", [(5, 7, 6), (64, 8, 64), (65, 9, 70), (1, 1, 1), (3, 0, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_matmul(nkm, dtype, rng):
    n, k, m = nkm
    a = (rng.standard_normal((n, k)) * 4).astype(dtype)
    b = (rng.standard_normal((k, m)) * 4).astype(dtype)
    check(W.matmul, [a, b], tol=dict(rtol=1e-5, atol=1e-4))


def test_batched_matmul_and_matvec(rng):
    a = rng.standard_normal((3, 9, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 11)).astype(np.float32)
    check(W.matmul, [a, b], tol=dict(rtol=1e-5, atol=1e-5))
    check(W.matmul, [a[0], b[0, :, 0].copy()], tol=dict(rtol=1e-5, atol=1e-5))


def test_generic_reduction(rng):
    check(W.diag_sum, [rng.standard_normal((9, 9)).astype(np.float32)])
