"""out= arrays that overlap the inputs: the result must be numpy's (inputs read first).

The cpu backend tells LLVM that buffers do not alias; the kernel call copies
through a fresh array when they would.
"""
import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def shift_sum(A):
    n, = A.shape
    k = kd.reduce_axis(3, name="k")
    return kd.compute((n - 2,), lambda i: kd.sum(A[i + k], axis=k), name="B")


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def scale(a):
    return a * 2.0


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_out_overlapping_input_is_read_first(backend, rng):
    a = rng.random(1000).astype(np.float64)
    want = a[:-2] + a[1:-1] + a[2:]
    for _ in range(4):       # past the point where the fast launcher is built
        buf = a.copy()
        got = shift_sum(buf, out=buf[2:], backend=backend)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(buf[2:], want, rtol=1e-12)


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_out_is_the_input_row_storage(backend, rng):
    A = rng.random((64, 64))
    want = A.sum(axis=1)
    for _ in range(4):
        B = A.copy()
        rowsum(B, out=B[:, 0], backend=backend)
        np.testing.assert_allclose(B[:, 0], want, rtol=1e-12)


def test_in_place_elementwise_and_disjoint_out(rng):
    a = rng.random(100)
    for _ in range(4):
        b = a.copy()
        assert scale(b, out=b) is b
        np.testing.assert_allclose(b, a * 2.0)
        o = np.empty_like(a)
        assert scale(a, out=o) is o
        np.testing.assert_allclose(o, a * 2.0)


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_overlapping_out_of_the_wrong_shape_is_kdsl_s_error(backend):
    """An out= that overlaps an input and has the wrong shape gets the same ArgumentError as
    one that does not overlap (it was numpy's broadcast ValueError)."""
    @kd.kernel
    def inc(a):
        return a + 1
    a = np.zeros(8, np.float32)
    with pytest.raises(kd.ArgumentError, match=r"out= array 0 has shape \(5,\), but the result"):
        inc(a, out=a[:5], backend=backend)
    assert not a.any()      # nothing written
