"""Dynamic shared memory on the fake driver: each launch passes the kernel's shared bytes for
its sizes as ``sharedMemBytes``; above 48 KB per block the function's
MAX_DYNAMIC_SHARED_SIZE_BYTES attribute is raised first (once per size it grows to, on the
normal and the fast path); above the device's opt-in limit the call is refused, naming the
kernel and the size."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ArgumentError

from cuda_fakes import device_array


def _rowcopy():
    """A row of X cached in shared memory (its size: the row length, known at launch)."""
    @kd.kernel
    def rowcopy(X):
        return kd.compute(X.shape, lambda i, j: X[i, j] * 2, name="Y")

    def sched(s):
        Y = s["Y"]
        XS = s.cache_read("X", "shared", [Y])
        jo, jt = Y.split(Y.axes[1], factor=128)
        Y.reorder(Y.axes[0], jt, jo)
        Y.bind(Y.axes[0], "blockIdx.x")
        Y.bind(jt, "threadIdx.x")
        XS.compute_at(Y, Y.axes[0])
        _, xj = XS.stage.axes
        xo, xt = XS.split(xj, factor=128)
        XS.reorder(XS.stage.axes[0], xt, xo)
        XS.bind(xt, "threadIdx.x")
    rowcopy.schedule("cuda")(sched)
    return rowcopy


def _bytes(m):
    """The row as the schedule sizes it: whole passes of 128 threads."""
    return -(-m // 128) * 128 * 4


def _run(k, m, fake):
    x, y = device_array((3, m), np.float32), device_array((3, m), np.float32)
    k(x, out=y)
    return fake.launches[-1]


def test_launch_passes_dynamic_bytes(fake_driver):
    k = _rowcopy()
    call = _run(k, 1000, fake_driver)
    assert call["shared"] == _bytes(1000) == 4096 and call["grid"] == (3, 1, 1)
    assert fake_driver.attributes == []          # 4096 + 64 static bytes: below 48 KB


def test_attribute_raised_once_above_48k(fake_driver):
    from kdsl_cuda.runtime.driver import FUNC_ATTR_MAX_DYNAMIC_SHARED
    k = _rowcopy()
    m = 20000                                     # 80000 bytes of row
    for _ in range(4):                            # the later calls take the fast launcher
        call = _run(k, m, fake_driver)
        assert call["shared"] == _bytes(m)
    assert [(a, v) for _, a, v in fake_driver.attributes] == [(FUNC_ATTR_MAX_DYNAMIC_SHARED, _bytes(m))]
    fast = k._fast_out
    assert fast is not None and "m0 > _smok0[0]" in fast[2].__kdsl_source__
    call = _run(k, 30000, fake_driver)            # larger, same size class: raised again
    assert call["shared"] == _bytes(30000)
    assert [v for _, _, v in fake_driver.attributes] == [_bytes(20000), _bytes(30000)]
    _run(k, 25000, fake_driver)                   # smaller: no new call
    assert len(fake_driver.attributes) == 2


def test_beyond_device_limit_is_refused(fake_driver):
    k = _rowcopy()
    n0 = len(fake_driver.launches)
    want = _bytes(60000) + fake_driver.static_shared
    with pytest.raises(ArgumentError, match=rf"'rowcopy_kernel0' needs {want} bytes of shared "
                                            rf"memory per block.*\(232448 bytes\)"):
        _run(k, 60000, fake_driver)
    assert len(fake_driver.launches) == n0
    with pytest.raises(ArgumentError, match="hint: call it with smaller arrays"):
        _run(k, 60000, fake_driver)
