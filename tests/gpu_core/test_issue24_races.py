"""Issue 24 items 1-3: GPU schedules that gave wrong answers or raced, accepted by kdsl.

Each reproducer runs on the race-checking SIMT executor (``interp-cuda``: a race, a divergent
barrier or a read of never-written shared memory is an error there) against numpy in float64;
the suite's conftest hook also compiles every GPU-form kernel with NVRTC where it is installed.
"""
import numpy as np
import pytest

import kdsl as kd

#: the GPU backend these reproducers run on (tests/cuda/test_cuda_issue24_25.py sets "cuda")
GPU = "interp-cuda"


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
    got = kern(a, b, backend=GPU)
    np.testing.assert_allclose(got, _f64(a) @ _f64(b), rtol=1e-5, atol=1e-5)


def test_vector_copy_ones_give_the_sum_length():
    kern = kd.kernel(_mm)
    kern.schedule("cuda")(_vector_copy_sched)
    got = kern(np.ones((1, 19), np.float32), np.ones((19, 1), np.float32), backend=GPU)
    np.testing.assert_array_equal(got, [[19.0]])


# ----------------------------------------------------------------------------- item 2
def _g(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    C = kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")
    return kd.compute((n, m), lambda i, j: C[i, j] + 1.0, name="O")


def _g_sched(s):
    """C attached at O's blockIdx.x loop with none of its loops bound: every thread used to
    accumulate into the same shared C (a read-modify-write race)."""
    O, C = s["O"], s["C"]
    by, bx, ty, tx = O.tile(O.axes[0], O.axes[1], 2, 8)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        O.bind(ax, tag)
    C.compute_at(O, bx)


@pytest.mark.parametrize("n,k,m", [(5, 7, 11), (2, 8, 8), (1, 1, 1), (3, 0, 4), (4, 13, 17)])
def test_unbound_stage_attached_in_a_block_runs_once(n, k, m, rng):
    kern = kd.kernel(_g)
    kern.schedule("cuda")(_g_sched)
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    got = kern(a, b, backend=GPU)
    np.testing.assert_allclose(got, _f64(a) @ _f64(b) + 1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kern(a, b, backend="interp"), _f64(a) @ _f64(b) + 1, rtol=1e-5, atol=1e-5)


def test_unbound_stage_race_is_reported_without_the_fix(rng, monkeypatch):
    """The race checker is the oracle: with ``pin_unspread`` off, the SIMT run reports the
    read-modify-write race the issue describes (it is not hidden by equal values)."""
    from kdsl.gpu.simt import RaceError
    from kdsl.gpu import sync
    monkeypatch.setattr(sync, "pin_unspread", lambda k: k)
    kern = kd.kernel(_g)
    kern.schedule("cuda")(_g_sched)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (7, 11)))
    with pytest.raises(RaceError, match="shared buffer 'C'"):
        kern(a, b, backend="interp-cuda")


def test_copy_bound_to_threadIdx_x_only_in_a_2d_block(rng):
    """A shared tile copied over threadIdx.x alone inside a block of 8x8 threads: the rows of
    threads do not repeat it (was: a write-after-write race on the tile)."""
    kern = kd.kernel(_mm)

    @kern.schedule("cuda")
    def _(s):
        C = s["C"]
        AA = s.cache_read("A", "shared", [C])
        by, bx, ty, tx = C.tile(C.axes[0], C.axes[1], 8, 8)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            C.bind(ax, tag)
        ko, ki = C.split(C.reduce_axes[0], factor=8)
        AA.compute_at(C, ko)
        AA.bind(AA.axes[1], "threadIdx.x")
    for shape in ((13, 21, 9), (8, 8, 8), (1, 3, 1)):
        n, k, m = shape
        a = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal((k, m)).astype(np.float32)
        np.testing.assert_allclose(kern(a, b, backend=GPU), _f64(a) @ _f64(b), rtol=1e-5, atol=1e-5)


def test_copy_bound_to_a_block_index_inside_a_block_is_refused(rng):
    kern = kd.kernel(lambda A: kd.compute(A.shape, lambda i: A[i] * 2.0, name="O"))

    @kern.schedule("cuda")
    def _(s):
        O = s["O"]
        AA = s.cache_read("A", "shared", [O])
        bx, tx = O.split(O.axes[0], factor=8)
        O.bind(bx, "blockIdx.x")
        O.bind(tx, "threadIdx.x")
        AA.compute_at(O, bx)
        ao, ai = AA.split(AA.axes[0], factor=4)
        AA.bind(ao, "blockIdx.x")
        AA.bind(ai, "threadIdx.x")
    with pytest.raises(kd.ScheduleError) as ei:
        kern(rng.standard_normal(13).astype(np.float32), backend=GPU)
    e = ei.value
    assert "stage A.shared: its axis ax0.outer is bound to blockIdx.x" in str(e)
    assert "inside the blockIdx.x loop i.outer of stage O" in str(e)
    assert "threadIdx" in e.hint and e.loc.line is not None and "AA.bind(ao" in str(e)


def _rowsum2(A):
    k = kd.reduce_axis(A.shape[1], name="k")
    B = kd.compute((A.shape[0],), lambda i: kd.sum(A[i, k], axis=k), name="B")
    return kd.compute((A.shape[0],), lambda i: B[i] * 2.0, name="C")


@pytest.mark.parametrize("shape", [(5, 70), (1, 1), (3, 33), (0, 4), (2, 0)])
def test_cross_thread_reduction_inside_a_block_only_output(shape, rng):
    """k bound to threadIdx.x inside an output stage that binds only blockIdx.x: the output is
    stored by one thread (was: every thread stored the same element)."""
    kern = kd.kernel(_rowsum2)

    @kern.schedule("cuda")
    def _(s):
        B, C = s["B"], s["C"]
        C.bind(C.axes[0], "blockIdx.x")
        B.compute_at(C, C.axes[0])
        ko, ki = B.split(B.reduce_axes[0], factor=32)
        B.reorder(ki, ko)
        B.bind(ki, "threadIdx.x")
    a = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(kern(a, backend=GPU), _f64(a).sum(1) * 2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kern(a, backend="interp"), _f64(a).sum(1) * 2, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- item 3
def _ew(A):
    k = kd.reduce_axis(A.shape[1], name="k")
    B = kd.compute((A.shape[0],), lambda i: kd.sum(A[i, k], axis=k), name="B")
    return kd.compute((A.shape[0],), lambda i: B[i] + 2, name="C")


def _ew_sched(s):
    B, C = s["B"], s["C"]
    bx, ty = C.split(C.axes[0], factor=16)
    BF = s.rfactor(B, B.split(B.reduce_axes[0], factor=16)[1])
    B.compute_at(C, ty)
    C.bind(bx, "blockIdx.x")
    C.bind(ty, "threadIdx.y")
    B.bind(B.reduce_axes[0], "threadIdx.x")
    BF.compute_at(B, B.reduce_axes[0])


@pytest.mark.parametrize("shape", [(10, 1025), (1, 1), (17, 3), (0, 5), (33, 16)])
def test_rfactor_cross_thread_epilogue_stored_by_one_thread(shape, rng):
    kern = kd.kernel(_ew)
    kern.schedule("cuda")(_ew_sched)
    a = rng.standard_normal(shape).astype(np.float32)
    want = _f64(a).sum(1) + 2
    np.testing.assert_allclose(kern(a, backend=GPU), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(kern(a, backend="interp"), want, rtol=1e-5, atol=1e-4)
    src = kern.source(a, backend="interp-cuda")
    # the epilogue runs on thread 0 of each row of threads: a one-iteration threadIdx.x loop
    assert "in range(1):  # bound threadIdx.x" in src


def _ew_sched_attach_first(s):
    """TVM's order too: B attached (and its reduction split) before rfactor; the
    attachment is kept (fuzz case 100:35, refused before session 16)."""
    B, C = s["B"], s["C"]
    bx, ty = C.split(C.axes[0], factor=16)
    C.bind(bx, "blockIdx.x")
    C.bind(ty, "threadIdx.y")
    B.compute_at(C, ty)
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    BF = s.rfactor(B, ki)
    B.bind(B.reduce_axes[0], "threadIdx.x")
    BF.compute_at(B, B.reduce_axes[0])


@pytest.mark.parametrize("shape", [(10, 1025), (1, 1), (0, 5)])
def test_rfactor_after_compute_at_keeps_the_attachment(shape, rng):
    kern = kd.kernel(_ew)
    kern.schedule("cuda")(_ew_sched_attach_first)
    a = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(kern(a, backend=GPU), _f64(a).sum(1) + 2, rtol=1e-5, atol=1e-4)
    ref = kd.kernel(_ew)
    ref.schedule("cuda")(_ew_sched)
    assert str(kern.lower(a, backend="cuda")) == str(ref.lower(a, backend="cuda"))


def test_rfactor_of_a_bound_reduction_axis_is_refused(rng):
    def sched(s):
        B = s["B"]
        ko, ki = B.split(B.reduce_axes[0], nparts=16)
        B.bind(ko, "threadIdx.x")
        s.rfactor(B, ki)
    kern = kd.kernel(_ew)
    kern.schedule("cuda")(sched)
    with pytest.raises(kd.ScheduleError, match="before binding reduction axes of B") as e:
        kern(rng.standard_normal((4, 40)).astype(np.float32), backend=GPU)
    assert "then bind" in e.value.hint


def test_rfactor_epilogue_race_is_reported_without_the_fix(rng, monkeypatch):
    from kdsl.gpu.simt import RaceError
    from kdsl.gpu import sync
    monkeypatch.setattr(sync, "pin_unspread", lambda k: k)
    kern = kd.kernel(_ew)
    kern.schedule("cuda")(_ew_sched)
    with pytest.raises(RaceError, match="global buffer 'C'"):
        kern(rng.standard_normal((10, 40)).astype(np.float32), backend="interp-cuda")
