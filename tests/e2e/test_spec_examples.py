"""Every SPEC §2 example and every seed-000 schedule, through both reference
executors, against numpy in float64 — shapes that do and do not divide the
splits, size 0 and 1, and strided views."""
import numpy as np
import pytest

import kdsl as kd
from seed_schedules import SEED_SCHEDULES, cross_thread


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def rowsum_te(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")


@kd.kernel
def conv3x3(I, F):
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * F[di, dj], axis=(di, dj)))


product = kd.reducer(lambda x, y: x * y, identity=1, name="product")


@kd.kernel
def rowprod(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: product(A[i, k], axis=k))


@kd.kernel
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def matmul(A, B):
    return A @ B


SHAPES = [(0, 4), (1, 1), (3, 0), (7, 5), (33, 17), (64, 40)]


def views(a):
    """The array itself, a transposed copy's transpose (F order) and a negative-stride view."""
    yield "c", a
    yield "f", np.asfortranarray(a)
    big = np.zeros((a.shape[0], 2 * a.shape[1] + 1), a.dtype)
    big[:, 1::2] = a
    yield "strided", big[:, 1::2][::-1][::-1]
    yield "neg", a[::-1].copy()[::-1]


def ref_conv(I, F):
    n, m = I.shape
    out = np.zeros((max(n - 2, 0), max(m - 2, 0)))
    for di in range(3):
        for dj in range(3):
            out += I[di:di + n - 2, dj:dj + m - 2].astype(np.float64) * F[di, dj]
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_rowsum_both_styles(executor, shape, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    for _, v in views(a):
        ref = v.astype(np.float64).sum(axis=1)
        np.testing.assert_allclose(rowsum(v, backend=executor), ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rowsum_te(v, backend=executor), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (4, 7), (10, 9)])
def test_conv3x3(executor, shape, rng):
    I, F = rng.standard_normal(shape), rng.standard_normal((3, 3))
    np.testing.assert_allclose(conv3x3(I, F, backend=executor), ref_conv(I, F), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_rowprod(executor, shape, rng):
    a = rng.uniform(0.5, 1.5, shape)
    np.testing.assert_allclose(rowprod(a, backend=executor), a.prod(axis=1), rtol=1e-10)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (8, 33)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax(executor, shape, dtype, rng):
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    out = softmax(x, backend=executor)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shapes", [((5,), (5,)), ((4, 3), (3,)), ((3,), (3, 6)), ((4, 3), (3, 6)),
                                    ((2, 4, 3), (3, 5)), ((2, 1, 4, 3), (3, 3, 2)), ((0, 3), (3, 2)),
                                    ((3, 0), (0, 2))])
def test_matmul(executor, shapes, rng):
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    out = matmul(a, b, backend=executor)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- seed 000 schedules


def _scheduled(fn, sched):
    k = kd.kernel(fn.__wrapped__ if hasattr(fn, "__wrapped__") else fn)
    k.schedule("interp")(sched)
    return k


def _rowsum_te(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")


def _rowprod_te(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: product(A[i, k], axis=k), name="B")


@pytest.mark.parametrize("sched", SEED_SCHEDULES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", SHAPES)
def test_seed000_schedules(sched, shape, rng):
    k = kd.kernel(_rowsum_te)
    k.schedule("interp")(sched)
    a = rng.standard_normal(shape).astype(np.float32)
    for _, v in views(a):
        np.testing.assert_allclose(k(v, backend="interp"), v.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sched", SEED_SCHEDULES, ids=lambda f: f.__name__)
def test_seed000_product_reducer_schedules(sched, rng):
    k = kd.kernel(_rowprod_te)
    k.schedule("interp")(sched)
    a = rng.uniform(0.5, 1.5, (37, 21))
    np.testing.assert_allclose(k(a, backend="interp"), a.prod(1), rtol=1e-10)


def test_seed000_conv_split_schedule(rng):
    def sched(s):
        O = s.outputs[0]
        io, jo, ii, ji = O.tile(O.axes[0], O.axes[1], 4, 4)
        O.unroll(O.reduce_axes[1])
    k = kd.kernel(conv3x3.__wrapped__ if hasattr(conv3x3, "__wrapped__") else conv3x3.fn)
    k.schedule("interp")(sched)
    for shape in [(2, 2), (6, 6), (11, 9)]:
        I, F = rng.standard_normal(shape), rng.standard_normal((3, 3))
        np.testing.assert_allclose(k(I, F, backend="interp"), ref_conv(I, F), rtol=1e-10, atol=1e-12)


def test_cross_thread_lowered_text_reads_like_a_loop_nest():
    k = kd.kernel(_rowsum_te)
    k.schedule("interp")(cross_thread)
    text = str(k.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="interp"))
    for piece in ["for i.outer in range(ceildiv(n, 32)):  # bound blockIdx.x",
                  "# bound threadIdx.y", "# bound threadIdx.x", "allocate B.rf: float32[1, 1] local",
                  "k.outer*16 + k.inner.v < m", "barrier"]:
        assert piece in text, (piece, text)


def test_seed000_store_predicate(rng):
    """The seed's set_store_predicate(tx == 0) on the cross-thread schedule."""
    def sched(s):
        cross_thread(s)
        B = s["B"]
        B.set_store_predicate(lambda tx: tx == 0, B.reduce_axes[0])
    k = kd.kernel(_rowsum_te)
    k.schedule("interp")(sched)
    a = rng.standard_normal((45, 37)).astype(np.float32)
    np.testing.assert_allclose(k(a, backend="interp"), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    text = str(k.lower(a, backend="interp"))
    assert "if k.inner.v == 0" in text


@kd.kernel
def axpy(a, X, Y):
    return a * X + Y


@kd.kernel(constants=("p",))
def powsum(X, p):
    return (X ** p).sum(axis=0)


def test_scalar_arguments_symbolic_and_constant(executor, rng):
    x = rng.standard_normal(7).astype(np.float32)
    y = rng.standard_normal(7).astype(np.float32)
    out = axpy(2.5, x, y, backend=executor)
    assert out.dtype == np.float32      # a Python float is weak, like numpy
    np.testing.assert_allclose(out, 2.5 * x.astype(np.float64) + y, rtol=1e-6)
    np.testing.assert_allclose(axpy(-1.0, x, y, backend=executor), y - x, rtol=1e-6)  # same kernel
    m = rng.standard_normal((5, 3))
    np.testing.assert_allclose(powsum(m, 3, backend=executor), (m ** 3).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(powsum(m, 2, backend=executor), (m ** 2).sum(axis=0), rtol=1e-12)
