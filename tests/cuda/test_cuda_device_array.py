"""``kdsl_cuda.DeviceArray`` for users with no array library (SPEC §3): ``to_device``,
``empty``, ``.numpy()``, ``shape/dtype/strides/ptr``, kernels taking and returning it, ``out=``
with it, and both protocols (CUDA Array Interface v3, DLPack) round-tripping to torch and
CuPy without copies (writes on one side are seen on the other)."""
import numpy as np
import pytest

from cuda_support import (ARGMAX, MIX, NUMPY_DTYPES, ROWSUM, check_elementwise, elementwise,
                          library, values)

pytestmark = pytest.mark.cuda

SHAPES = [(5, 7), (1,), (0, 3), (3, 0, 2), ()]


@pytest.fixture(scope="module")
def kc():
    import kdsl_cuda
    return kdsl_cuda


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_to_device_and_back(kc, dtype, rng):
    for shape in SHAPES:
        a = values(rng, shape, dtype)
        d = kc.to_device(a)
        assert isinstance(d, kc.DeviceArray)
        assert d.shape == shape and np.dtype(d.dtype) == a.dtype
        assert isinstance(d.ptr, int) and (d.ptr != 0 or a.size == 0)
        back = d.numpy()
        assert type(back) is np.ndarray and back.dtype == a.dtype and back.shape == shape
        np.testing.assert_array_equal(back, a)
        assert not np.shares_memory(back, a)
        cai = d.__cuda_array_interface__
        assert cai["version"] == 3 and tuple(cai["shape"]) == shape
        assert np.dtype(cai["typestr"]) == a.dtype and cai["data"] == (d.ptr, False)
        if cai.get("strides") is not None:                     # None means C-contiguous
            assert tuple(cai["strides"]) == tuple(d.strides)
        assert d.__dlpack_device__()[0] == 2                   # kDLCUDA


def test_views_copy_in_with_their_values(kc, rng):
    a = values(rng, (12, 10), "float32")
    for v in (a.T, a[::2, 1::3], a[::-1], np.asfortranarray(a), np.broadcast_to(a[:1], (4, 10))):
        np.testing.assert_array_equal(kc.to_device(v).numpy(), v)


def test_empty_has_the_asked_shape_and_dtype(kc):
    for shape, dtype in [((4, 3), "float32"), ((0,), "int64"), ((2, 2), "bool")]:
        d = kc.empty(shape, dtype)
        assert isinstance(d, kc.DeviceArray) and d.shape == shape and np.dtype(d.dtype) == np.dtype(dtype)
        assert d.numpy().shape == shape


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "bool"])
def test_kernels_take_and_return_device_arrays(kc, dtype, rng):
    k = elementwise(dtype)[0]
    for shape in [(33, 20), (1, 1), (0, 4)]:
        a, b = values(rng, shape, dtype), values(rng, shape, dtype)
        x, y = kc.to_device(a), kc.to_device(b)
        r = k(x, y)                                            # device arrays choose cuda
        assert isinstance(r, kc.DeviceArray) and r.shape == shape and np.dtype(r.dtype) == a.dtype
        check_elementwise(r.numpy(), a, b, dtype)
        out = kc.empty(shape, dtype)
        ptr = out.ptr
        assert k(x, y, out=out) is out and out.ptr == ptr
        check_elementwise(out.numpy(), a, b, dtype)
        np.testing.assert_array_equal(x.numpy(), a)            # inputs untouched


def test_reductions_on_device_arrays(kc, rng):
    a = rng.integers(0, 4, (21, 70)).astype(np.float32)
    x = kc.to_device(a)
    s, m = ROWSUM(x), ARGMAX(x)
    assert isinstance(s, kc.DeviceArray) and isinstance(m, kc.DeviceArray)
    assert np.dtype(m.dtype) == np.int64
    np.testing.assert_allclose(s.numpy(), a.astype(np.float64).sum(1), rtol=1e-6)
    np.testing.assert_array_equal(m.numpy(), a.argmax(1))
    kc.synchronize()


def test_synchronize_waits_for_queued_work(kc, rng):
    a = values(rng, (64, 64), "float32")
    r = MIX(kc.to_device(a), kc.to_device(a))
    assert kc.synchronize() is None
    check_elementwise(r.numpy(), a, a, "float32")


# ----------------------------------------------------------------- protocols: zero-copy round trips
def test_torch_reads_and_writes_device_arrays_in_place(kc, rng):
    L = library("torch")
    torch = L.m
    a = values(rng, (6, 5), "float32")
    d = kc.to_device(a)
    for t in (torch.as_tensor(d, device="cuda"), torch.from_dlpack(d)):
        assert t.data_ptr() == d.ptr and tuple(t.shape) == d.shape and t.dtype == torch.float32
        np.testing.assert_array_equal(L.numpy(t), a)
    t = torch.from_dlpack(d)
    t.mul_(2)                                                   # torch writes, kdsl sees it
    torch.cuda.synchronize()
    np.testing.assert_array_equal(d.numpy(), a * 2)
    r = MIX(t, d)                                               # first device input: torch
    assert L.owns(r)
    check_elementwise(L.numpy(r), a * 2, a * 2, "float32")


def test_cupy_reads_and_writes_device_arrays_in_place(kc, rng):
    L = library("cupy")
    cp = L.m
    a = values(rng, (6, 5), "int32")
    d = kc.to_device(a)
    for c in (cp.asarray(d), cp.from_dlpack(d)):
        assert c.data.ptr == d.ptr and c.shape == d.shape and c.dtype == np.int32
        np.testing.assert_array_equal(cp.asnumpy(c), a)
    c = cp.asarray(d)
    c += 5
    L.synchronize()
    np.testing.assert_array_equal(d.numpy(), a + 5)
    r = MIX(d, c)                                               # first device input: DeviceArray
    assert isinstance(r, kc.DeviceArray)
    check_elementwise(r.numpy(), a + 5, a + 5, "int32")


def test_device_arrays_read_torch_and_cupy_memory(kc, rng):
    """The other way round: a kernel's DeviceArray result handed to torch/CuPy and back."""
    a, b = values(rng, (8, 9), "float64"), values(rng, (8, 9), "float64")
    r = MIX(kc.to_device(a), kc.to_device(b))
    seen = []
    for name in ("torch", "cupy"):
        try:
            L = library(name)
        except pytest.skip.Exception:
            continue                                            # the other library still runs
        x = L.m.from_dlpack(r)
        assert L.ptr(x) == r.ptr
        check_elementwise(L.numpy(x), a, b, "float64")
        seen.append(name)
    if not seen:
        pytest.skip("neither torch nor CuPy is installed")
