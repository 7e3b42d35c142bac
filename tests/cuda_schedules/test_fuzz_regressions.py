"""Regressions of the default cuda schedules found by the differential fuzzer's ``interp-cuda``
backend (tests/fuzz/FINDINGS.md, section "interp-cuda"): each kernel runs with no schedule on
the SIMT interpreter (race- and bounds-checked; the NVRTC hook of tests/conftest.py also
compiles its CUDA) against numpy in float64."""
import numpy as np
import pytest

import kdsl as kd


def run(fn, *args):
    return kd.kernel(fn)(*args, backend="interp-cuda")


def close(got, want, tol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4, 5, 6), (1, 3, 33), (7, 1, 1), (2, 0, 3)])
def test_column_reduction_over_several_axes(shape, rng):
    """fuzz 8:94, 8:140, 8:180: a column reduction over two or more axes fused them before its
    cache_write ("cache_write: call it on stage sum before other primitives on it")."""
    a = rng.standard_normal(shape).astype(np.float32)
    close(run(lambda A: A.sum(axis=(0, 1)), a), a.astype(np.float64).sum(axis=(0, 1)))
    b = np.asfortranarray(rng.standard_normal((3, 4, 5)))
    close(run(lambda A: A.max(axis=(1, 2), keepdims=True), b), b.max(axis=(1, 2), keepdims=True))
