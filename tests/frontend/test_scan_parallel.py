"""Parallel scans and tuple-state scans (issue 25 items 2 and 4): the blocked form of the
associative scans (kdsl.backends.scan_blocked: block totals, a scan of the totals, a segmented
scan) chosen by the cpu and GPU default schedules, ``np.<ufunc>.accumulate``, and ``kd.scan``
with a tuple state, against numpy in float64 on every host backend and the SIMT interpreter.
The block sizes are made tiny here so that several levels of blocks, ragged last blocks and
one-block scans all run on small inputs."""
import numpy as np
import pytest

import kdsl as kd
import kdsl.backends.scan_schedules as ss
from kdsl.errors import KernelError, ScheduleError

HOST = ["numpy", "interp", "cpu", "interp-cuda"]


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of 4 steps (cpu and GPU), GPU scans longer than 8 steps blocked (twice for 40);
    the GPU's tile scans: tiles of 2 rows of 4 threads (8 steps: twice blocked for 40)."""
    # the disk cache's key before scheduling holds the schedules' source, not patched values:
    # off here, or a kernel compiled with the real block sizes could be loaded
    monkeypatch.setenv("KDSL_CACHE", "0")
    monkeypatch.setattr(ss, "GPU_BLOCK_MIN", 8)
    monkeypatch.setattr(ss, "GPU_CHUNK", 4)
    monkeypatch.setattr(ss, "CPU_CHUNK", 4)
    monkeypatch.setattr(ss, "GPU_TILE_THREADS", 4)
    monkeypatch.setattr(ss, "GPU_TILE_ROWS", 2)
    monkeypatch.setattr(ss, "GPU_ONE_TILE_BYTES", 0)


def _kernels():
    """Fresh kernels (each test's block sizes give their own compiled code)."""
    @kd.kernel
    def csum(x):
        return np.cumsum(x)

    @kd.kernel
    def ops(x, b):
        return np.cumprod(x), np.maximum.accumulate(x * 1.5), np.bitwise_xor.accumulate(b)

    @kd.kernel
    def col(X):
        return np.cumsum(X, axis=0)
    cpu2 = kd.schedule("cpu", threads=2)
    return cpu2(csum), cpu2(ops), cpu2(col)


@pytest.mark.parametrize("backend", ["cpu", "interp-cuda"])
def test_blocked_scans_match_numpy(backend, tiny_blocks, rng):
    csum, ops, col = _kernels()
    for n in (0, 1, 4, 7, 40):               # empty, one step, one block, ragged, 2 levels
        x = rng.random(n)
        np.testing.assert_allclose(csum(x, backend=backend), np.cumsum(x), rtol=1e-12)
    v = rng.random(120)[::-3]                 # a strided view, 40 elements
    np.testing.assert_allclose(csum(v, backend=backend), np.cumsum(v), rtol=1e-12)
    for n in (7, 40):
        xi = rng.integers(-2, 3, n).astype(np.int32)
        b = rng.integers(0, 1 << 12, n).astype(np.int16)
        got = ops(xi, b, backend=backend)
        want = (np.cumprod(xi), np.maximum.accumulate(xi * 1.5), np.bitwise_xor.accumulate(b))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    # strided columns: (12, 3) blocked on the GPU (the cpu runs the columns in parallel),
    # (12, 1) blocked on both (an axis of size 1 is no parallelism)
    X = rng.random((23, 3))[::2, ::-1]
    X = X if backend == "interp-cuda" else X[:, :1]
    np.testing.assert_allclose(col(X, backend=backend), np.cumsum(X, axis=0), rtol=1e-12)
    assert "cumsum.part" in str(col.lower(X, backend=backend))
    src = csum.lower(rng.random(40), backend=backend)
    assert "cumsum.part" in str(src) and "cumsum.carry" in str(src)


def test_blocked_nan_and_exact_ints_interp_cuda(tiny_blocks, rng):
    csum, _, _ = _kernels()

    @kd.kernel
    def cmax(x):
        return kd.cummax(x)
    x = rng.random(13)
    x[9] = np.nan
    np.testing.assert_array_equal(cmax(x, backend="interp-cuda"), np.maximum.accumulate(x))
    big = rng.integers(-2**40, 2**40, 17)
    np.testing.assert_array_equal(csum(big, backend="interp-cuda"), np.cumsum(big))


def test_users_associative_scans_are_recognised(tiny_blocks, rng):
    @kd.kernel
    def twice_cumsum(X):        # init g, update g + s[t - 1]: a cumsum of 2 X
        return kd.scan(X.shape, lambda t, i: X[t, i] * 2,
                       lambda s, t, i: X[t, i] * 2 + s[t - 1, i])

    @kd.kernel
    def decay(X):               # s[t - 1] * 0.5 + X[t]: not of that form, stays serial
        return kd.scan(X.shape, lambda t, i: X[t, i], lambda s, t, i: s[t - 1, i] * 0.5 + X[t, i])
    X = rng.random((13, 2))
    assert "scan.part" in str(twice_cumsum.lower(X, backend="interp-cuda"))
    assert "part" not in str(decay.lower(X, backend="interp-cuda"))
    for backend in ("numpy", "interp-cuda"):
        np.testing.assert_allclose(twice_cumsum(X, backend=backend), np.cumsum(2 * X, 0), rtol=1e-12)
    ref = X.copy()
    for t in range(1, 13):
        ref[t] += ref[t - 1] * 0.5
    np.testing.assert_allclose(decay(X, backend="numpy"), ref, rtol=1e-12)


def test_explicit_blocked_scan_on_the_interpreter(rng):
    from kdsl.backends.scan_blocked import blocked_scan

    @kd.kernel
    def cs(x):
        return np.cumsum(x)

    @cs.schedule("interp")
    def _(s):
        _, carry, h = blocked_scan(s, "cumsum", 3)
        blocked_scan(s, carry, 2)                       # the carries blocked again
        o, _ = h.split(h.stage.axes[0], factor=3)       # the segmented scan: blocks outside
        with pytest.raises(ScheduleError, match="associative scan"):
            blocked_scan(s, h, 3)                       # already rewritten
    for n in (0, 1, 17):
        x = rng.integers(-50, 50, n)
        np.testing.assert_array_equal(cs(x, backend="interp"), np.cumsum(x))


def test_default_cpu_blocks_a_long_float32_sum(rng):
    # the real block size (1024): reassociated float32 sums within a tolerance growing with n
    @kd.kernel
    def csum(x):
        return np.cumsum(x)
    csum = kd.schedule("cpu", threads=2)(csum)
    x = rng.random(5000).astype(np.float32)
    got = csum(x, backend="cpu")
    want = np.cumsum(x.astype(np.float64))
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want) / want) < 1e-7 * 5000 ** 0.5 * 4
    assert "cumsum.part" in str(csum.lower(x, backend="cpu"))


def test_short_gpu_scans_and_wide_ones_stay_serial(rng, monkeypatch):
    @kd.kernel
    def rows(X):
        return np.cumsum(X, axis=1)
    X = rng.random((3, 50))
    low = str(rows.lower(X, backend="interp-cuda"))    # 50 steps <= GPU_BLOCK_MIN
    assert "part" not in low
    np.testing.assert_allclose(rows(X, backend="interp-cuda"), np.cumsum(X, 1), rtol=1e-12)

    @kd.kernel
    def flat(x):
        return np.cumsum(x)
    # sizes unknown (a TensorSpec): blocked, at most GPU_LEVELS levels (was: no end)
    monkeypatch.setattr(ss, "GPU_LEVELS", 2)
    low = str(flat.lower(kd.TensorSpec((None,), "float32"), backend="interp-cuda"))
    assert low.count("kernel ") == 2 * ss.GPU_LEVELS + 1


@pytest.mark.parametrize("backend", HOST)
def test_accumulate_dtypes_and_refusals(backend, rng):
    @kd.kernel
    def acc(x, b):
        return (np.add.accumulate(x, axis=1), np.logical_and.accumulate(b),
                np.multiply.accumulate(b), np.minimum.accumulate(b), np.bitwise_or.accumulate(b))
    x = rng.integers(0, 5, (2, 5)).astype(np.uint8)
    b = rng.integers(0, 3, 6).astype(np.int8)
    got = acc(x, b, backend=backend)
    want = (np.add.accumulate(x, axis=1), np.logical_and.accumulate(b),
            np.multiply.accumulate(b), np.minimum.accumulate(b), np.bitwise_or.accumulate(b))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)

    @kd.kernel
    def bad(x):
        return np.bitwise_or.accumulate(x)
    with pytest.raises(KernelError, match="integer or bool"):
        bad(np.zeros(3), backend=backend)

    @kd.kernel
    def bad2(x):
        return np.subtract.accumulate(x)
    with pytest.raises(KernelError, match="associative"):
        bad2(np.zeros(3), backend=backend)


# ----------------------------------------------------------------- tuple states
@kd.kernel
def online_softmax_pair(x):
    """The running (max, sum of exp(x - max)) along each row: two states updated together."""
    def init(i, j):
        return x[i, j], 1.0

    def update(s, i, j):
        m, z = s
        new = kd.maximum(m[i, j - 1], x[i, j])
        return new, z[i, j - 1] * kd.exp(m[i, j - 1] - new) + kd.exp(x[i, j] - new)
    return kd.scan(x.shape, init, update, axis=1)


@kd.kernel
def durbin(r):
    """PolyBench's durbin (Levinson-Durbin): y (a vector per step), alpha and beta together."""
    n = r.shape[0]

    def init(k, i):
        return kd.where(i == 0, -r[0], 0.0), -r[0], 1.0

    def update(s, k, i):
        y, a, b = s
        beta = (1.0 - a[k - 1, i] * a[k - 1, i]) * b[k - 1, i]
        j = kd.reduce_axis((0, k))
        tot = kd.sum(r[k - j - 1] * y[kd.maximum(k - 1, 0), j], axis=j)
        alpha = -(r[k] + tot) / beta
        ynew = kd.where(i < k, y[k - 1, i] + alpha * y[k - 1, kd.maximum(k - i - 1, 0)],
                        kd.where(i == k, alpha, 0.0))
        return ynew, alpha, beta
    y, _, _ = kd.scan((n, n), init, update)
    return y[n - 1]


def durbin_ref(r):
    n = len(r)
    y, z = np.zeros(n), np.zeros(n)
    y[0] = beta = alpha = -r[0]
    beta = 1.0
    for k in range(1, n):
        beta = (1 - alpha * alpha) * beta
        s = sum(r[k - i - 1] * y[i] for i in range(k))
        alpha = -(r[k] + s) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        y[:k] = z[:k]
        y[k] = alpha
    return y


@pytest.mark.parametrize("backend", HOST)
def test_tuple_state_scans(backend, rng):
    for shape in ((0, 3), (2, 1), (3, 6)):
        x = rng.random(shape)[:, ::-1]
        m, z = online_softmax_pair(x, backend=backend)
        np.testing.assert_allclose(m, np.maximum.accumulate(x, 1), rtol=1e-12)
        np.testing.assert_allclose(z * np.exp(m), np.cumsum(np.exp(x), 1), rtol=1e-12)
    for n in (1, 6):
        r = rng.random(n) * 0.3
        np.testing.assert_allclose(durbin(r, backend=backend), durbin_ref(r), rtol=1e-10)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_tuple_state_member_dtypes(backend, rng):
    @kd.kernel
    def count_and_sum(x):       # an int32 counter with a float64 sum: one float64 buffer
        return kd.scan(x.shape, lambda t: (np.int32(1), x[t]),
                       lambda s, t: (s[0][t - 1] + np.int32(1), s[1][t - 1] + x[t]))
    x = rng.random(5)
    c, s = count_and_sum(x, backend=backend)
    assert c.dtype == np.int32 and s.dtype == np.float64
    np.testing.assert_array_equal(c, np.arange(1, 6))
    np.testing.assert_allclose(s, np.cumsum(x), rtol=1e-12)


def test_tuple_state_errors():
    @kd.kernel
    def short(x):
        return kd.scan(x.shape, lambda t: (x[t], x[t]), lambda s, t: s[0][t - 1])
    with pytest.raises(KernelError, match="tuple of 2 values"):
        short(np.zeros(3), backend="numpy")

    @kd.kernel
    def step_of_tuple(x):
        return kd.scan(x.shape, lambda t: (x[t], x[t]), lambda s, t: s[t - 1])
    with pytest.raises(KernelError, match="pick a member"):
        step_of_tuple(np.zeros(3), backend="numpy")

    @kd.kernel
    def lossy(x, k):
        return kd.scan(x.shape, lambda t: (k[t], x[t]), lambda s, t: (s[0][t - 1], s[1][t - 1]))
    with pytest.raises(KernelError, match="exactly"):
        lossy(np.zeros(3), np.zeros(3, np.int64), backend="numpy")

    @kd.kernel
    def pair(x):
        return kd.scan(x.shape, lambda t, i: (x[t, i], x[t, i]),
                       lambda s, t, i: (s[0][t - 1, i] + s[1][t - 1, i], s[1][t - 1, i]))

    @pair.schedule("cuda")
    def _(s):
        st = s["scan"]
        t, i, m = st.axes
        st.reorder(i, t, m)
        st.bind(i, "blockIdx.x")
        st.bind(m, "threadIdx.x")
    with pytest.raises(ScheduleError, match="member axis"):
        pair(np.zeros((3, 2)), backend="interp-cuda")
