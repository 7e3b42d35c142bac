"""Issue 24 item 6: generated CUDA that NVRTC rejected, and a product attached at ``j.inner``
with an empty dimension.  Each kernel is printed for cuda, compiled by NVRTC (no GPU needed),
and run on interp-cuda against numpy in float64 (the NVRTC hook of tests/conftest.py compiles
every interp-cuda run too)."""
import numpy as np
import pytest

import kdsl as kd
from kdsl_cuda.build import compile_cubin


def _two_dynamic_shared(pair: bool):
    """A GEMM whose A and B tiles (``pair``: and the result's shared cache_write) are shared
    buffers sized at run time (the whole K extent): several dynamic shared buffers in one
    kernel, the second at an offset computed from a shape (it used an undeclared ``A_1_i``)."""
    @kd.kernel
    def mm(A, B):
        n, k = A.shape
        _, m = B.shape
        r = kd.reduce_axis(k, name="r")
        return kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")

    @mm.schedule("cuda")
    def sched(s):
        C = s["C"]
        reader = s.cache_write(C, "shared") if pair else C
        AA = s.cache_read("A", "shared", [reader])
        BB = s.cache_read("B", "shared", [reader])
        by, bx, ty, tx = C.tile(C.axes[0], C.axes[1], 4, 8)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                        (tx, "threadIdx.x")):
            C.bind(ax, tag)
        if pair:
            reader.compute_at(C, bx)
            ri, rj = reader.axes
            reader.bind(ri, "threadIdx.y")
            reader.bind(rj, "threadIdx.x")
        for S in (AA, BB):
            S.compute_at(C, bx)
            o, t = S.split(S.fuse(*S.axes), factor=32)
            y, x = S.split(t, factor=8)
            S.bind(y, "threadIdx.y")
            S.bind(x, "threadIdx.x")
    return mm


@pytest.mark.parametrize("pair", [False, True], ids=["cache_read_pair", "with_cache_write"])
@pytest.mark.parametrize("n,k,m", [(5, 7, 9), (16, 33, 24), (0, 3, 4), (3, 0, 2)])
def test_dynamic_shared_buffers_compile_and_run(pair, n, k, m):
    mm = _two_dynamic_shared(pair)
    rng = np.random.default_rng()
    A = rng.random((n, k)).astype(np.float32)
    B = rng.random((k, m)).astype(np.float32)
    src = mm.source(A, B, backend="cuda")
    assert src.count("kd_dyn_smem +") >= 1           # a second dynamic buffer at an offset
    assert compile_cubin(src, name="issue24_mm.cu")[:4] == b"\x7fELF"
    got = mm(A, B, backend="interp-cuda")
    np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


def _product_at_j_inner(specialize: bool, bind: bool):
    @kd.kernel(specialize=specialize)
    def h(A, B):
        n, k = A.shape
        _, m = B.shape
        r = kd.reduce_axis(k, name="r")
        C = kd.compute((n, m), lambda i, j: kd.prod(A[i, r] + B[r, j], axis=r), name="C")
        return kd.compute((n, m), lambda i, j: C[i, j] + 1.0, name="O")

    def sched(s):
        O, C = s["O"], s["C"]
        io, jo, ii, ji = O.tile(O.axes[0], O.axes[1], 3, 2)
        if bind:
            for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                            (ji, "threadIdx.x")):
                O.bind(ax, tag)
        C.compute_at(O, ji)
    for target in ("cuda", "cpu", "interp"):
        h.schedule(target)(sched)
    return h


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu", "interp-cuda"])
@pytest.mark.parametrize("specialize", [False, True])
@pytest.mark.parametrize("n,m", [(3, 0), (0, 3), (3, 5), (1, 1)])
def test_product_attached_at_j_inner_with_empty_dims(backend, specialize, n, m):
    h = _product_at_j_inner(specialize, bind=backend == "interp-cuda")
    rng = np.random.default_rng()
    A, B = rng.random((n, 2)), rng.random((2, m))
    want = (A[:, :, None] + B[None, :, :]).prod(axis=1) + 1.0
    got = h(A, B, backend=backend)
    assert got.shape == (n, m)
    np.testing.assert_allclose(got, want)
    if backend == "interp-cuda":
        assert compile_cubin(h.source(A, B, backend="cuda"), name="issue24_prod.cu")[:4] == \
            b"\x7fELF"
