"""The generated fast launcher on CuPy arrays (fake_cupy.py, fake driver): what it launches
matches the normal path, it reads CuPy's cheap Cython fields where the class has them (the
public ``flags`` otherwise), and it declines -- so the normal path answers -- every array the
specialisation was not made for: another dtype (object), a strided view, another device, an
``out=`` sharing memory with an input."""
import numpy as np
import pytest

import fake_cupy
from cuda_fakes import add_kernel, promoted


@pytest.fixture
def cupy(fake_driver, monkeypatch):
    return fake_cupy.install(monkeypatch)


def _arrays(cupy, n, k=3, dtype=np.float32, **kw):
    return [cupy.ndarray((n,), dtype, **kw) for _ in range(k)]


def test_fast_launch_matches_the_normal_path(cupy, fake_driver):
    add = add_kernel()
    rng = np.random.default_rng()
    n = int(rng.integers(600, 1000))
    a, b, c = _arrays(cupy, n)
    cupy.cuda.current.ptr = 0x7000 + int(rng.integers(1, 1000)) * 16    # CuPy's current stream
    add(a, b, out=c)          # the normal path
    slow = fake_driver.launches[-1]
    assert slow["stream"] == cupy.cuda.current.ptr
    fast = promoted(add, a, b, out=c)
    src = fast[2].__kdsl_source__
    assert "._c_contiguous" in src and ".flags" not in src     # the Cython field, no Flags
    assert "stream = _cupy_stream(0).ptr" in src      # one GPU: its device named (no lookup)
    fake_driver.launches.clear()
    assert add(a, b, out=c) is c
    (got,) = fake_driver.launches
    assert got == slow
    assert got["params"][:3] == [a.data.ptr, b.data.ptr, c.data.ptr]
    # another current stream: the launch follows it
    cupy.cuda.current = cupy.cuda.Stream(0x9990)
    add(a, b, out=c)
    assert fake_driver.launches[-1]["stream"] == 0x9990
    # the allocating form: a CuPy array of the input's size and dtype, launched the same way
    promoted(add, a, b)
    fake_driver.launches.clear()
    r = add(a, b)
    assert type(r) is cupy.ndarray and r.shape == (n,) and r.dtype == np.float32
    assert r._c_contiguous and r.data.device_id == 0
    (got,) = fake_driver.launches
    assert got["params"][:3] == [a.data.ptr, b.data.ptr, r.data.ptr]
    assert got["grid"] == slow["grid"] and got["stream"] == 0x9990


def test_strided_views_are_declined(cupy, fake_driver):
    add = add_kernel()
    n = 300
    a, b, c = _arrays(cupy, n)
    fast = promoted(add, a, b, out=c)
    base = cupy.ndarray((2 * n,), np.float32)
    view = cupy.ndarray((n,), np.float32, strides=(8,), ptr=base.data.ptr)     # every 2nd
    assert not view._c_contiguous
    assert fast[2]((view, b), c) is NotImplemented
    assert fast[2]((a, view), c) is NotImplemented
    assert fast[2]((a, b), view) is NotImplemented
    # the call itself: the normal path, which passes the view's element stride
    fake_driver.launches.clear()
    add(view, b, out=c)
    (got,) = fake_driver.launches
    assert got["params"][0] == view.data.ptr and 2 in got["params"][3:]
    fa = promoted(add, a, b)
    assert fa[2]((view, b)) is NotImplemented and fa[2]((a, view)) is NotImplemented


def test_other_dtypes_are_declined(cupy, fake_driver):
    add = add_kernel()
    a, b, c = _arrays(cupy, 256)
    fast = promoted(add, a, b, out=c)
    (d,) = _arrays(cupy, 256, 1, np.float64)
    (i,) = _arrays(cupy, 256, 1, np.int32)          # same itemsize, another dtype
    for other in (d, i):
        assert fast[2]((other, b), c) is NotImplemented
        assert fast[2]((a, b), other) is NotImplemented
    # an equal dtype that is another object: declined (identity), launched by the normal path
    same = np.dtype(np.float32).newbyteorder("=")
    assert same == np.float32 and same is not np.dtype(np.float32)
    e = cupy.ndarray((256,), np.float32)
    e.dtype = same
    assert fast[2]((e, b), c) is NotImplemented
    n = len(fake_driver.launches)
    assert add(e, b, out=c) is c and len(fake_driver.launches) == n + 1
    assert fake_driver.launches[-1]["params"][:3] == [e.data.ptr, b.data.ptr, c.data.ptr]


def test_other_devices_are_declined(cupy, fake_driver, monkeypatch):
    from kdsl_cuda.runtime import driver
    monkeypatch.setattr(driver, "device_count", lambda: 2)
    add = add_kernel()
    a, b, c = _arrays(cupy, 512)
    fast = promoted(add, a, b, out=c)
    assert ".device_id != 0" in fast[2].__kdsl_source__
    assert "stream = _cupy_stream().ptr" in fast[2].__kdsl_source__     # the current device's
    assert fast[2]((a, b), c) is c
    on1 = cupy.ndarray((512,), np.float32, device=1)
    assert fast[2]((on1, b), c) is NotImplemented
    assert fast[2]((a, on1), c) is NotImplemented
    assert fast[2]((a, b), on1) is NotImplemented
    fa = promoted(add, a, b)
    r = fa[2]((a, b))
    assert type(r) is cupy.ndarray and r.data.device_id == 0       # on the inputs' device
    assert fa[2]((on1, b)) is NotImplemented


def test_out_sharing_memory_with_an_input_is_declined(cupy, fake_driver):
    add = add_kernel()
    a, b, c = _arrays(cupy, 400)
    fast = promoted(add, a, b, out=c)
    assert fast[2]((a, b), a) is NotImplemented and fast[2]((a, b), b) is NotImplemented
    # a view of another array's memory overlapping b's last elements
    shifted = cupy.ndarray((400,), np.float32, ptr=b.data.ptr + 4 * 399)
    assert fast[2]((a, b), shifted) is NotImplemented
    before = cupy.ndarray((400,), np.float32, ptr=b.data.ptr - 4 * 399)    # ends in b's first
    assert fast[2]((a, b), before) is NotImplemented and fast[2]((before, b), c) is c
    after = cupy.ndarray((400,), np.float32, ptr=b.data.ptr + 4 * 400)      # just past b
    assert a.data.ptr + 1600 <= b.data.ptr and fast[2]((a, b), after) is after


def test_without_the_cython_field_flags_are_read(fake_driver, monkeypatch):
    """A CuPy whose arrays lack ``_c_contiguous``: the public flags path, as safe."""
    cupy = fake_cupy.install(monkeypatch, fields=False)
    add = add_kernel()
    a, b, c = _arrays(cupy, 300)
    fast = promoted(add, a, b, out=c)
    src = fast[2].__kdsl_source__
    assert ".flags.c_contiguous" in src and "_c_contiguous" not in src.replace(".flags.c_", "")
    assert fast[2]((a, b), c) is c
    view = cupy.ndarray((300,), np.float32, strides=(8,), ptr=a.data.ptr)
    assert fast[2]((view, b), c) is NotImplemented and fast[2]((a, b), view) is NotImplemented


def test_a_cupy_without_device_ids_for_streams(cupy, fake_driver, monkeypatch):
    """CuPy before 10: ``get_current_stream()`` takes no device id; the launcher asks it so."""
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: cupy.cuda.current)
    add = add_kernel()
    a, b, c = _arrays(cupy, 128)
    fast = promoted(add, a, b, out=c)
    assert "stream = _cupy_stream().ptr" in fast[2].__kdsl_source__
    cupy.cuda.current = cupy.cuda.Stream(0x4440)
    assert add(a, b, out=c) is c and fake_driver.launches[-1]["stream"] == 0x4440
