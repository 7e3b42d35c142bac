"""numpy arrays on the cuda backend (SPEC §3): ``backend="cuda"`` copies numpy inputs in and
results out, for every dtype, any layout (F order, steps, negative strides, stride 0), size 0
and 1; ``out=`` numpy arrays (strided ones keep their gaps); scalars; several outputs.
Kernels carry explicit cuda schedules (cuda_support.py)."""
import numpy as np
import pytest

from cuda_support import (ARGMAX, AXPY, MIX, NUMPY_DTYPES, ROWSUM, TWO, check_elementwise,
                          elementwise, values)

pytestmark = pytest.mark.cuda

@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_every_dtype_in_and_out(dtype, rng):
    k = elementwise(dtype)[0]
    for shape in [(37, 45), (1, 7), (0, 5), (5, 0)]:     # more 1s: test_any_layout
        a, b = values(rng, shape, dtype), values(rng, shape, dtype)
        a0, b0 = a.copy(), b.copy()
        r = k(a, b, backend="cuda")
        assert type(r) is np.ndarray and r.dtype == a.dtype and r.shape == shape
        assert not np.shares_memory(r, a) and not np.shares_memory(r, b)
        check_elementwise(r, a, b, dtype)
        np.testing.assert_array_equal(a, a0)
        np.testing.assert_array_equal(b, b0)


def _views(a):
    """a (n, m) float32 array as: itself, F order, stepped with an offset, negative strides,
    a stride-0 broadcast of its first row."""
    n, m = a.shape
    big = np.full((2 * n, 3 * m + 1), np.nan, a.dtype)
    big[::2, 1::3] = a
    return [("c", a), ("f", np.asfortranarray(a)), ("stepped", big[::2, 1::3]),
            ("negative", a[::-1, ::-1]), ("broadcast", np.broadcast_to(a[:1], (n, m)))]


@pytest.mark.parametrize("shape", [(33, 70), (1, 5), (4, 1), (0, 3)])
def test_any_layout(shape, rng):
    x = values(rng, shape, "float32")
    y = values(rng, shape, "float32")
    for (name, a), (_, b) in zip(_views(x), _views(y)):
        check_elementwise(MIX(a, b, backend="cuda"), a, b, "float32")
        np.testing.assert_allclose(ROWSUM(a, backend="cuda"), a.astype(np.float64).sum(1),
                                   rtol=1e-5, atol=1e-5, err_msg=name)
        if shape[1]:
            np.testing.assert_array_equal(ARGMAX(a, backend="cuda"), a.argmax(1), err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_out(dtype, rng):
    k = elementwise(dtype)[0]
    for shape in [(37, 45), (1, 1), (0, 3)]:
        a, b = values(rng, shape, dtype), values(rng, shape, dtype)
        out = np.empty(shape, dtype)
        assert k(a, b, backend="cuda", out=out) is out
        check_elementwise(out, a, b, dtype)
        outF = np.empty(shape, dtype, order="F")
        assert k(a, b, backend="cuda", out=outF) is outF
        check_elementwise(outF, a, b, dtype)


def test_strided_out_keeps_its_gaps(rng):
    a, b = values(rng, (9, 13), "float32"), values(rng, (9, 13), "float32")
    big = np.full((9, 27), -7.0, np.float32)
    out = big[:, 1::2]
    assert MIX(a, b, backend="cuda", out=out) is out
    check_elementwise(out, a, b, "float32")
    assert (big[:, 0::2] == -7).all()
    rev = np.empty((9, 13), np.float32)[::-1]
    assert MIX(a, b, backend="cuda", out=rev) is rev
    check_elementwise(rev, a, b, "float32")


def test_scalars_several_outputs_and_reduction_out(rng):
    x, y = values(rng, (300,), "float32"), values(rng, (300,), "float32")
    for alpha in (2.5, -1.0, 0.0):
        np.testing.assert_allclose(AXPY(alpha, x, y, backend="cuda"), alpha * x.astype(np.float64) + y,
                                   rtol=1e-6, atol=1e-6)
    s, p = TWO(x, y, backend="cuda")
    np.testing.assert_allclose(s, x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(p, x.astype(np.float64) * y, rtol=1e-6, atol=1e-6)
    o = (np.empty(300, np.float32), np.empty(300, np.float32))
    r = TWO(x, y, backend="cuda", out=o)
    assert r[0] is o[0] and r[1] is o[1]
    np.testing.assert_allclose(o[1], x.astype(np.float64) * y, rtol=1e-6, atol=1e-6)
    A = values(rng, (11, 40), "float64")
    out = np.empty(11)
    assert ROWSUM(A, backend="cuda", out=out) is out
    np.testing.assert_allclose(out, A.sum(1), rtol=1e-12)
