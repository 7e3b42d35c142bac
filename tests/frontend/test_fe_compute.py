"""Index style: kd.compute, kd.reduce_axis, index-style reductions, reducers, hoisting."""
import numpy as np
import pytest

import kdsl.frontend.api as kd
from kdsl import dtypes as dt
from kdsl.ir import nodes as n
from fe_eval import trace_run

rng = np.random.default_rng(2)


def rowsum(A):
    return A.sum(axis=1)


def rowsum_te(A):
    n_, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n_,), lambda i: kd.sum(A[i, k], axis=k), name="B")


def conv3x3(I, F):
    n_, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n_ - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * F[di, dj], axis=(di, dj)))


product = kd.reducer(lambda x, y: x * y, identity=1, name="product")


def rowprod(A):
    n_, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n_,), lambda i: product(A[i, k], axis=k))


@pytest.mark.parametrize("shape", [(3, 4), (1, 1), (0, 3), (3, 0), (1, 5)])
def test_rowsum_both_styles(shape):
    a = rng.random(shape)
    g1, (o1,) = trace_run(rowsum, a)
    g2, (o2,) = trace_run(rowsum_te, a)
    np.testing.assert_allclose(o1, a.sum(axis=1))
    np.testing.assert_allclose(o2, a.sum(axis=1))
    (s,) = g2.stages
    assert s.name == "B" and s.origin == "compute"
    assert [x.name for x in s.axes] == ["i"] and [x.name for x in s.reduce_axes] == ["k"]
    assert isinstance(s.body, n.Reduce) and s.body.axes == s.reduce_axes


@pytest.mark.parametrize("shape", [(5, 6), (3, 3), (4, 3)])
def test_conv3x3(shape):
    I, F = rng.random(shape), rng.random((3, 3))
    g, (out,) = trace_run(conv3x3, I, F)
    ref = np.zeros((shape[0] - 2, shape[1] - 2))
    for i in range(ref.shape[0]):
        for j in range(ref.shape[1]):
            ref[i, j] = (I[i:i + 3, j:j + 3] * F).sum()
    np.testing.assert_allclose(out, ref)
    (s,) = g.stages
    assert s.name == "compute" and [a.name for a in s.axes] == ["i", "j"]
    assert [a.name for a in s.reduce_axes] == ["di", "dj"]


def test_rowprod_reducer():
    a = rng.random((3, 4)) + 0.5
    g, (out,) = trace_run(rowprod, a)
    np.testing.assert_allclose(out, a.prod(axis=1))
    assert g.stages[0].body.combiner.name == "product"


def test_reduce_axis_lo_hi_and_where_condition():
    a = rng.random((3, 6))

    def f(A):
        n_, m = A.shape
        k = kd.reduce_axis((1, m - 1), name="k")
        return kd.compute((n_,), lambda i: kd.max(A[i, k], axis=k))
    _, (out,) = trace_run(f, a)
    np.testing.assert_allclose(out, a[:, 1:-1].max(axis=1))

    def g(A):
        n_, m = A.shape
        k = kd.reduce_axis(m)
        return kd.compute((n_,), lambda i: kd.sum(A[i, k], axis=k, where=A[i, k] > 0.5))
    _, (out,) = trace_run(g, a)
    np.testing.assert_allclose(out, np.where(a > 0.5, a, 0).sum(axis=1))


def test_nested_reduce_is_hoisted_into_its_own_stage():
    a = rng.random((3, 4))

    def f(A):
        n_, m = A.shape
        k = kd.reduce_axis(m, name="k")
        return kd.compute((n_, m), lambda i, j: A[i, j] / kd.sum(kd.exp(A[i, k]), axis=k) * 2,
                          name="out")
    g, (out,) = trace_run(f, a)
    np.testing.assert_allclose(out, a / np.exp(a).sum(axis=1, keepdims=True) * 2)
    assert [s.name for s in g.stages] == ["out_sum", "out"]
    aux = g.stages[0]
    assert [x.name for x in aux.axes] == ["i"] and aux.is_reduction
    assert not g.stages[1].is_reduction


def test_reduce_nested_in_reduce():
    a = rng.random((2, 3, 4))

    def f(A):
        n_, m, p = A.shape
        k, l_ = kd.reduce_axis(m, name="k"), kd.reduce_axis(p, name="l")
        return kd.compute((n_,), lambda i: kd.max(kd.sum(A[i, k, l_], axis=l_) * 1.0, axis=k))
    g, (out,) = trace_run(f, a)
    np.testing.assert_allclose(out, a.sum(axis=2).max(axis=1))
    assert len(g.stages) == 2


def test_compute_dtypes_and_index_arithmetic():
    a = rng.random((4,)).astype(np.float32)

    def f(A):
        (n_,) = A.shape
        return (kd.compute((n_,), lambda i: A[n_ - 1 - i] * i),
                kd.compute((n_, 3), lambda i, j: i * 3 + j),
                kd.compute((2,), lambda i: 1.5))
    g, (x, y, z) = trace_run(f, a)
    assert x.dtype == np.float32 and y.dtype == np.int64 and z.dtype == np.float64
    np.testing.assert_allclose(x, a[::-1] * np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(y, np.arange(12).reshape(4, 3))
    np.testing.assert_array_equal(z, [1.5, 1.5])


def test_compute_reads_lazy_arrays_and_element_math():
    a = rng.random((3, 4))

    def f(A):
        n_, m = A.shape
        B = A * 2 + 1
        k = kd.reduce_axis(m)
        return kd.compute((n_,), lambda i: kd.sum(kd.exp(B[i, k]), axis=k))
    g, (out,) = trace_run(f, a)
    np.testing.assert_allclose(out, np.exp(a * 2 + 1).sum(axis=1))
    assert len(g.stages) == 1


def test_reduce_axis_used_by_two_stages_gets_fresh_axes():
    a = rng.random((3, 4))

    def f(A):
        n_, m = A.shape
        k = kd.reduce_axis(m, name="k")
        s = kd.compute((n_,), lambda i: kd.sum(A[i, k], axis=k), name="s")
        t = kd.compute((n_,), lambda i: kd.max(A[i, k], axis=k), name="t")
        return s, t
    g, (s, t) = trace_run(f, a)
    assert g.stages[0].reduce_axes[0] is not g.stages[1].reduce_axes[0]
    np.testing.assert_allclose(s, a.sum(1))
    np.testing.assert_allclose(t, a.max(1))


def test_compute_with_scalar_argument_shape():
    def f(A, n_):
        return kd.compute((n_,), lambda i: A[i % A.shape[0]] + i)
    a = rng.random((3,))
    g, (out,) = trace_run(f, a, 7)
    np.testing.assert_allclose(out, a[np.arange(7) % 3] + np.arange(7))
    assert g.scalars[0].dtype is dt.int64
