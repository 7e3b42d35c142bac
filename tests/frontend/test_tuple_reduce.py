"""Tuple-valued kd.compute and tuple reducers (issue 25 item 3): argmax, the online softmax
pair (logsumexp) and Welford's (count, mean, M2) written by the user, against numpy in float64,
on numpy, interp, cpu and interp-cuda (default schedules, an explicit cross-thread reduction,
rfactor), with empty and size-1 axes and strided views."""
import numpy as np
import pytest

import kdsl as kd

BACKENDS = ["numpy", "interp", "cpu", "interp-cuda"]


# ------------------------------------------------------------------ the user's reducers
def _argmax_combine(a, b):
    va, ia = a
    vb, ib = b
    na, nb = kd.isnan(va), kd.isnan(vb)
    # numpy: NaN is the maximum, the first one wins; ties go to the smaller index
    take = (nb & ~na) | (~na & (vb > va)) | (((vb == va) | (na & nb)) & (ib < ia))
    return kd.where(take, vb, va), kd.where(take, ib, ia)


ARGMAX = kd.reducer(_argmax_combine, identity=(-np.inf, 2 ** 62), name="argmax_pair")


def _lse_combine(a, b):
    m1, s1 = a
    m2, s2 = b
    m = kd.maximum(m1, m2)
    # exp(-inf - -inf) is NaN: a member equal to the max contributes its sum unscaled
    e1 = kd.where(m1 == m, 1.0, kd.exp(m1 - m))
    e2 = kd.where(m2 == m, 1.0, kd.exp(m2 - m))
    return m, s1 * e1 + s2 * e2


LSE = kd.reducer(_lse_combine, identity=(-np.inf, 0.0), name="lse")


def _welford_combine(a, b):
    n1, m1, q1 = a
    n2, m2, q2 = b
    cnt = n1 + n2
    safe = kd.where(cnt == 0, 1.0, cnt)
    mean = (n1 * m1 + n2 * m2) / safe
    d = m2 - m1
    return cnt, mean, q1 + q2 + d * d * (n1 * n2 / safe)


WELFORD = kd.reducer(_welford_combine, identity=(0.0, 0.0, 0.0), name="welford")


def argmax_rows(X):
    n_, m_ = X.shape
    k = kd.reduce_axis(m_, name="k")
    return kd.compute((n_,), lambda i: ARGMAX((X[i, k], k), axis=k), name="B")


def lse_rows(X):
    n_, m_ = X.shape
    k = kd.reduce_axis(m_, name="k")
    m, s = kd.compute((n_,), lambda i: LSE((X[i, k], 1.0), axis=k), name="B")
    return m + kd.log(s)


def welford_rows(X):
    n_, m_ = X.shape
    k = kd.reduce_axis(m_, name="k")
    c, mean, q = kd.compute((n_,), lambda i: WELFORD((1.0, X[i, k], 0.0), axis=k), name="B")
    return mean, q / c


def np_lse(x):
    with np.errstate(all="ignore"):
        m = x.max(axis=1) if x.shape[1] else np.full(x.shape[0], -np.inf)
        mm = np.where(np.isfinite(m), m, 0.0)
        return np.log(np.exp(x - mm[:, None]).sum(axis=1)) + mm


SHAPES = [(5, 37), (3, 70), (1, 1), (4, 1), (3, 0), (0, 4)]


def _data(rng, shape, ties=False):
    if ties:
        return rng.integers(0, 3, shape).astype(np.float64)
    return rng.standard_normal(shape)


# ------------------------------------------------------------------ default schedules
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_argmax_pair(backend, shape, rng):
    x = _data(rng, shape, ties=True)
    if x.size and shape[1] > 3:
        x[0, 1] = x[-1, -1] = np.nan
        x[0, 3] = np.nan                      # the first NaN wins
    v, i = kd.kernel(argmax_rows)(x, backend=backend)
    if shape[1]:
        np.testing.assert_array_equal(i, np.argmax(x, axis=1))
        np.testing.assert_array_equal(v, np.max(x, axis=1))
    else:                                     # the identity
        np.testing.assert_array_equal(i, np.full(shape[0], 2 ** 62))
        np.testing.assert_array_equal(v, np.full(shape[0], -np.inf))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_logsumexp_pair(backend, shape, rng):
    x = rng.standard_normal(shape) * 10
    got = kd.kernel(lse_rows)(x, backend=backend)
    np.testing.assert_allclose(got, np_lse(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_welford_triple(backend, shape, rng):
    x = rng.standard_normal(shape) + 3.0
    mean, var = kd.kernel(welford_rows)(x, backend=backend)
    if shape[1]:
        np.testing.assert_allclose(mean, x.mean(axis=1), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(var, x.var(axis=1), rtol=1e-10, atol=1e-12)
    else:                                     # the identity: count 0, mean 0, 0/0
        np.testing.assert_array_equal(mean, np.zeros(shape[0]))
        assert np.isnan(var).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_view(backend, rng):
    base = rng.standard_normal((9, 40)) * 5
    x = base[::2, 1::3]                       # a strided view
    got = kd.kernel(lse_rows)(x, backend=backend)
    np.testing.assert_allclose(got, np_lse(x), rtol=1e-12, atol=1e-12)
    v, i = kd.kernel(argmax_rows)(x, backend=backend)
    np.testing.assert_array_equal(i, np.argmax(x, axis=1))


# ------------------------------------------------------------------ explicit GPU schedules
def _bind_others(s):
    """The elementwise stages after B (m + log(s), q / c): 32 outputs per block."""
    for h in s.stages:
        if not h.stage.name.startswith("B"):
            o, i = h.split(h.axes[0], factor=32)
            h.bind(o, "blockIdx.x")
            h.bind(i, "threadIdx.x")


def cross_thread(s):
    """One row per block, its reduction over 32 threads (per-thread partials, then warp
    shuffles of every member on cuda, the shared-memory fold on interp-cuda)."""
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=32)
    B.reorder(B.axes[0], ki, ko)
    B.bind(B.axes[0], "blockIdx.x")
    B.bind(ki, "threadIdx.x")
    _bind_others(s)


def rfactor_threads(s):
    """rfactor: 16 partial tuples per row (B.rf), combined across 16 threads."""
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    BF = s.rfactor(B, ki)
    B.bind(B.axes[0], "blockIdx.x")
    B.bind(B.reduce_axes[0], "threadIdx.x")
    BF.compute_at(B, B.reduce_axes[0])
    _bind_others(s)


def rfactor_serial(s):
    """rfactor on a sequential target: partials over ki, then their combination."""
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=4)
    s.rfactor(B, ki)


def _scheduled(fn, sched, target):
    k = kd.kernel(fn)
    k.schedule(target)(sched)
    return k


GPU_SHAPES = [(4, 64), (3, 70), (1, 1), (2, 0), (0, 3)]
#: the backend of the explicit GPU schedules (tests/cuda/test_cuda_issue24_25.py sets "cuda")
GPU = "interp-cuda"


@pytest.mark.parametrize("sched", [cross_thread, rfactor_threads], ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_gpu_schedules(sched, shape, rng):
    x = _data(rng, shape, ties=True)
    if x.size and shape[1] > 40:
        x[0, 35] = x[0, 40] = np.nan           # NaNs in different threads: the first wins
    v, i = _scheduled(argmax_rows, sched, "cuda")(x, backend=GPU)
    if shape[1]:
        np.testing.assert_array_equal(i, np.argmax(x, axis=1))
    else:
        np.testing.assert_array_equal(i, np.full(shape[0], 2 ** 62))
    y = rng.standard_normal(shape) * 10
    got = _scheduled(lse_rows, sched, "cuda")(y, backend=GPU)
    np.testing.assert_allclose(got, np_lse(y), rtol=1e-12, atol=1e-12)
    mean, var = _scheduled(welford_rows, sched, "cuda")(y, backend=GPU)
    if shape[1]:
        np.testing.assert_allclose(var, y.var(axis=1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("shape", [(3, 10), (2, 1), (2, 0)])
def test_rfactor_sequential(backend, shape, rng):
    x = _data(rng, shape, ties=True)
    v, i = _scheduled(argmax_rows, rfactor_serial, backend)(x, backend=backend)
    if shape[1]:
        np.testing.assert_array_equal(i, np.argmax(x, axis=1))
    y = rng.standard_normal(shape)
    mean, var = _scheduled(welford_rows, rfactor_serial, backend)(y, backend=backend)
    if shape[1]:
        np.testing.assert_allclose(var, y.var(axis=1), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ other forms
def lse_np_style(X):
    m, s = LSE((X, 1.0), axis=1)       # numpy style (members broadcast): a tuple of arrays
    return m + kd.log(s)


def lse_one_compute(X):
    n_, m_ = X.shape
    k = kd.reduce_axis(m_, name="k")

    def row(i):
        m, s = LSE((X[i, k], 1.0), axis=k)
        return m + kd.log(s)                            # both members: one shared stage
    return kd.compute((n_,), row, name="lse")


def pair_compute(X):
    n_, m_ = X.shape
    return kd.compute((n_, m_), lambda i, j: (X[i, j] * 2.0, X[i, j] + 1.0), name="P")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(5, 37), (1, 1), (3, 0)])
def test_other_forms(backend, shape, rng):
    x = rng.standard_normal(shape) * 4
    np.testing.assert_allclose(kd.kernel(lse_np_style)(x, backend=backend), np_lse(x),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kd.kernel(lse_one_compute)(x, backend=backend), np_lse(x),
                               rtol=1e-12, atol=1e-12)
    a, b = kd.kernel(pair_compute)(x, backend=backend)
    np.testing.assert_array_equal(a, x * 2.0)
    np.testing.assert_array_equal(b, x + 1.0)


def test_members_share_one_stage():
    from kdsl.frontend.spec import TensorSpec
    from kdsl.frontend.trace import trace
    g = trace(lse_one_compute, [TensorSpec(("n", "m"), "float64")])
    reds = [s for s in g.stages if s.is_reduction]
    assert len(reds) == 1 and len(reds[0].values) == 2
    g = trace(welford_rows, [TensorSpec(("n", "m"), "float64")])
    (b,) = [s for s in g.stages if s.is_reduction]
    assert [t.dtype.name for t in b.values] == ["float64"] * 3


def test_member_dtypes(rng):
    """argmax over float32 values with int32 indices: each member keeps its dtype (an
    identity member may be a function of its member's dtype)."""
    amax = kd.reducer(_argmax_combine, identity=(-np.inf, lambda d: np.iinfo(d.np).max))

    def f(X):
        n_, m_ = X.shape
        k = kd.reduce_axis(m_, name="k")
        return kd.compute((n_,), lambda i: amax((X[i, k], k.astype(np.int32)), axis=k), name="B")
    x = rng.standard_normal((4, 9)).astype(np.float32)
    for backend in BACKENDS:
        v, i = kd.kernel(f)(x, backend=backend)
        assert v.dtype == np.float32 and i.dtype == np.int32
        np.testing.assert_array_equal(i, np.argmax(x, axis=1))


# ------------------------------------------------------------------ the user's mistakes
def _apply(red, members=2):
    def f(X):
        n_, m_ = X.shape
        k = kd.reduce_axis(m_, name="k")
        return kd.compute((n_,), lambda i: red(tuple(X[i, k] for _ in range(members)), axis=k))
    return kd.kernel(f)


def test_not_commutative():
    r = kd.reducer(lambda a, b: (a[0] + b[0], a[1]), identity=(0.0, 0.0), name="bad")
    with pytest.raises(kd.errors.KernelValueError, match="not commutative"):
        _apply(r)(np.ones((2, 3)), backend="numpy")


def test_identity_not_absorbed():
    r = kd.reducer(lambda a, b: (a[0] + b[0], a[1] + b[1] + 1.0), identity=(0.0, 0.0))
    with pytest.raises(kd.errors.KernelValueError, match="changes when combined with itself"):
        _apply(r)(np.ones((2, 3)), backend="numpy")


def test_wrong_arity():
    r = kd.reducer(lambda a, b: a[0] + b[0], identity=(0.0, 0.0), name="one")
    with pytest.raises(kd.errors.KernelError, match="must return a tuple of 2"):
        _apply(r)(np.ones((2, 3)), backend="numpy")
    r = kd.reducer(lambda a, b: (a[0] + b[0], a[1] + b[1]), identity=(0.0, 0.0), name="two")
    with pytest.raises(kd.errors.KernelError, match="identity of 2 members"):
        _apply(r, members=3)(np.ones((2, 3)), backend="numpy")
    with pytest.raises(kd.errors.KernelError, match="identity must be a number"):
        kd.reducer(lambda a, b: a, identity=(0.0, "x"))


def test_cache_write_of_returned_members_is_refused():
    """Regression: cache_write copied only B out, leaving the returned B.v1 unwritten."""
    def cache(s):
        s.cache_write(s["B"], "local")
    with pytest.raises(kd.errors.ScheduleError, match="kernel's return value"):
        _scheduled(argmax_rows, cache, "interp")(np.ones((2, 3)), backend="interp")


def col_argmax(X):
    n_, m_ = X.shape
    k = kd.reduce_axis(n_, name="k")
    return kd.compute((m_,), lambda j: ARGMAX((X[k, j], k), axis=k), name="B")


@pytest.mark.parametrize("backend", ["cpu", "interp-cuda"])
@pytest.mark.parametrize("shape", [(37, 5), (1, 1), (0, 3), (70, 9)])
def test_column_reduction_default(backend, shape, rng):
    """The cuda default for a column reduction accumulates a tuple stage in place."""
    x = _data(rng, shape, ties=True)
    v, i = kd.kernel(col_argmax)(x, backend=backend)
    if shape[0]:
        np.testing.assert_array_equal(i, np.argmax(x, axis=0))


def lse_lower_triangle(X):
    n_, m_ = X.shape
    k = kd.reduce_axis(m_, name="k")
    m, s = kd.compute((n_,), lambda i: LSE((X[i, k], 1.0), axis=k, where=k <= i), name="B")
    return m + kd.log(s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_where_mask(backend, rng):
    x = rng.standard_normal((6, 4)) * 3
    want = np.array([np_lse(x[i:i + 1, :i + 1])[0] for i in range(6)])
    np.testing.assert_allclose(kd.kernel(lse_lower_triangle)(x, backend=backend), want,
                               rtol=1e-12, atol=1e-12)


def test_classic_welford_passes_the_check(rng):
    """Regression: the textbook update (mean = m1 + d * n2 / n) is commutative up to rounding
    only, and a state of count 0 with a nonzero mean (never reached) is not commutative at
    all: the check samples reachable states (constant members kept) with a tolerance."""
    def classic(a, b):
        n1, m1, q1 = a
        n2, m2, q2 = b
        cnt = n1 + n2
        safe = kd.where(cnt == 0, 1.0, cnt)
        d = m2 - m1
        return cnt, m1 + d * n2 / safe, q1 + q2 + d * d * n1 * n2 / safe
    w = kd.reducer(classic, identity=(0.0, 0.0, 0.0))

    def f(X):
        c, m, q = w((1.0, X, 0.0), axis=1)
        return q / c
    x = rng.standard_normal((4, 33))
    for backend in ("numpy", "cpu"):
        np.testing.assert_allclose(kd.kernel(f)(x, backend=backend), x.var(axis=1), rtol=1e-12)
