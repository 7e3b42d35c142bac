"""Many short rows scanned along the last axis on the GPU (issue 25): a row of at least
``GPU_ROW_MIN`` steps that fits a staged tile is one tile, a block each, its threads chosen by
the row length (kdsl.backends.scan_schedules ``_short_rows``/``_row_threads``), on the SIMT
interpreter (races checked; every kernel also compiled by NVRTC under the test hook) against
numpy in float64."""
import numpy as np
import pytest

import kdsl as kd
import kdsl.backends.scan_schedules as ss
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.runtime.dispatch import make_schedule


def _kernel():
    @kd.kernel
    def ops(X, P):
        return (np.cumsum(X, axis=1), np.maximum.accumulate(X, axis=1),
                np.minimum.accumulate(X, axis=1), np.cumprod(P, axis=1))
    return ops


def _check(ops, X, P):
    got = ops(X, P, backend="interp-cuda")
    want = (np.cumsum(X, 1, dtype=np.float64) if X.dtype.kind == "f" else np.cumsum(X, 1),
            np.maximum.accumulate(X, 1), np.minimum.accumulate(X, 1),
            np.cumprod(P.astype(np.float64), 1) if P.dtype.kind == "f" else np.cumprod(P, 1))
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if X.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
        else:
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("m", [1, 31, 32, 33, 255, 256, 257])
def test_short_rows_match_numpy(m, monkeypatch, rng):
    """Every row length a tile (``GPU_ROW_MIN`` 1): ragged numbers of rows, float64 and
    strided (rows reversed, every other row); the four combiners at 1, 33 and 257 steps,
    cumsum and cummax elsewhere (each kernel costs an NVRTC compile)."""
    monkeypatch.setattr(ss, "GPU_ROW_MIN", 1)
    big = rng.standard_normal((6, 2 * m))
    X = big[::2, ::-2]                               # 3 rows, strided both ways
    P = 1 + 0.01 * rng.standard_normal((3, m))
    if m in (1, 33, 257):
        ops = _kernel()
        _check(ops, X, P)
        low = str(ops.lower(X, P, backend="interp-cuda"))
        assert low.count(".tile: ") == 4
    else:
        @kd.kernel
        def two(X):
            return np.cumsum(X, axis=1), np.maximum.accumulate(X, axis=1)
        s, mx = two(X, backend="interp-cuda")
        np.testing.assert_allclose(s, np.cumsum(X, 1), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(mx, np.maximum.accumulate(X, 1))
        low = str(two.lower(X, backend="interp-cuda"))
        assert low.count(".tile: ") == 2
    assert "cross_thread_scan_" in low
    # a block per row of 32 threads (64 from 256 steps: about 4 elements each)
    assert f"block=({64 if m >= 256 else 32}, 1, 1)" in low


def test_short_rows_ints_and_empty(rng):
    """Integer scans (int32 sums widen to int64) and the default threshold: 33 steps a tile,
    7 steps a thread per row; 0 rows; rows of 0 steps."""
    ops = _kernel()
    for shape in [(5, 33), (2, 7), (0, 40), (4, 0)]:
        X = rng.integers(-50, 50, shape).astype(np.int32)
        P = rng.choice(np.array([-1, 1], np.int32), shape)
        _check(ops, X, P)
    low = str(ops.lower(np.zeros((5, 33), np.int32), np.zeros((5, 33), np.int32),
                        backend="interp-cuda"))
    assert low.count(".tile: ") == 4
    low = str(ops.lower(np.zeros((2, 7), np.int32), np.zeros((2, 7), np.int32),
                        backend="interp-cuda"))
    assert ".tile: " not in low


def _rows_kernels(shape, axis):
    g = trace(lambda x: np.cumsum(x, axis=axis), [TensorSpec(("a", "b"), "float32")])
    s = make_schedule(g)
    s.size_hints = {v: (n, n) for v, n in zip(g.params[0].shape, shape)}
    from kdsl_cuda.schedules import schedule
    schedule(s, [])
    return gpu_lower(s).kernels


def test_benchmark_shapes_take_their_paths():
    """[65536, 256] along the rows: one kernel, a block of 64 threads per row (the staged
    tile); [256, 65536] along the columns: a thread per column, serial (coalesced already)."""
    ks = _rows_kernels((65536, 256), 1)
    assert [k.launch.block for k in ks] == [(64, 1, 1)]
    assert "cumsum.tile" in str(ks[0])
    ks = _rows_kernels((256, 65536), 0)
    assert [k.launch.block for k in ks] == [(256, 1, 1)] and "cross_thread" not in str(ks[0])
