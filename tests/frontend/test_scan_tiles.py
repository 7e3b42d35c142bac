"""The GPU tile scan (issue 25: kdsl.gpu.scan_tiles, ``CrossThreadReduce(scan=True)``): an
associative scan's tiles scanned by a block's threads row by row, the block totals a
cross-thread reduction, on the SIMT interpreter (races checked, blocks in any order; every
kernel also compiled by NVRTC under the test hook) against numpy in float64.  Tiles are made
tiny so that several levels, ragged tiles and rows run on small inputs; the thread counts
cover the three CUDA forms of the scan (a group inside a warp, whole warps, any group)."""
import numpy as np
import pytest

import kdsl as kd
import kdsl.backends.scan_schedules as ss
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.gpu.pipeline import lower_sequential
from kdsl.backends.interpreter import run_lowered
from kdsl.runtime.dispatch import make_schedule


def _tiles(monkeypatch, threads, rows):
    monkeypatch.setattr(ss, "GPU_BLOCK_MIN", 4)
    monkeypatch.setattr(ss, "GPU_TILE_THREADS", threads)
    monkeypatch.setattr(ss, "GPU_TILE_ROWS", rows)
    monkeypatch.setattr(ss, "GPU_ONE_TILE_BYTES", 0)


def _kernels():
    @kd.kernel
    def csum(x):
        return np.cumsum(x)

    @kd.kernel
    def ops(x, b):      # cumprod, maximum and xor: test_scan_parallel's tiny blocks
        return np.minimum.accumulate(x), np.cumsum(b)

    @kd.kernel
    def rows(X):
        return np.cumsum(X, axis=1), np.maximum.accumulate(X, axis=1)
    return csum, ops, rows


@pytest.mark.parametrize("threads,rows", [(4, 2), (64, 1), (12, 2)])
def test_tile_scans_match_numpy(threads, rows, monkeypatch, rng):
    """(4, 2): the shuffle ladder inside a warp, 3 levels for 100 steps; (64, 1): two warps
    (warp totals in shared memory); (12, 2): a group that neither divides nor fills warps."""
    _tiles(monkeypatch, threads, rows)
    csum, ops, rws = _kernels()
    if threads != 4:            # (4, 2): lengths 0, 1, ragged in test_scan_parallel's tiny blocks
        for n in (1, threads * rows + 1, 100):
            x = rng.standard_normal(n)
            np.testing.assert_allclose(csum(x, backend="interp-cuda"), np.cumsum(x), rtol=1e-10, atol=1e-12)
        return                  # the other combiners and layouts: once
    x = rng.standard_normal(100)                  # 13 tiles, their scan too long for one
    monkeypatch.setattr(ss, "GPU_TILE_LEVELS", 1)     # staged tile: scanned row by row
    low = str(csum.lower(x, backend="interp-cuda"))
    assert low.count(".scan[0] = cross_thread_scan_") == 2 and low.count(".tile: ") == 1
    np.testing.assert_allclose(csum(x, backend="interp-cuda"), np.cumsum(x), rtol=1e-10, atol=1e-12)
    monkeypatch.setattr(ss, "GPU_TILE_LEVELS", 2)
    xi = rng.integers(-2, 3, 61).astype(np.int32)
    b = rng.integers(0, 1 << 12, 61).astype(np.int16)
    got = ops(xi, b, backend="interp-cuda")
    want = (np.minimum.accumulate(xi), np.cumsum(b))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    X = rng.standard_normal((3, 81))[:, ::-2]     # rows along the last axis, reversed
    X[1, 7] = np.nan
    s, m = rws(X, backend="interp-cuda")
    np.testing.assert_allclose(s, np.cumsum(X, 1), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(m, np.maximum.accumulate(X, 1))


def test_tile_scan_float32_and_structure(monkeypatch, rng):
    """float32 within reassociation error; the IR: block totals by a cross-thread reduction,
    the tiles by cross-thread scans over a shared tile."""
    _tiles(monkeypatch, 32, 2)
    csum, _, _ = _kernels()
    x = rng.random(300).astype(np.float32)
    got = csum(x, backend="interp-cuda")
    assert got.dtype == np.float32
    want = np.cumsum(x.astype(np.float64))
    assert np.max(np.abs(got - want) / want) < 1e-6
    low = str(csum.lower(x, backend="interp-cuda"))
    assert low.count("kernel ") == 3                 # 300 -> 5 tiles, their scan one tile
    assert "cross_thread_scan_" in low and "cumsum.tile" in low and "block=(32, 1, 1)" in low


def test_default_tiles_for_the_benchmark_size():
    """2**24 float32 with the default tiles (256 threads, 4096 steps): 3 kernels of 256
    threads (the totals of 4096 tiles, their scan in one tile, the data's tiles)."""
    g = trace(lambda x: np.cumsum(x), [TensorSpec(("n",), "float32")])
    s = make_schedule(g)
    s.size_hints = {g.params[0].shape[0]: (2 ** 24, 2 ** 24)}
    from kdsl_cuda.schedules import schedule
    schedule(s, [])
    f = gpu_lower(s)
    assert [k.launch.block for k in f.kernels] == [(256, 1, 1)] * 3


def test_tile_scan_on_the_sequential_interpreter(monkeypatch, rng):
    """The GPU passes' IR made sequential (lower_cross_thread folds a scan's members up to
    each thread)."""
    _tiles(monkeypatch, 4, 2)
    g = trace(lambda x: np.cumsum(x), [TensorSpec(("n",), "float64")])
    s = make_schedule(g)
    from kdsl_cuda.schedules import schedule
    schedule(s, [])
    func = lower_sequential(s)
    x = rng.standard_normal(21)
    out = np.zeros(21)
    run_lowered(func, [x], [out], [])
    np.testing.assert_allclose(out, np.cumsum(x), rtol=1e-10, atol=1e-12)
