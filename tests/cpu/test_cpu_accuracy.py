"""Float reductions as accurate as numpy's pairwise sums, on every layout (issue #8, item 2).

Errors are measured against an extended-precision oracle, in units of eps * sum(|x|), and
compared with numpy's own error on the same data.  A float32 accumulator that adds every
term saturates at 2**24 (the issue's reproducers) and drifts by ~sqrt(n) eps long before;
blocked, compensated sums stay within a few eps like numpy's.  The saturating reproducers
also run on a one-thread backend (with more threads each thread's share may stay below 2**24).
"""
import zlib

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends.registry import unregister_backend

BACKENDS = ["cpu", "cpu1", "numpy"]


@pytest.fixture(scope="module", autouse=True)
def one_thread_backend(cpu_backend):
    """The cpu backend planning and running one thread (no split of long sums across threads)."""
    from kdsl_cpu.backend import CPUBackend
    kd.register_backend("cpu1", CPUBackend(num_threads=1))
    yield
    unregister_backend("cpu1")


@kd.kernel
def k_sum(x):
    return x.sum()


@kd.kernel
def k_mean(x):
    return x.mean()


@kd.kernel
def k_rowsum(x):
    return x.sum(axis=1)


@kd.kernel
def k_colsum(x):
    return x.sum(axis=0)


@kd.kernel
def k_sum02(x):
    return x.sum(axis=(0, 2))


@kd.kernel
def k_matmul(a, b):
    return a @ b


def _exact(f, *args):
    return np.asarray(f(*[a.astype(np.longdouble) for a in args]), np.longdouble)


def _err(got, exact, scale, eps) -> float:
    """Largest error in units of eps * sum(|x|) (the bound of a well-ordered sum)."""
    got = np.asarray(got, np.longdouble)
    return float(np.max(np.abs(got - exact) / np.maximum(scale, 1e-300))) / eps


def _check(kernel, npf, args, backend, slack=4.0, floor=2.0):
    eps = float(np.finfo(args[0].dtype).eps)
    exact = _exact(npf, *args)
    scale = _exact(npf, *[np.abs(a) for a in args])
    mine = _err(kernel(*args, backend=backend), exact, scale, eps)
    ref = _err(npf(*args), exact, scale, eps)
    assert mine <= slack * ref + floor, f"error {mine:.2f} eps, numpy's {ref:.2f} eps"


# ----------------------------------------------------------------- the issue's reproducers
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue_reproducers_do_not_saturate(backend):
    a = np.ones((20_000_000, 2), np.float32)[:, 0]
    assert k_sum(a, backend=backend) == 2e7
    assert k_mean(a, backend=backend) == 1.0
    del a
    b = np.ones(80_000_000, np.float32)[::2]
    assert k_sum(b, backend=backend) == 4e7


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_and_2d_sums_past_2_to_the_24(backend):
    """Sums whose accumulator is a tile (a column sum) or spans two loops (a 2-D full sum)."""
    c = np.ones((2 ** 24 + 4096, 3), np.float32)
    assert (k_colsum(c, backend=backend) == 2 ** 24 + 4096).all()
    assert k_sum(c, backend=backend) == 3 * (2 ** 24 + 4096)


# ----------------------------------------------------------------- random data, every layout
def _data(rng, n, dtype):
    return (rng.random(n) + 0.25).astype(dtype)       # one sign: no cancellation to hide drift


LAYOUTS = {
    "contiguous": lambda x: x,
    "stride 2": lambda x: x[::2],
    "stride 3": lambda x: x[::3],
    "reversed": lambda x: x[::-1],
    "column of 2-D": lambda x: x[:x.size // 3 * 3].reshape(-1, 3)[:, 1],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_full_sum_and_mean_every_layout(backend, dtype, layout):
    rng = np.random.default_rng(zlib.crc32(f"{backend} {layout} {dtype}".encode()))
    x = LAYOUTS[layout](_data(rng, 2 ** 20 + 7, dtype))
    _check(k_sum, np.sum, (x,), backend)
    _check(k_mean, np.mean, (x,), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_column_and_multi_axis_sums(backend, dtype):
    rng = np.random.default_rng(5)
    x = _data(rng, 2 ** 20, dtype)
    for shape in [(32, 2 ** 15), (2 ** 15, 32), (2 ** 19, 2), (3, 2 ** 18 + 1)]:
        a = x[:shape[0] * shape[1]].reshape(shape)
        _check(k_rowsum, lambda v: v.sum(axis=1), (a,), backend)
        _check(k_colsum, lambda v: v.sum(axis=0), (a,), backend, slack=1.0)
        _check(k_colsum, lambda v: v.sum(axis=0), (a.T.copy().T,), backend)
        _check(k_sum, np.sum, (a,), backend)
    b = x[:2 ** 20].reshape(32, 128, 256)
    _check(k_sum02, lambda v: v.sum(axis=(0, 2)), (b,), backend)
    _check(k_sum02, lambda v: v.sum(axis=(0, 2)), (b[:, :, ::-2],), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_half_precision_sums_accumulate_accurately(backend):
    rng = np.random.default_rng(6)
    x = (rng.random(2 ** 16) * 0.5).astype(np.float16)
    for v in (x, x[::2], x[::-1]):
        _check(k_sum, np.sum, (v,), backend, floor=2.0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_with_a_long_k(backend, dtype):
    """The K loop (blocked by the default GEMM schedule) against numpy's BLAS."""
    rng = np.random.default_rng(7)
    a = _data(rng, 5 * 2 ** 16, dtype).reshape(5, 2 ** 16)
    b = _data(rng, 3 * 2 ** 16, dtype).reshape(2 ** 16, 3)
    _check(k_matmul, np.matmul, (a, b), backend, floor=8.0)
    _check(k_matmul, np.matmul, (a, b[:, ::-1]), backend, floor=8.0)


@kd.kernel
def k_prod(x):
    return x.prod()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_round_once_per_factor(backend, dtype):
    """A product rounds once per multiplication whatever the order (blocks would not help):
    its error is a random walk of n roundings, ~sqrt(n) eps, as numpy's sequential product."""
    rng = np.random.default_rng(10)
    n = 2 ** 16
    x = (1 + (rng.random(n) - 0.5) * 1e-2).astype(dtype)
    eps = float(np.finfo(dtype).eps)
    for v in (x, x[::2], x[::-1]):
        exact = np.prod(v.astype(np.longdouble))
        got = np.longdouble(k_prod(v, backend=backend))
        assert abs(got - exact) / abs(exact) <= 4 * np.sqrt(v.size) * eps


@pytest.mark.parametrize("backend", BACKENDS)
def test_infinities_and_nans_across_blocks(backend):
    x = np.ones(5000, np.float32)
    for pos, vals, want in [(3000, [np.inf], np.inf), (10, [-np.inf], -np.inf),
                            (4000, [np.nan], np.nan), (100, [np.inf, -np.inf], np.nan)]:
        y = x.copy()
        y[pos:pos + len(vals)] = vals
        got = k_sum(y, backend=backend)
        assert (np.isnan(got) and np.isnan(want)) or got == want, (pos, vals, got)
    big = np.full(3000, 3e38, np.float32)
    assert k_sum(big, backend=backend) == np.inf
    assert k_sum(big[::-1], backend=backend) == np.inf


# ----------------------------------------------------------------- hinted and explicit schedules
def _rf_lanes(s):
    """8 partial sums in vector lanes: the accumulator is a tile indexed by the lane loop."""
    S = s["sum"]
    _, ki = S.split(S.reduce_axes[0], factor=8)
    rf = s.rfactor(S, ki)
    (lane,) = rf.stage.axes
    (r,) = rf.stage.reduce_axes
    rf.reorder(r, lane)
    rf.vectorize(lane)


def _full(a):
    return a.sum()


def _rows(a):
    return a.sum(axis=1)


def _cols(a):
    return a.sum(axis=0)


@pytest.mark.parametrize("sched", [dict(rfactor=8), dict(unroll=4), _rf_lanes])
def test_scheduled_full_sums(sched):
    k = kd.kernel(kd.schedule("cpu", sched)(_full) if callable(sched)
                  else kd.schedule("cpu", **sched)(_full))
    x = _data(np.random.default_rng(8), 2 ** 20 + 3, np.float32)
    for v in (x, x[::3], x[::-1]):
        _check(k, np.sum, (v,), "cpu")


@pytest.mark.parametrize("hints", [dict(vectorize=8), dict(rfactor=8), dict(unroll=4),
                                   dict(parallel=True)])
def test_hinted_row_and_column_sums(hints):
    x = _data(np.random.default_rng(9), 2 ** 20, np.float32)
    for body, npf, shape in [(_rows, _rows, (32, 2 ** 15)), (_cols, _cols, (2 ** 15, 32))]:
        k = kd.kernel(kd.schedule("cpu", **hints)(body))
        _check(k, npf, (x.reshape(shape),), "cpu")
