"""The caller's array type back on the host backends (issue 26 item 6): torch CPU tensors, JAX
CPU arrays and any DLPack host object are read in place; results come back as the first array
argument's library; ``out=`` a torch tensor (or a DLPack host array) is written in place.

The DLPack tests use ``Exported``, an exporter written here with ctypes (so they run without
torch or JAX, in CI); the torch and JAX tests skip when those libraries are not installed."""
from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends import registry
from kdsl.errors import ArgumentError
from kdsl.runtime import dlpack

HOST = ["numpy", "interp", "cpu"]

# ----------------------------------------------------------------- a DLPack-only exporter
_New = ctypes.pythonapi.PyCapsule_New
_New.restype = ctypes.py_object
_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api = ctypes.PyDLL(None)      # raw-pointer entry points: the destructor runs mid-free
_IsValid = _api.PyCapsule_IsValid
_IsValid.restype, _IsValid.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
_Ptr = _api.PyCapsule_GetPointer
_Ptr.restype, _Ptr.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", dlpack.DLTensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", _DELETER)]
#: address of an exported DLManagedTensor -> what it keeps alive (struct, shape, array)
_live: dict = {}


@_DELETER
def _deleter(ptr):                 # a consumer is done with the tensor
    _live.pop(ctypes.addressof(ptr.contents), None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destructor(capsule):          # an unconsumed capsule frees its tensor
    if _IsValid(capsule, b"dltensor"):
        _live.pop(_Ptr(capsule, b"dltensor"), None)


class Exported:
    """An array known only through ``__dlpack__``/``__dlpack_device__`` (legacy capsules; any
    dtype, bfloat16 included, any strides): the memory is a numpy array the tensor keeps."""

    def __init__(self, arr, device_type=1):
        self.arr, self.device_type = arr, device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, **kw):
        a = self.arr
        if kw.get("max_version") is not None and a.dtype.kind == "V":
            raise TypeError("versioned capsules not supported")   # like old exporters
        code = {"i": 0, "u": 1, "f": 2, "b": 6, "V": 4}[a.dtype.kind]
        nd = a.ndim
        shape = (ctypes.c_int64 * max(nd, 1))(*a.shape)
        strides = (ctypes.c_int64 * max(nd, 1))(*[s // a.itemsize for s in a.strides])
        m = _Managed()
        m.dl_tensor = dlpack.DLTensor(a.ctypes.data, dlpack.DLDevice(self.device_type, 0), nd,
                                       dlpack.DLDataType(code, a.itemsize * 8, 1),
                                       ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                                       ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 0)
        m.deleter = _deleter
        _live[ctypes.addressof(m)] = (m, shape, strides, a)
        return _New(ctypes.addressof(m), b"dltensor", ctypes.cast(_destructor, ctypes.c_void_p))


@kd.kernel
def axpy(a, x, y):
    return a * x + y


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@pytest.fixture
def rng():
    return np.random.default_rng()


# ----------------------------------------------------------------- DLPack-only (always run)
@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("n", [0, 1, 13])
def test_dlpack_only_inputs_give_numpy(backend, n, rng):
    x, y = rng.standard_normal(2 * n), rng.standard_normal(n)
    r = axpy(2.5, Exported(x[::2]), Exported(y), backend=backend)   # a strided view
    assert type(r) is np.ndarray
    np.testing.assert_allclose(r, 2.5 * x[::2] + y)


def test_dlpack_view_is_in_place_and_keeps_the_exporter_alive(rng):
    a = rng.standard_normal((4, 6))[:, ::-2]        # negative strides
    e = Exported(a)
    v = dlpack.from_dlpack(e)
    assert v.ctypes.data == a.ctypes.data and v.strides == a.strides
    np.testing.assert_array_equal(v, a)
    ml = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays in numpy need ml_dtypes")
    b = rng.standard_normal((3, 5)).astype(ml.bfloat16)
    e = Exported(b.T)
    alive = weakref.ref(e)
    v = dlpack.from_dlpack(e)           # numpy has no bfloat16: read through the capsule
    assert v.dtype == b.dtype and v.ctypes.data == b.ctypes.data and v.strides == b.T.strides
    del e
    gc.collect()
    assert alive() is not None          # the view's base holds the capsule and the exporter
    np.testing.assert_array_equal(v.astype(np.float64), b.T.astype(np.float64))
    del v
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("backend", HOST)
def test_dlpack_bfloat16(backend, rng):
    ml = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays in numpy need ml_dtypes")
    A = rng.standard_normal((3, 17)).astype(ml.bfloat16)
    r = rowsum(Exported(A), backend=backend)
    assert r.dtype == A.dtype
    np.testing.assert_allclose(r.astype(np.float64), A.astype(np.float64).sum(1), rtol=2e-2,
                               atol=0.1)


@pytest.mark.parametrize("backend", HOST)
def test_dlpack_out_written_in_place(backend, rng):
    A = rng.standard_normal((5, 7))
    mem = np.full(5, np.nan)
    o = Exported(mem)
    assert rowsum(Exported(A), out=o, backend=backend) is o
    np.testing.assert_allclose(mem, A.sum(1))


def test_dlpack_device_memory_is_refused(rng):
    e = Exported(rng.standard_normal(4), device_type=2)       # kDLCUDA
    with pytest.raises(ArgumentError, match="'x'.*host memory") as ei:
        axpy(1.0, e, np.ones(4), backend="cpu")
    assert "backend=" in ei.value.hint and "test_foreign_arrays.py" in str(ei.value)


def test_dlpack_default_backend_and_mixed_rule(rng):
    x = rng.standard_normal(6)
    assert registry.default_backend_name([Exported(x)]) in ("cpu", "numpy")
    # the first array argument decides: numpy first -> numpy; an unknown library -> numpy
    assert type(axpy(2.0, x, Exported(x))) is np.ndarray
    assert type(axpy(2.0, Exported(x), x)) is np.ndarray


# ----------------------------------------------------------------- torch
@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is not installed")


@pytest.mark.parametrize("backend", HOST)
def test_torch_in_torch_out(torch, backend, rng):
    for n in (0, 1, 9):
        x, y = rng.standard_normal(2 * n), rng.standard_normal(n)
        tx, ty = torch.from_numpy(x)[::2], torch.from_numpy(y)
        r = axpy(1.5, tx, ty, backend=backend)
        assert type(r) is torch.Tensor and r.dtype is torch.float64 and r.device.type == "cpu"
        np.testing.assert_allclose(r.numpy(), 1.5 * x[::2] + y)
    A = torch.from_numpy(rng.standard_normal((6, 4))).t()       # a transpose
    np.testing.assert_allclose(rowsum(A, backend=backend).numpy(), A.numpy().sum(1))


def test_torch_reads_in_place_and_results_share_memory(torch):
    from kdsl.runtime import foreign
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, 1::2]
    v = foreign.library(t).to_host(t)
    assert v.ctypes.data == t.data_ptr() and v.strides == (16, 8)
    r = np.arange(3.0)
    assert foreign.library(t).wrap(r).data_ptr() == r.ctypes.data


@pytest.mark.parametrize("backend", HOST)
def test_torch_out_written_in_place(torch, backend, rng):
    x = torch.from_numpy(rng.standard_normal(7))
    out = torch.empty(7, dtype=torch.float64)
    ptr = out.data_ptr()
    assert axpy(2.0, x, x, out=out, backend=backend) is out
    assert out.data_ptr() == ptr
    np.testing.assert_allclose(out.numpy(), 3.0 * x.numpy())
    want = 2.0 * x.numpy() + x.numpy()
    axpy(2.0, x, x, out=x, backend=backend)         # out= overlaps the inputs: numpy's rule
    np.testing.assert_allclose(x.numpy(), want)
    o32 = torch.empty(7, dtype=torch.float32)      # another dtype: numpy's same_kind cast
    axpy(2.0, x, x, out=o32, backend=backend)
    np.testing.assert_allclose(o32.numpy(), 3.0 * x.numpy(), rtol=1e-6)


def test_torch_out_with_numpy_inputs(torch, rng):
    # the reported bug: out=torch.empty(4) was sent to the cuda backend's reader
    x = rng.standard_normal(4).astype(np.float32)
    out = torch.empty(4)
    assert axpy(2.0, x, x, out=out, backend="cpu") is out
    np.testing.assert_allclose(out.numpy(), 3.0 * x, rtol=1e-6)
    assert axpy(2.0, x, x, out=out) is out          # default backend, keyword-free fast path


def test_torch_requires_grad(torch, rng):
    x = torch.tensor(rng.standard_normal(5), requires_grad=True)
    for backend in HOST:
        r = axpy(2.0, x, x, backend=backend)
        assert type(r) is torch.Tensor and not r.requires_grad
        np.testing.assert_allclose(r.numpy(), 3.0 * x.detach().numpy())
    with pytest.raises(ArgumentError, match="requires grad") as ei:
        axpy(2.0, x.detach(), x.detach(), out=torch.empty(5, dtype=torch.float64,
                                                           requires_grad=True))
    assert "detach" in ei.value.hint


@pytest.mark.parametrize("backend", HOST)
def test_torch_bfloat16(torch, backend, rng):
    pytest.importorskip("ml_dtypes", reason="bfloat16 arrays in numpy need ml_dtypes")
    A = torch.from_numpy(rng.standard_normal((3, 10)).astype(np.float32)).bfloat16()
    r = rowsum(A, backend=backend)
    assert type(r) is torch.Tensor and r.dtype is torch.bfloat16
    np.testing.assert_allclose(r.double().numpy(), A.double().numpy().sum(1), rtol=2e-2,
                               atol=0.1)


def test_torch_mixed_keywords_default_backend(torch, rng):
    x = rng.standard_normal(5)
    t = torch.from_numpy(x.copy())
    assert registry.default_backend_name([t]) == registry.default_backend_name([x])
    assert type(axpy(2.0, x, t)) is np.ndarray          # the first array argument decides
    assert type(axpy(2.0, t, x)) is torch.Tensor
    r = axpy(a=2.0, y=x, x=t)                           # keywords bind; parameter order
    assert type(r) is torch.Tensor
    np.testing.assert_allclose(r.numpy(), 3.0 * x)
    assert rowsum.lower(t[None]) is not None            # lower/source read them too


def test_torch_interp_cuda_tiny(torch):
    t = torch.arange(6, dtype=torch.float32)
    r = axpy(2.0, t, t, backend="interp-cuda")
    assert type(r) is torch.Tensor
    np.testing.assert_allclose(r.numpy(), 3.0 * np.arange(6))


# ----------------------------------------------------------------- JAX
@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_jax_in_jax_out(backend, rng):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    import jax.numpy as jnp
    x = rng.standard_normal(9).astype(np.float32)
    jx = jnp.asarray(x)
    r = axpy(2.0, jx, jx, backend=backend)
    assert isinstance(r, jax.Array)
    np.testing.assert_allclose(np.asarray(r), 3.0 * x, rtol=1e-6)
    with pytest.raises(ArgumentError, match="immutable"):
        axpy(2.0, jx, jx, out=jnp.zeros(9), backend=backend)
    b = jnp.asarray(rng.standard_normal((2, 8)), dtype=jnp.bfloat16)
    r = rowsum(b, backend=backend)
    assert isinstance(r, jax.Array) and r.dtype == jnp.bfloat16
