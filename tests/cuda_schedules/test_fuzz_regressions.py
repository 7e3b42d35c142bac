"""Regressions of the default cuda schedules found by the differential fuzzer's ``interp-cuda``
backend (tests/fuzz/FINDINGS.md, section "interp-cuda"): each kernel runs with no schedule on
the SIMT interpreter (race- and bounds-checked; the NVRTC hook of tests/conftest.py also
compiles its CUDA) against numpy in float64."""
import numpy as np
import pytest

import kdsl as kd


def run(fn, *args):
    return kd.kernel(fn)(*args, backend="interp-cuda")


def close(got, want, tol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4, 5, 6), (1, 3, 33), (7, 1, 1), (2, 0, 3)])
def test_column_reduction_over_several_axes(shape, rng):
    """fuzz 8:94, 8:140, 8:180: a column reduction over two or more axes fused them before its
    cache_write ("cache_write: call it on stage sum before other primitives on it")."""
    a = rng.standard_normal(shape).astype(np.float32)
    close(run(lambda A: A.sum(axis=(0, 1)), a), a.astype(np.float64).sum(axis=(0, 1)))
    b = np.asfortranarray(rng.standard_normal((3, 4, 5)))
    close(run(lambda A: A.max(axis=(1, 2), keepdims=True), b), b.max(axis=(1, 2), keepdims=True))


def _two_computes_then_any(a0):
    n0, n1 = a0.shape
    t1 = kd.compute((n0, n1), lambda i, j: kd.where(a0[i, j] < 1.0, i, a0[i, j]), name="t1")
    t2 = kd.compute((n0, n1), lambda i, j: (abs(t1[i, j]) + 0.5) ** 2.0, name="t2")
    return kd.any(t2 > 3.0, axis=-2, keepdims=True)


@pytest.mark.parametrize("shape", [(4, 5), (3, 300), (1, 7), (6, 1)])
def test_chain_elementwise_producer_of_symbolic_row(shape, rng):
    """fuzz 8:14, 8:285: an elementwise producer of an elementwise row-wise consumer was
    computed per row in shared memory, a buffer of the row's symbolic length (the CUDA codegen
    only has static shared arrays: "shared buffer compute of non-constant shape")."""
    a = (rng.standard_normal(shape) * 3).astype(np.float32)
    a64 = a.astype(np.float64)
    t1 = np.where(a64 < 1.0, np.arange(shape[0])[:, None], a64)
    want = ((np.abs(t1) + 0.5) ** 2.0 > 3.0).any(axis=-2, keepdims=True)
    np.testing.assert_array_equal(run(_two_computes_then_any, a), want)


@pytest.mark.parametrize("shape", [(7, 4), (9, 40), (1, 3), (3, 1)])
def test_chain_into_keepdims_row_reduction(shape, rng):
    """fuzz 8:82: a row-wise chain whose root is a keepdims row reduction (n, 1): its rows were
    fused with the extent-1 axis, leaving no row loop for the producer to attach at."""
    def f(a0):
        t0 = np.sum(a0, axis=1, dtype=np.int64, keepdims=True)
        return kd.sum(a0 * t0, axis=1, keepdims=True)
    a = rng.integers(-4, 5, shape).astype(np.float64)
    want = (a * a.sum(axis=1, keepdims=True)).sum(axis=1, keepdims=True)
    close(run(f, a), want, 1e-12)


@pytest.mark.parametrize("shape", [(9, 11), (2, 6), (1, 1), (300, 1)])
def test_keepdims_mean_of_everything(shape, rng):
    """fuzz 8:250: ``mean(axis=None, keepdims=True)``: the (1, 1) elementwise division became a
    chain root whose one-element row bound threadIdx.x to 1 iteration, its attached sum to 32."""
    a = rng.standard_normal(shape).astype(np.float32)
    got = run(lambda A: (5 + A.astype("float16")).mean(axis=None, keepdims=True), a)
    close(got, (5 + a.astype(np.float16).astype(np.float64)).mean(axis=None, keepdims=True), 2e-2)


def test_chain_with_one_value_per_row_intermediate(rng):
    """An elementwise (n, 1) intermediate between a row sum and its row-wise consumer bound
    threadIdx.x to 1 iteration inside the consumer's block of 32 threads."""
    def f(A):
        n, m = A.shape
        s = A.sum(axis=1, keepdims=True)
        c = kd.compute((n, 1), lambda i, j: s[i, j] * 2.0 + i, name="c")
        return kd.compute((n, m), lambda i, j: A[i, j] - c[i, 0], name="out")
    a = rng.standard_normal((5, 70)).astype(np.float32)
    a64 = a.astype(np.float64)
    close(run(f, a), a64 - (a64.sum(axis=1, keepdims=True) * 2 + np.arange(5)[:, None]), 1e-4)


def test_chain_rows_of_constant_length(rng):
    """A row-wise chain whose rows have constant lengths (3 outputs, a 300-long max): the
    splits of a constant extent by a larger factor are that extent, so the block's threads are
    capped by the shortest constant row (every threadIdx.x loop of a kernel has one extent)."""
    def g(A):
        n = A.shape[0]
        k = kd.reduce_axis(300, name="k")
        s = kd.compute((n,), lambda i: kd.max(A[i, k], axis=k), name="s")
        return kd.compute((n, 3), lambda i, j: A[i, j] - s[i], name="out")
    a = rng.standard_normal((5, 300)).astype(np.float32)
    close(run(g, a), a[:, :3].astype(np.float64) - a.max(axis=1, keepdims=True), 1e-6)


@pytest.mark.parametrize("shapes", [((1, 11), (11, 8)), ((6, 9), (9, 11)), ((70, 3), (3, 5)),
                                    ((13, 1), (1, 8)), ((70, 9), (9, 66)), ((2, 1, 7), (7, 4))])
def test_matmul_of_small_constant_extents(shapes, rng):
    """fuzz 8:22, 8:98, 8:215, 8:221, 8:227, 8:374, 8:403, 8:410, 8:460: the tiled GEMM on
    constant extents smaller than its tiles (a size-1 dimension, ``specialize=True``): the
    splits shrink to the extent, so a cooperative copy bound threadIdx.y to fewer iterations
    than C's thread tile.  Such products fall back to one output per thread."""
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    want = a.astype(np.float64) @ b.astype(np.float64)
    close(run(lambda A, B: A @ B, a, b), want, 1e-4)
    close(kd.kernel(specialize=True)(lambda A, B: A @ B)(a, b, backend="interp-cuda"), want, 1e-4)


def test_matmul_of_large_constant_extents_keeps_the_tiled_gemm(rng):
    """The fallback is for tiles the constant extents cannot fill: (70, 9) @ (9, 66) with
    ``specialize=True`` still copies its tiles through shared memory."""
    a, b = rng.standard_normal((70, 9)), rng.standard_normal((9, 66))
    k = kd.kernel(specialize=True)(lambda A, B: A @ B)
    assert " shared" in k.source(a, b, backend="interp-cuda")
    close(k(a, b, backend="interp-cuda"), a @ b, 1e-10)


def test_chain_into_a_row_reduction_of_several_rows_axes(rng):
    """A row-wise chain whose root reduces the last axis of a 3-D input (two spatial axes, fused
    over blocks): no row loop to attach the per-first-axis producer at, so it is computed by its
    own kernel (before: "compute_at takes an axis of stage sum_1 ..., got NoneType")."""
    def f(X):
        s = X.sum(axis=(1, 2))
        return (X * s[:, None, None]).sum(axis=2)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x64 = x.astype(np.float64)
    close(run(f, x), (x64 * x64.sum(axis=(1, 2))[:, None, None]).sum(axis=2), 1e-4)
