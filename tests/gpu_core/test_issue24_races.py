"""Issue 24 items 1-3: GPU schedules that gave wrong answers or raced, accepted by kdsl.

Each reproducer runs on the race-checking SIMT executor (``interp-cuda``: a race, a divergent
barrier or a read of never-written shared memory is an error there) against numpy in float64;
the suite's conftest hook also compiles every GPU-form kernel with NVRTC where it is installed.
"""
import numpy as np
import pytest

import kdsl as kd


def _f64(x):
    return x.astype(np.float64)


# ----------------------------------------------------------------------------- item 1
def _mm(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")


def _vector_copy_sched(s):
    """The issue's schedule: a 4x8 block, B's tile copied cooperatively by 2-wide vectors."""
    C = s["C"]
    CL = s.cache_write(C, "local")
    AA = s.cache_read("A", "shared", [CL])
    BB = s.cache_read("B", "shared", [CL])
    by, bx, ty, tx = C.tile(C.axes[0], C.axes[1], 4, 8)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        C.bind(ax, tag)
    CL.compute_at(C, tx)
    ko, ki = CL.split(CL.reduce_axes[0], factor=8)
    CL.reorder(ko, ki, *CL.axes)
    AA.compute_at(CL, ko)
    o, t = AA.split(AA.fuse(*AA.axes), factor=32)
    y, x = AA.split(t, factor=8)
    AA.bind(y, "threadIdx.y")
    AA.bind(x, "threadIdx.x")
    BB.compute_at(CL, ko)
    f, v = BB.split(BB.fuse(*BB.axes), factor=2)
    BB.vectorize(v)
    o, t = BB.split(f, factor=32)
    y, x = BB.split(t, factor=8)
    BB.bind(y, "threadIdx.y")
    BB.bind(x, "threadIdx.x")


@pytest.mark.parametrize("specialize", [False, True])
@pytest.mark.parametrize("n,k,m", [(1, 19, 1), (5, 19, 9), (1, 7, 3), (4, 8, 1), (3, 1, 2)])
def test_vector_copy_under_a_shrunk_consumer_thread_loop(n, k, m, specialize, rng):
    """Size-1 dims or specialize=True shrink C's thread loops; the vectorised cooperative copy
    of B's tile inside them is still done by every thread bound to its own loops (was: NaN)."""
    kern = kd.kernel(specialize=specialize)(_mm)
    kern.schedule("cuda")(_vector_copy_sched)
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    got = kern(a, b, backend="interp-cuda")
    np.testing.assert_allclose(got, _f64(a) @ _f64(b), rtol=1e-5, atol=1e-5)


def test_vector_copy_ones_give_the_sum_length():
    kern = kd.kernel(_mm)
    kern.schedule("cuda")(_vector_copy_sched)
    got = kern(np.ones((1, 19), np.float32), np.ones((19, 1), np.float32), backend="interp-cuda")
    np.testing.assert_array_equal(got, [[19.0]])
