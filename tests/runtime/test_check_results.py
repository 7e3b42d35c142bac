"""Data-check results are read back through ``item()`` when the array has it (device arrays of
torch, CuPy, JAX and kdsl_cuda cannot go through ``np.asarray``)."""
import numpy as np

from kdsl.runtime.checks import _host_int


class DeviceScalar:
    """A 0-d device result: ``item()`` works, ``np.asarray`` does not."""

    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v

    def __array__(self, *a, **k):
        raise TypeError("can't convert a device array to numpy")


def test_host_int_reads_device_scalars():
    assert _host_int(DeviceScalar(-3)) == -3
    assert _host_int(np.array(41, np.int64)) == 41
    assert _host_int(np.int64(2**40)) == 2**40
