"""Views read in place (strided, transposed, negative strides, zero-size), out= arrays of any
layout, and the parallel / vectorize / unroll hints, on both thread launchers."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.backends.registry import unregister_backend


@kd.kernel
def axpy(A, B, x):
    return A * x + B


@kd.kernel
def rowmax(A):
    return A.max(axis=1)


def _views(a):
    yield a
    yield a[::-1]
    yield a[:, ::-1]
    yield a[::-1, ::-2]
    yield np.asfortranarray(a)
    yield a.T.copy().T


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (6, 9), (33, 17)])
def test_views_in_place(shape, rng):
    a = rng.standard_normal(shape)
    b = rng.standard_normal(shape)
    for va in _views(a):
        for vb in _views(b):
            if va.shape != vb.shape:
                continue
            np.testing.assert_allclose(axpy(va, vb, 0.5, backend="cpu"), va * 0.5 + vb, rtol=1e-14)
        if va.shape[1]:
            np.testing.assert_array_equal(rowmax(va, backend="cpu"), va.max(axis=1))


def test_out_arrays_of_any_layout(rng):
    a, b = rng.standard_normal((8, 6)), rng.standard_normal((8, 6))
    for out in (np.empty((8, 6)), np.empty((6, 8)).T, np.empty((8, 12))[:, ::-2],
                np.empty((16, 6))[::2]):
        r = axpy(a, b, 2.0, out=out, backend="cpu")
        assert r is out
        np.testing.assert_allclose(out, a * 2 + b, rtol=1e-14)


def test_read_only_output_is_refused(rng):
    out = np.empty((2, 3))
    out.flags.writeable = False
    with pytest.raises(kd.ArgumentError, match="read-only"):
        axpy(np.ones((2, 3)), np.ones((2, 3)), 1.0, out=out, backend="cpu")


def _hinted(**hints):
    @kd.kernel
    @kd.schedule("cpu", **hints)
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return softmax


HINTS = [dict(parallel="i0"), dict(vectorize=8), dict(unroll=4), dict(parallel=True, vectorize=4),
         dict(parallel="i0", unroll=2), dict(tile={"i0": 4, "i1": 8}, parallel="i0", vectorize="i1")]


def _launchers():
    """The thread pool always; OpenMP where libgomp.so.1 exists (the backend uses it then)."""
    from kdsl_cpu import parallel
    return ["pool"] + (["omp"] if parallel.omp_launcher() is not None else [])


@pytest.fixture(params=_launchers())
def launcher(request):
    """A cpu backend with the given thread launcher and 3 threads, registered as "cpu"."""
    import kdsl_cpu
    be = kdsl_cpu.CPUBackend(threading=request.param, num_threads=3)
    kd.register_backend("cpu", be)
    yield be
    kd.register_backend("cpu", kdsl_cpu.backend)


@pytest.mark.parametrize("hints", HINTS, ids=lambda h: ",".join(f"{k}={v}" for k, v in h.items()))
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (7, 5), (37, 29)])
def test_hints_parallel_vectorize_unroll(launcher, hints, shape, rng):
    k = _hinted(**hints)
    x = rng.standard_normal(shape).astype(np.float32)
    for v in (x, x[::-1]):
        e = np.exp(v.astype(np.float64) - v.max(axis=1, keepdims=True))
        np.testing.assert_allclose(k(v, backend="cpu"), e / e.sum(axis=1, keepdims=True),
                                   rtol=1e-5, atol=1e-6)


def test_parallel_outlines_and_metadata():
    k = _hinted(parallel="i0", vectorize=8)
    src = k.source(kd.TensorSpec(("n", "m"), kd.float32), backend="cpu")
    # no forced vectorize/unroll request that LLVM could refuse (it would print on stderr):
    # the lane loop is only kept from early full unrolling, for LLVM's loop vectorizer
    # (a lane loop of exp is explicit vector code since vector.py emits exp: no loop left)
    assert ("llvm.loop.unroll.disable" in src or "kdsl.exp.v8f32" in src)
    assert "llvm.loop.vectorize.enable" not in src
    assert ".par1" in src                       # the outlined chunk function
    k2 = _hinted(unroll=4)
    src2 = k2.source(kd.TensorSpec(("n", "m"), kd.float32), backend="cpu")
    # the 4-iteration loop is small enough for LLVM's full unroll, which cannot fail there;
    # never the open-ended unroll.enable request that LLVM refused with a warning
    assert "llvm.loop.unroll.full" in src2 and "llvm.loop.unroll.enable" not in src2


def test_nested_parallel_and_big_temporaries(launcher, rng):
    """Parallel loops inside parallel loops run serially; a large temporary is malloc'ed."""
    @kd.kernel
    def two(A):
        return (A - A.mean(axis=1, keepdims=True)).sum(axis=0)

    def sched(s):
        for st in s.stages:
            if st.axes:
                st.parallel(st.axes[0])
    two.schedule("cpu")(sched)
    a = rng.standard_normal((3000, 7))
    ref = (a - a.mean(axis=1, keepdims=True)).sum(axis=0)
    np.testing.assert_allclose(two(a, backend="cpu"), ref, rtol=1e-9, atol=1e-9)
    assert "malloc" in two.source(kd.TensorSpec(("n", "m"), kd.float64), backend="cpu")


def test_bound_gpu_schedules_run_serially(rng):
    @kd.kernel
    def rs(A):
        n, m = A.shape
        k = kd.reduce_axis(m, name="k")
        return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")

    def sched(s):
        B = s["B"]
        xo, xi = B.split(B.axes[0], factor=4)
        B.bind(xo, "blockIdx.x")
        B.bind(xi, "threadIdx.x")
    rs.schedule("cpu")(sched)
    a = rng.standard_normal((10, 6))
    np.testing.assert_allclose(rs(a, backend="cpu"), a.sum(1), rtol=1e-12)
