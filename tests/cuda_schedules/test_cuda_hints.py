"""Hints on top of the default cuda schedules: each changes the lowered kernel and keeps it
correct (interp-cuda against numpy); a hint naming a missing axis is the usual ScheduleError."""
import numpy as np
import pytest

import kdsl as kd
import cuda_workloads as W

S2 = (kd.TensorSpec(("n", "m"), kd.float32),)


def hinted(fn, **hints):
    return kd.kernel(kd.schedule("cuda", **hints)(fn))


def text(k, specs=S2):
    return str(k.lower(*specs, backend="cuda"))


def blocks(k, specs=S2):
    return [kk.launch.block for kk in k.lower(*specs, backend="cuda").kernels]


def correct(k, fn, args, exact=False):
    got = k(*args, backend="interp-cuda")
    want = W.ORACLES[fn](*[a.astype(np.float64) for a in args])
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=1e-4)


@pytest.fixture
def A(rng):
    return rng.standard_normal((7, 301)).astype(np.float32)


def test_threads(A):
    base = kd.kernel(W.rowsum)
    k = hinted(W.rowsum, threads=(64, 4))
    assert blocks(base) == [(32, 8, 1)] and blocks(k) == [(64, 4, 1)]
    correct(k, W.rowsum, [A])
    e = hinted(W.scale_add, threads=128)
    assert blocks(e, S2 * 2) == [(128, 1, 1)]
    correct(e, W.scale_add, [A, A])


def test_rfactor(A, rng):
    k = hinted(W.rowsum, rfactor=4)
    assert len(blocks(k)) == 2 and "sum.rf: float32[n, 4] global" in text(k)
    correct(k, W.rowsum, [A])
    t = hinted(W.total, rfactor=1)
    spec = (kd.TensorSpec(("n",), kd.float32),)
    assert len(blocks(kd.kernel(W.total), spec)) == 2 and len(blocks(t, spec)) == 1
    x = rng.standard_normal(3001).astype(np.float32)
    correct(t, W.total, [x])
    c = hinted(W.colsum, rfactor=3)
    assert len(blocks(c)) == 2
    correct(c, W.colsum, [A])


def test_tile(A, rng):
    k = hinted(W.rowsum, tile={"i0": 2})
    assert blocks(k) == [(32, 2, 1)]
    correct(k, W.rowsum, [A])
    e = hinted(W.scale_add, tile={"i1": 64})
    assert "i1.outer" in text(e, S2 * 2) and "i1.outer" not in text(kd.kernel(W.scale_add), S2 * 2)
    correct(e, W.scale_add, [A, A])
    specs = (kd.TensorSpec(("n", "k"), kd.float32), kd.TensorSpec(("k", "m"), kd.float32))
    m = hinted(W.matmul, tile={"i0": 16, "i1": 32, "r0": 4})
    t = text(m, specs)
    # (the default double-buffers them: a ring of 2 tiles)
    # (B's rows of 128 bytes padded by 16: kdsl.gpu.shared_layout)
    assert "A.shared: float32[2, 16, 4] shared" in t
    assert "B.shared: float32[2, 4, 32] strides (144, 36, 1) shared" in t
    a, b = rng.standard_normal((19, 10)).astype(np.float32), rng.standard_normal((10, 37)).astype(np.float32)
    correct(m, W.matmul, [a, b])


def test_vectorize(A):
    base = text(kd.kernel(W.rowsum))
    k = hinted(W.rowsum, vectorize=2)
    assert "sum.rf: float32[1, 4] local" in base and "sum.rf: float32[1, 2] local" in text(k)
    correct(k, W.rowsum, [A])
    off = hinted(W.scale_add, vectorize=1)
    assert "vectorized" in text(kd.kernel(W.scale_add), S2 * 2) and "vectorized" not in text(off, S2 * 2)
    correct(off, W.scale_add, [A, A])


def test_unroll(A):
    for fn, nin in ((W.rowsum, 1), (W.colsum, 1), (W.scale_add, 2)):
        k = hinted(fn, unroll=4)
        assert "unrolled" in text(k, S2 * nin) and "unrolled" not in text(kd.kernel(fn), S2 * nin)
        correct(k, fn, [A] * nin)


def test_hints_keep_the_rest_of_the_default(A):
    k = hinted(W.rowsum, unroll=2)
    t = text(k)
    assert "threadIdx.y" in t and "vectorized" in t and "cross_thread_sum" in t


def test_stages_double_buffer_the_matmul(rng):
    specs = (kd.TensorSpec(("n", "k"), kd.float32), kd.TensorSpec(("k", "m"), kd.float32))
    m = hinted(W.matmul, stages=2)
    assert "wait_group" in text(m, specs)
    a, b = rng.standard_normal((9, 20)).astype(np.float32), rng.standard_normal((20, 13)).astype(np.float32)
    correct(m, W.matmul, [a, b])


def test_softmax_hints_apply_to_the_chain(rng):
    k = hinted(W.softmax, threads=64)
    assert blocks(k) == [(64, 1, 1)]
    correct(k, W.softmax, [rng.standard_normal((3, 150)).astype(np.float32)])


def test_missing_axis_is_a_schedule_error():
    k = hinted(W.rowsum, tile={"zz": 4})
    with pytest.raises(kd.ScheduleError, match="names axis 'zz'"):
        k.lower(*S2, backend="cuda")
