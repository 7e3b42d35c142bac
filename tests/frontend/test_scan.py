"""Sequential loops with carried state (issue 25 item 4): reductions whose bounds depend on
outer axes, ``kd.scan`` (TVM's te.scan) and the cumulative ops on it, checked against plain
numpy loops in float64 on every host backend and the SIMT interpreter (GPU schedules)."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KernelError, ScheduleError

BACKENDS = ["numpy", "interp", "cpu", "interp-cuda"]


# ----------------------------------------------------------------- (a) ragged reductions
@kd.kernel
def lower_tri_sum(A):
    def f(i):
        k = kd.reduce_axis((0, i + 1))
        return kd.sum(A[i, k], axis=k)
    return kd.compute((A.shape[0],), f)


@kd.kernel
def strict_upper_twice(A):
    def f(i):
        k = kd.reduce_axis((i + 1, A.shape[1]))
        return kd.sum(A[i, k] * A[i, k], axis=k) * 2.0      # hoisted into its own stage
    return kd.compute((A.shape[0],), f)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 7])
def test_triangular_sums(backend, n, rng):
    A = rng.random((n, n + 2))
    got = lower_tri_sum(A, backend=backend)
    np.testing.assert_allclose(got, [A[i, :i + 1].sum() for i in range(n)], rtol=1e-12)
    got = strict_upper_twice(A, backend=backend)
    np.testing.assert_allclose(got, [2 * (A[i, i + 1:] ** 2).sum() for i in range(n)], rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_triangular_sum_strided(backend, rng):
    A = rng.random((9, 12))[::2, ::3]          # (5, 4), not contiguous
    A = A[:4]
    np.testing.assert_allclose(lower_tri_sum(A, backend=backend), lower_tri_ref(A), rtol=1e-12)


def lower_tri_ref(A):
    return np.array([A[i, :i + 1].sum() for i in range(A.shape[0])])


def test_triangular_sum_out_of_range_is_a_call_time_error(rng):
    # k runs to i, i to n - 1: A's second axis must hold n elements; a call-time check says so
    with pytest.raises(kd.KernelIndexError):
        lower_tri_sum(rng.random((5, 3)), backend="numpy")


# ----------------------------------------------------------------- (b) kd.scan
@kd.kernel
def cumsum0(X):
    return kd.scan(X.shape, lambda t, i: X[t, i], lambda s, t, i: s[t - 1, i] + X[t, i])


@kd.kernel
def cumsum1(X):
    return kd.cumsum(X, axis=1)


@kd.kernel
def cumprod_flat(X):
    return kd.cumprod(X)


@kd.kernel
def running_max(x):
    return kd.cummax(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0, 3), (1, 4), (7, 5), (6, 0)])
def test_cumsum_both_axes(backend, shape, rng):
    X = rng.random(shape)
    np.testing.assert_allclose(cumsum0(X, backend=backend), np.cumsum(X, 0), rtol=1e-12)
    np.testing.assert_allclose(cumsum1(X, backend=backend), np.cumsum(X, 1), rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumulative_ops_dtypes_and_strides(backend, rng):
    X = rng.integers(-3, 4, (8, 10)).astype(np.int32)[::2, 1::3]     # strided int32
    got = cumprod_flat(X, backend=backend)
    assert got.dtype == np.cumprod(X).dtype == np.int64
    np.testing.assert_array_equal(got, np.cumprod(X))
    x = rng.random(11)
    x[4] = np.nan
    np.testing.assert_array_equal(running_max(x, backend=backend), np.maximum.accumulate(x))


# deriche's causal pass: a 2nd-order recurrence along each row (PolyBench's loop, zeros before
# the start), rows in parallel
@kd.kernel
def deriche_causal(x, a1, a2, b1, b2):
    def upd(y, i, j):
        ym2 = kd.where(j >= 2, y[i, j - 2], 0.0)
        return a1 * x[i, j] + a2 * x[i, j - 1] + b1 * y[i, j - 1] + b2 * ym2
    return kd.scan(x.shape, lambda i, j: a1 * x[i, j], upd, axis=1)


def deriche_ref(x, a1, a2, b1, b2):
    y = np.zeros_like(x)
    for i in range(x.shape[0]):
        ym1 = ym2 = xm1 = 0.0
        for j in range(x.shape[1]):
            y[i, j] = a1 * x[i, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
            xm1, ym2, ym1 = x[i, j], ym1, y[i, j]
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(3, 1), (5, 9)])
def test_deriche_causal_recurrence(backend, shape, rng):
    x = rng.random(shape)
    args = (0.3, -0.2, 0.5, -0.25)
    np.testing.assert_allclose(deriche_causal(x, *args, backend=backend), deriche_ref(x, *args),
                               rtol=1e-12)


# trisolv: each step reduces over every earlier step
@kd.kernel
def trisolv(L, b):
    def upd(x, i):
        j = kd.reduce_axis((0, i))
        return (b[i] - kd.sum(L[i, j] * x[j], axis=j)) / L[i, i]
    return kd.scan(b.shape, lambda i: b[i] / L[i, i], upd)


def trisolv_ref(L, b):
    n = len(b)
    x = np.zeros(n)
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 6])
def test_trisolv(backend, n, rng):
    L = np.tril(rng.random((n, n))) + np.eye(n)
    b = rng.random(n)
    np.testing.assert_allclose(trisolv(L, b, backend=backend), trisolv_ref(L, b), rtol=1e-10)


# a non-pointwise scan (each step reads its neighbours' previous values): serial everywhere
@kd.kernel
def smooth_steps(x):
    def upd(s, t, i):
        left = s[t - 1, kd.maximum(i - 1, 0)]
        right = s[t - 1, kd.minimum(i + 1, x.shape[0] - 1)]
        return (left + s[t - 1, i] + right) / 3.0
    return kd.scan((4, x.shape[0]), lambda t, i: x[i], upd)


@pytest.mark.parametrize("backend", BACKENDS)
def test_neighbour_scan(backend, rng):
    x = rng.random(7)
    ref = np.zeros((4, 7))
    ref[0] = x
    for t in range(1, 4):
        p = ref[t - 1]
        ref[t] = (p[np.maximum(np.arange(7) - 1, 0)] + p + p[np.minimum(np.arange(7) + 1, 6)]) / 3
    np.testing.assert_allclose(smooth_steps(x, backend=backend), ref, rtol=1e-12)


# ----------------------------------------------------------------- errors
def test_update_reading_a_later_step_is_refused():
    @kd.kernel
    def bad(X):
        return kd.scan(X.shape, lambda t: X[t], lambda s, t: s[t] + 1.0)
    with pytest.raises(KernelError, match="earlier steps"):
        bad(np.zeros(4), backend="numpy")


def test_binding_the_scan_axis_to_threads_is_refused():
    @kd.kernel
    def cs(X):
        return kd.scan(X.shape, lambda t, i: X[t, i], lambda s, t, i: s[t - 1, i] + X[t, i])

    @cs.schedule("cuda")
    def _(s):
        st = s["scan"]
        t, i = st.axes
        st.bind(t, "threadIdx.x")
        st.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="scan axis 't'"):
        cs(np.zeros((3, 2)), backend="interp-cuda")
