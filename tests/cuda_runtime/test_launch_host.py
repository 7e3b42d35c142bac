"""The cuda launcher's host side on a fake driver (conftest.py): what each kernel launch gets
(parameters, grid, block, stream), the fast launcher's checks, and the errors of bad calls."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ArgumentError

from cuda_fakes import device_array


def _rowsum():
    @kd.kernel
    def rowsum(A):
        n, m = A.shape
        k = kd.reduce_axis(m, name="k")
        return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")

    def sched(s):
        B = s["B"]
        xo, xi = B.split(B.axes[0], factor=32)
        B.bind(xo, "blockIdx.x")
        B.bind(xi, "threadIdx.x")
    rowsum.schedule("cuda")(sched)
    return rowsum


def _add():
    @kd.kernel
    def add(a, b):
        return kd.compute(a.shape, lambda i: a[i] + b[i], name="C")

    def sched(s):
        C = s["C"]
        xo, xi = C.split(C.axes[0], factor=128)
        C.bind(xo, "blockIdx.x")
        C.bind(xi, "threadIdx.x")
    add.schedule("cuda")(sched)
    return add


def test_launch_parameters_grid_and_block(fake_driver):
    rowsum = _rowsum()
    a = device_array((100, 70), np.float32)
    out = device_array((100,), np.float32)
    assert rowsum(a, out=out) is out
    (call,) = fake_driver.launches
    assert call["grid"] == (4, 1, 1) and call["block"] == (32, 1, 1)
    assert call["params"] == [a.ptr, out.ptr, 100, 70]


def test_strided_arrays_pass_element_strides(fake_driver):
    rowsum = _rowsum()
    base = device_array((100, 70), np.float32)
    from kdsl_cuda.runtime.memory import DeviceArray
    view = DeviceArray((50, 35), np.float32, strides=(2 * 280, 8), ptr=base.ptr)
    rowsum(view, out=device_array((50,), np.float32))
    params = fake_driver.launches[-1]["params"]
    assert 140 in params and 2 in params       # strides in elements: 560 // 4, 8 // 4
    bad = DeviceArray((50, 35), np.float32, strides=(560, 6), ptr=base.ptr)
    with pytest.raises(ArgumentError, match="not a multiple of its item size"):
        rowsum(bad, out=device_array((50,), np.float32))


def test_fast_launcher_is_used_and_declines_mismatches(fake_driver):
    add = _add()
    x, y, z = (device_array((1000,), np.float32) for _ in range(3))
    for _ in range(4):
        add(x, y, out=z)
    fast = add._fast_out
    assert fast is not None and fast[0] == "cuda" and fast[3], "no device fast launcher"
    src = fast[2].__kdsl_source__
    assert "_launch(" in src and "d0_0 >> 9 != 1" in src  # ctypes, size class 512..1023
    n = len(fake_driver.launches)
    add(x, y, out=z)
    assert len(fake_driver.launches) == n + 1
    assert fake_driver.launches[-1]["params"][:3] == [x.ptr, y.ptr, z.ptr]
    # another size class, another dtype: declined by the fast launcher, still launched right
    x2, y2, z2 = (device_array((5000,), np.float32) for _ in range(3))
    assert fast[2]((x2, y2), z2) is NotImplemented
    add(x2, y2, out=z2)
    assert fake_driver.launches[-1]["grid"] == (40, 1, 1)
    xd = device_array((1000,), np.float64)
    assert fast[2]((xd, y), z) is NotImplemented
    # out= overlapping an input: the fast launcher declines, the normal path refuses
    assert fast[2]((x, y), x) is NotImplemented
    with pytest.raises(ArgumentError, match="shares device memory"):
        add(x, y, out=x)


def test_allocated_results_are_device_arrays_of_kdsl(fake_driver):
    from kdsl_cuda.runtime.memory import DeviceArray
    add = _add()
    x, y = device_array((300,), np.float32), device_array((300,), np.float32)
    r = add(x, y)
    assert type(r) is DeviceArray and r.shape == (300,) and r.kdsl_dtype is kd.float32
    assert fake_driver.launches[-1]["params"][2] == r.ptr


def test_empty_grid_launches_nothing(fake_driver):
    add = _add()
    x, y, z = (device_array((0,), np.float32) for _ in range(3))
    add(x, y, out=z)
    assert fake_driver.launches == []


def test_launch_error_is_a_cuda_error(fake_driver):
    from kdsl_cuda.runtime.driver import CudaError
    add = _add()
    x, y, z = (device_array((10,), np.float32) for _ in range(3))
    fake_driver.fail_next = 701
    with pytest.raises(CudaError, match="cuLaunchKernel"):
        add(x, y, out=z)


def test_stream_argument_forms(fake_driver):
    add = _add()
    x, y, z = (device_array((10,), np.float32) for _ in range(3))
    add(x, y, out=z, stream=1234)
    assert fake_driver.launches[-1]["stream"] == 1234

    class CoreStream:                     # cuda.core's protocol
        def __cuda_stream__(self):
            return (0, 5678)
    add(x, y, out=z, stream=CoreStream())
    assert fake_driver.launches[-1]["stream"] == 5678
    with pytest.raises(ArgumentError, match="stream= must be a CUDA stream"):
        add(x, y, out=z, stream="fast")


def test_no_device_is_a_clear_error():
    import kdsl_cuda
    from kdsl_cuda.runtime import driver
    if driver.is_available():
        pytest.skip("a CUDA device is present")
    assert kdsl_cuda.is_available() is False
    add = _add()
    with pytest.raises(kd.BackendUnavailable if hasattr(kd, "BackendUnavailable") else Exception,
                       match="interp-cuda"):
        add(np.ones(3, np.float32), np.ones(3, np.float32), backend="cuda")
