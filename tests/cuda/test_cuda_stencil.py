"""The default stencil schedule (register tiles, kdsl_cuda/schedules/stencil.py) on the GPU:
3x3 and 5x5 windows over shapes with interior and edge tiles, odd row lengths (the scalar
fallbacks of the vector loads and stores), strided views, float64 and int32, against numpy in
float64."""
import numpy as np
import pytest

import kdsl as kd

pytestmark = pytest.mark.cuda


def window(kh, kw):
    def conv(I, F):
        n, m = I.shape
        di, dj = kd.reduce_axis(kh, name="di"), kd.reduce_axis(kw, name="dj")
        return kd.compute((n - kh + 1, m - kw + 1),
                          lambda i, j: kd.sum(I[i + di, j + dj] * F[di, dj], axis=(di, dj)),
                          name="C")
    return kd.kernel(conv)


CONV3, CONV5 = window(3, 3), window(5, 5)


def np_conv(i, f):
    kh, kw = f.shape
    out = np.zeros((i.shape[0] - kh + 1, i.shape[1] - kw + 1))
    for di in range(kh):
        for dj in range(kw):
            out += i[di:di + out.shape[0], dj:dj + out.shape[1]] * f[di, dj]
    return out


@pytest.mark.parametrize("shape", [(1030, 1030), (2051, 1037), (5, 4099), (67, 8)])
@pytest.mark.parametrize("k,w", [(CONV3, 3), (CONV5, 5)])
def test_float32(k, w, shape, rng):
    i = rng.standard_normal(shape).astype(np.float32)
    f = rng.standard_normal((w, w)).astype(np.float32)
    np.testing.assert_allclose(k(i, f, backend="cuda"), np_conv(i.astype(np.float64), f),
                               rtol=1e-4, atol=1e-4)


def test_views_and_dtypes(rng):
    big = rng.standard_normal((600, 900))
    f = rng.standard_normal((3, 3))
    for view in (big[1::2, 3::3], big[:, 1:813], big.T[:300, :200]):
        for dtype, tol in ((np.float32, 1e-4), (np.float64, 1e-12)):
            # float64: the view itself (strides, offsets); float32: a converted copy
            x, g = (view, f) if dtype is np.float64 else (view.astype(dtype), f.astype(dtype))
            np.testing.assert_allclose(CONV3(x, g, backend="cuda"), np_conv(x.astype(np.float64), g),
                                       rtol=tol, atol=tol)
    xi = rng.integers(-50, 50, (333, 517)).astype(np.int32)
    fi = rng.integers(-5, 5, (3, 3)).astype(np.int32)
    np.testing.assert_array_equal(CONV3(xi, fi, backend="cuda"), np_conv(xi, fi).astype(np.int32))
