"""Edge tiles stay vector code (kdsl_cpu/codegen/vector.py, masked lanes): a vectorized loop whose
extent is a split's run-time tail is emitted at its constant bound under a lane mask, arrays
through llvm.masked.load/store, the thread's own temporaries read whole and written back with a
select.  Checked against numpy in float64 on sizes that do and do not divide the tile, 0 and 1,
strided and reversed views, four dtypes, and a write into a larger array (no lane past the
extent is stored)."""
import numpy as np
import pytest

import kdsl as kd


def _split16(s):
    h = s.stages[-1]
    _, ji = h.split(h.axes[-1], factor=16)
    h.vectorize(ji)


def _axpy(a, b):
    return a * 3 + b


def _data(rng, shape, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_split_tail_is_masked_vector_code_and_exact(dtype):
    k = kd.kernel(kd.schedule("cpu", _split16)(_axpy))
    rng = np.random.default_rng(1)
    src = k.source(np.ones((3, 17), dtype), np.ones((3, 17), dtype), backend="cpu")
    assert "llvm.masked.store" in src and "llvm.masked.load" in src
    for shape in [(3, 0), (0, 5), (1, 1), (2, 15), (3, 16), (3, 17), (4, 33), (5, 48)]:
        a, b = _data(rng, shape, dtype), _data(rng, shape, dtype)
        want = a.astype(np.float64) * 3 + b.astype(np.float64)
        np.testing.assert_allclose(k(a, b, backend="cpu"), want, rtol=1e-6, atol=1e-5)
    big = _data(rng, (4, 2 * 37), dtype)
    a, b = big[:, ::2], big[::-1, 1::2]          # strided and reversed views
    np.testing.assert_allclose(k(a, b, backend="cpu"), a.astype(np.float64) * 3 + b, rtol=1e-6, atol=1e-5)


def test_masked_store_touches_no_lane_past_the_extent():
    k = kd.kernel(kd.schedule("cpu", _split16)(_axpy))
    rng = np.random.default_rng(2)
    for cols in (1, 7, 17, 31):
        out = np.full((3, 64), 7.5, np.float32)
        a = rng.standard_normal((3, cols)).astype(np.float32)
        k(a, a, out=out[:, :cols], backend="cpu")
        np.testing.assert_allclose(out[:, :cols], a.astype(np.float64) * 4, rtol=1e-6)
        assert np.all(out[:, cols:] == 7.5)


@pytest.mark.parametrize("m,nk", [(1, (37, 70)), (7, (5, 1)), (16, (64, 100)), (13, (130, 129))])
def test_gemm_edge_tiles_exact(m, nk):
    """The packed GEMM's column edge (N not a multiple of 64): the local tile is read whole and
    written back under the mask, C through masked stores."""
    mm = kd.kernel(lambda A, B: A @ B)
    rng = np.random.default_rng(m)
    A = rng.standard_normal((m, nk[0])).astype(np.float32)
    B = rng.standard_normal(nk).astype(np.float32)
    np.testing.assert_allclose(mm(A, B, backend="cpu"), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    if nk[1] > 1:        # a size-1 axis is static in the trace: no tile to mask
        assert "llvm.masked.store" in mm.source(A, B, backend="cpu")
