"""Regressions of session 16: max/min over ragged ranges (their emptiness is a question about
every point of the axes), and reduce axes whose range uses another reduce axis through
rfactor (a data check of a kd.scan on cpu) and the cuda default schedules.  numpy float64
loops are the oracle, on every host backend and the SIMT interpreter."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KernelError, ShapeError

BACKENDS = ["numpy", "interp", "cpu", "interp-cuda"]


# ------------------------------------------------- 1. max/min over a ragged range
@kd.kernel
def prefix_max_min(x):
    def f(i):
        k = kd.reduce_axis((0, i + 1))          # never empty: proven, no check
        return kd.max(x[k], axis=k) - kd.min(x[k] * 2.0, axis=k)
    return kd.compute((x.shape[0],), f)


@kd.kernel
def suffix_max(x, y):
    def f(i):
        k = kd.reduce_axis((i, y.shape[0]))     # non-empty iff len(y) >= len(x): checked per call
        return kd.max(y[k], axis=k) + x[i]
    return kd.compute((x.shape[0],), f)


@kd.kernel
def tri_max(A):
    a = kd.reduce_axis((0, A.shape[0]), name="a")
    b = kd.reduce_axis((0, a + 1), name="b")    # a range over another reduce axis
    return kd.compute((), lambda: kd.max(A[a, b], axis=(a, b)))


@kd.kernel
def running_max_scan(x):
    def cell(s, j):
        k = kd.reduce_axis((0, j))              # empty at j = 0, where the update never runs
        return kd.max(s[k], axis=k) + x[j]
    return kd.scan((x.shape[0],), lambda j: x[j], cell, dtype=x.dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 6])
def test_ragged_max_min(backend, n):
    rng = np.random.default_rng()
    x, y = rng.random(n), rng.random(n + 2)
    np.testing.assert_allclose(prefix_max_min(x, backend=backend),
                               [x[:i + 1].max() - 2 * x[:i + 1].min() for i in range(n)])
    np.testing.assert_allclose(suffix_max(x, y, backend=backend),
                               [y[i:].max() + x[i] for i in range(n)])
    A = rng.random((n + 1, n + 1))
    np.testing.assert_allclose(tri_max(A, backend=backend), np.tril(A).max())
    ref = x.copy()
    for j in range(1, n):
        ref[j] = ref[:j].max() + x[j]
    np.testing.assert_allclose(running_max_scan(x, backend=backend), ref)


def test_ragged_max_errors():
    x = np.random.default_rng().random(5)
    with pytest.raises(ShapeError, match="depends on the axes i is empty"):
        suffix_max(x, x[:3], backend="numpy")           # empty for i >= 3: numpy raises too
    with pytest.raises(ShapeError, match="no identity"):
        tri_max(np.zeros((0, 0)), backend="numpy")      # the outer axis itself is empty

    @kd.kernel
    def mod_max(x):
        def f(i):
            k = kd.reduce_axis((0, i % 3))              # empty at i = 0, not affine
            return kd.max(x[k], axis=k)
        return kd.compute((x.shape[0],), f)
    with pytest.raises(KernelError, match="cannot show it is never empty") as e:
        mod_max(x, backend="numpy")
    assert "kd.reducer" in str(e.value)


# ------------------------------------------------- 2. reduce ranges over other reduce axes
m0 = kd.reducer(lambda a, b: kd.maximum(a, b), identity=0, name="max0")


@kd.kernel
def scan_clamped(T, i):
    n = T.shape[0]

    def cell(s, j):
        k = kd.reduce_axis((i + 1, j))
        # the clamped row index is checked on the data over (j, k): a reduction over two
        # reduce axes, k's range using j, which the cpu default schedule rfactors along j
        return kd.maximum(s[j - 1], m0(s[k] + T[kd.minimum(k + 1, n - 1), j], axis=k))
    return kd.scan((n,), lambda j: T[i, j], cell, dtype=T.dtype)


@kd.kernel
def tri_sum(A):
    a = kd.reduce_axis((0, A.shape[0]), name="a")
    b = kd.reduce_axis((0, a + 1), name="b")
    return kd.compute((), lambda: kd.sum(A[a, b], axis=(a, b)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_range_over_reduce_axis(backend):
    rng = np.random.default_rng()
    n = int(rng.integers(4, 8))
    T, i = rng.integers(0, 5, (n, n)), int(rng.integers(0, n))
    ref = T[i].copy()
    for j in range(1, n):
        acc = 0
        for k in range(i + 1, j):
            acc = max(acc, ref[k] + T[min(k + 1, n - 1), j])
        ref[j] = max(ref[j - 1], acc)
    np.testing.assert_array_equal(scan_clamped(T, i, backend=backend), ref)
    A = rng.random((37, 37))          # the cpu default schedule rfactors the outer axis a
    np.testing.assert_allclose(tri_sum(A, backend=backend), np.tril(A).sum(), rtol=1e-12)
