"""Data checks (an index read from an array must be in range) on the cuda backend with device
arrays: the check kernel's 0-d results live on the device and are read back with ``item()``
before the main kernel runs; out of range raises KernelIndexError and writes no output."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KernelIndexError

pytestmark = pytest.mark.cuda


@kd.kernel
def gather(x, idx):
    m, = idx.shape
    return kd.compute((m,), lambda i: x[idx[i]] * 2.0)


def test_gather_checks_numpy(rng):
    x = rng.standard_normal(50).astype(np.float32)
    idx = rng.integers(0, 50, 37)
    np.testing.assert_array_equal(gather(x, idx, backend="cuda"), x[idx] * 2)
    with pytest.raises(KernelIndexError, match=r"x\[idx\[i\]\] reads x at indices"):
        gather(x, np.array([3, 50]), backend="cuda")


def test_gather_checks_device_arrays(lib, rng):
    x = rng.standard_normal(50).astype(np.float32)
    idx = rng.integers(0, 50, 37)
    got = gather(lib.array(x), lib.array(idx))
    assert lib.owns(got)
    np.testing.assert_array_equal(lib.numpy(got), x[idx] * 2)
    out = lib.full((2,), 7.0, "float32") if hasattr(lib, "full") else None
    with pytest.raises(KernelIndexError, match=r"but x\.shape\[0\] is 50"):
        gather(lib.array(x), lib.array(np.array([-1, 4])), **({"out": out} if out is not None else {}))
    if out is not None:       # the check runs first: out= is untouched
        np.testing.assert_array_equal(lib.numpy(out), [7.0, 7.0])


def test_gather_checks_device_array(rng):
    import kdsl_cuda
    x = rng.standard_normal(50).astype(np.float32)
    idx = rng.integers(0, 50, 9)
    got = gather(kdsl_cuda.to_device(x), kdsl_cuda.to_device(idx))
    assert isinstance(got, kdsl_cuda.DeviceArray)
    np.testing.assert_array_equal(got.numpy(), x[idx] * 2)
    with pytest.raises(KernelIndexError):
        gather(kdsl_cuda.to_device(x), kdsl_cuda.to_device(np.array([0, 51])))
