"""Dynamic shared memory on the GPU: kernels whose shared buffers are sized at launch, beyond
the 48 KB a block gets without the opt-in attribute (the launcher raises the function's
MAX_DYNAMIC_SHARED_SIZE_BYTES), and the row-wise chains that cache their input row on chip."""
import numpy as np
import pytest

import kdsl as kd

pytestmark = pytest.mark.cuda


@kd.kernel
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def layernorm(X):
    mu = X.mean(axis=1, keepdims=True)
    d = X - mu
    return d / kd.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)


def _np_softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _np_layernorm(x):
    d = x - x.mean(1, keepdims=True)
    return d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5)


@kd.kernel
def row_scale(X):
    return kd.compute(X.shape, lambda i, j: X[i, j] * 2, name="Y")


@row_scale.schedule("cuda")
def _row_in_shared(s):
    """Row i of X copied into shared memory by thread chunks (other threads read it: barrier)."""
    Y = s["Y"]
    XS = s.cache_read("X", "shared", [Y])
    i, j = Y.axes
    jo, jt = Y.split(j, factor=256)
    Y.reorder(i, jt, jo)
    Y.bind(i, "blockIdx.x")
    Y.bind(jt, "threadIdx.x")
    XS.compute_at(Y, i)
    _, xj = XS.stage.axes
    xt, _ = XS.split(xj, nparts=256)
    XS.bind(xt, "threadIdx.x")


@pytest.mark.parametrize("m", [1000, 20000, 50000])     # 4 KB, 80 KB, 200 KB of shared memory
def test_row_beyond_48k_of_shared_memory(m, rng):
    X = rng.standard_normal((5, m)).astype(np.float32)
    assert "kd_dyn_smem" in row_scale.source(X, backend="cuda")
    np.testing.assert_array_equal(row_scale(X, backend="cuda"), X * 2)


def test_row_beyond_the_device_is_refused():
    X = np.zeros((2, 70000), np.float32)                  # 280 KB > 227 KB
    with pytest.raises(kd.ArgumentError, match="bytes of shared memory per block"):
        row_scale(X, backend="cuda")


@pytest.mark.parametrize("kernel,oracle", [(softmax, _np_softmax), (layernorm, _np_layernorm)])
@pytest.mark.parametrize("m", [7, 1000, 4099, 8192, 15000])
def test_chains_cache_rows(kernel, oracle, m, rng):
    X = rng.standard_normal((67, m)).astype(np.float32)
    if m > 1:
        assert "kd_dyn_smem" in kernel.source(X, backend="cuda")
    np.testing.assert_allclose(kernel(X, backend="cuda"), oracle(X.astype(np.float64)),
                               rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("m", [1000, 4099])
def test_chains_cache_rows_float16(m, rng):
    X = rng.standard_normal((9, m)).astype(np.float16)
    got = softmax(X, backend="cuda")
    np.testing.assert_allclose(got.astype(np.float64), _np_softmax(X.astype(np.float64)),
                               rtol=1e-2, atol=2e-3)
