"""Device arrays of other libraries, read in place, and outputs made with the caller's library.

``view(a)`` gives a ``View`` (pointer, shape, byte strides, kdsl dtype, device ordinal) of any
array kdsl can read on the GPU: ``DeviceArray``, PyTorch and CuPy arrays (read through their own
attributes, which is much cheaper than building ``__cuda_array_interface__``), anything with
``__cuda_array_interface__`` v3 (Numba, JAX, ...) and DLPack-only CUDA arrays.  Nothing is
copied.  ``library(a)`` names the ``Library`` of an array: how to allocate a result like it, and
which stream its caller considers current.  No GPU library is imported unless the argument
comes from it.
"""
from __future__ import annotations

import sys
from collections import namedtuple

import numpy as np

from kdsl import dtypes as dt
from kdsl.errors import ArgumentError

from .memory import DeviceArray, empty as _empty_device

#: pointer, shape, byte strides, kdsl dtype, device ordinal (and what keeps the memory alive)
View = namedtuple("View", "ptr shape strides dtype device keep")

_TORCH_DTYPES: dict = {}


def _torch_dtypes():
    if not _TORCH_DTYPES:
        import torch
        for name in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32",
                     "int64", "uint8", "bool"):
            kd = dt.bool_ if name == "bool" else dt.as_dtype(name)
            _TORCH_DTYPES[getattr(torch, name)] = kd
            _TORCH_DTYPES[kd] = getattr(torch, name)
    return _TORCH_DTYPES


def _is_torch(a) -> bool:
    return type(a).__module__.startswith("torch") and "torch" in sys.modules and \
        isinstance(a, sys.modules["torch"].Tensor)


def _is_cupy(a) -> bool:
    return "cupy" in sys.modules and isinstance(a, sys.modules["cupy"].ndarray)


# ----------------------------------------------------------------- readers
def _view_torch(t) -> View:
    if not t.is_cuda:
        raise ArgumentError("a torch tensor on the CPU was passed to the cuda backend",
                            hint="move it first (t.cuda()) or call with backend=\"cpu\"")
    kd = _torch_dtypes().get(t.dtype)
    if kd is None:
        raise ArgumentError(f"torch dtype {t.dtype} is not a kdsl dtype",
                            hint="convert the tensor first, e.g. t.to(torch.float32)")
    isz = t.element_size()
    return View(t.data_ptr(), tuple(t.shape), tuple(s * isz for s in t.stride()), kd,
                t.get_device(), t)


def _view_cupy(a) -> View:
    return View(a.data.ptr, a.shape, a.strides, dt.as_dtype(a.dtype), a.device.id, a)


def _view_device_array(a: DeviceArray) -> View:
    return View(a.ptr, a.shape, a.strides, a.kdsl_dtype, a.device, a)


def _view_cai(a) -> View:
    iface = a.__cuda_array_interface__
    dtype = np.dtype(iface["typestr"])
    shape = tuple(int(s) for s in iface["shape"])
    strides = iface.get("strides")
    if strides is None:
        from kdsl.runtime.arrays import c_strides
        strides = c_strides(shape, dtype.itemsize)
    ptr = int(iface["data"][0])
    stream = iface.get("stream")
    if stream not in (None, 0) and ptr:
        from .memory import sync_stream   # v3: wait for the producer's stream (generic path)
        sync_stream(int(stream))
    from . import driver
    dev = driver.pointer_device(ptr) if ptr else 0
    return View(ptr, shape, tuple(int(s) for s in strides), dt.as_dtype(dtype), dev, a)


def _view_dlpack(a) -> View:
    try:
        return _view_dlpack_capsule(a)
    except Exception:
        if getattr(a, "size", None) != 0:
            raise
        # an empty array some exporters refuse to describe: nothing of it is ever read
        from kdsl.runtime.arrays import c_strides
        kd = dt.as_dtype(a.dtype)
        shape = tuple(int(s) for s in a.shape)
        return View(0, shape, c_strides(shape, kd.itemsize), kd, 0, a)


def _view_dlpack_capsule(a) -> View:
    from .dlpack import DLManagedTensor, _PyCapsule_GetPointer
    cap = a.__dlpack__()
    name = b"dltensor"
    addr = _PyCapsule_GetPointer(cap, name)
    m = DLManagedTensor.from_address(addr)
    t = m.dl_tensor
    nd = t.ndim
    shape = tuple(t.shape[i] for i in range(nd))
    code, bits = t.dtype.code, t.dtype.bits
    kinds = {0: "int", 1: "uint", 2: "float"}
    if code == 4 and bits == 16:
        kd = dt.bfloat16
    elif code == 6:
        kd = dt.bool_
    else:
        kd = dt.as_dtype(f"{kinds[code]}{bits}")
    isz = kd.itemsize
    if t.strides:
        strides = tuple(t.strides[i] * isz for i in range(nd))
    else:
        from kdsl.runtime.arrays import c_strides
        strides = c_strides(shape, isz)
    return View(t.data + t.byte_offset, shape, strides, kd, t.device.device_id, (a, cap))


def view(a) -> View:
    """A View of device array ``a`` (ArgumentError for anything else)."""
    t = type(a)
    if t is DeviceArray:
        return _view_device_array(a)
    if _is_torch(a):
        return _view_torch(a)
    if _is_cupy(a):
        return _view_cupy(a)
    try:
        cai = hasattr(a, "__cuda_array_interface__")
    except Exception:          # JAX raises for dtypes the interface cannot describe (bfloat16)
        cai = False
    if cai:
        try:
            return _view_cai(a)
        except (TypeError, ValueError, KeyError):
            if not hasattr(a, "__dlpack__"):
                raise
    if hasattr(a, "__dlpack__"):
        return _view_dlpack(a)
    raise ArgumentError(f"the cuda backend cannot read a {t.__name__} argument",
                        hint="pass a numpy array, a CUDA array (PyTorch, CuPy, JAX, ...) or a "
                             "kdsl_cuda.DeviceArray")


def dlpack_info(a):
    """``array_info`` through DLPack only (arrays whose CUDA Array Interface cannot describe
    them, e.g. JAX bfloat16)."""
    from kdsl.runtime.arrays import is_c_contiguous
    v = _view_dlpack(a)
    return v.dtype, v.shape, is_c_contiguous(v.shape, v.strides, v.dtype.itemsize)


def array_info(a):
    """(numpy-or-kdsl dtype, shape, C-contiguous) for kdsl's dispatch (``register_reader``)."""
    from kdsl.runtime.arrays import is_c_contiguous
    v = view(a)
    return v.dtype, v.shape, is_c_contiguous(v.shape, v.strides, v.dtype.itemsize)


# ----------------------------------------------------------------- libraries
class Library:
    """How to make a result like an input of one array library, and its current stream."""

    name = "kdsl"

    def empty(self, shape, dtype, like):
        dev = like.device if isinstance(like, DeviceArray) else 0
        return _empty_device(shape, dtype, device=dev)

    def current_stream(self, like) -> int:
        return getattr(like, "stream", 0) if isinstance(like, DeviceArray) else 0


class TorchLibrary(Library):
    name = "torch"

    def empty(self, shape, dtype, like):
        import torch
        return torch.empty(tuple(shape), dtype=_torch_dtypes()[dt.as_dtype(dtype)], device=like.device)

    def current_stream(self, like) -> int:
        import torch
        fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if fast is not None:
            return fast(like.get_device())
        return torch.cuda.current_stream(like.device).cuda_stream


class CupyLibrary(Library):
    name = "cupy"

    def empty(self, shape, dtype, like):
        import cupy
        with like.device:
            return cupy.empty(tuple(shape), dtype=dt.as_dtype(dtype).np)

    def current_stream(self, like) -> int:
        import cupy
        return cupy.cuda.get_current_stream().ptr


class JaxLibrary(Library):
    """JAX arrays are immutable: results are DeviceArrays handed to JAX through DLPack after
    the kernel ran (``result``)."""

    name = "jax"

    def empty(self, shape, dtype, like):
        dev = getattr(next(iter(like.devices()), None), "id", 0) if hasattr(like, "devices") else 0
        return _empty_device(shape, dtype, device=dev)

    def result(self, arr):
        import jax.dlpack
        return jax.dlpack.from_dlpack(arr)


_LIBS = {"torch": TorchLibrary(), "cupy": CupyLibrary(), "jax": JaxLibrary(), "kdsl": Library()}


def library(a) -> Library:
    """The Library of array ``a`` (kdsl's own for DeviceArray and unknown CAI/DLPack arrays)."""
    if _is_torch(a):
        return _LIBS["torch"]
    if _is_cupy(a):
        return _LIBS["cupy"]
    mod = type(a).__module__ or ""
    if mod.startswith("jax") or mod.startswith("jaxlib"):
        return _LIBS["jax"]
    return _LIBS["kdsl"]


def stream_handle(stream) -> int:
    """The CUstream handle of a ``stream=`` argument: an int, an object with ``__cuda_stream__``
    (cuda.core), a torch stream (``cuda_stream``) or a CuPy stream (``ptr``)."""
    if isinstance(stream, (int, np.integer)):
        return int(stream)
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise ArgumentError(f"stream= must be a CUDA stream (an int handle, a torch or CuPy stream, or "
                        f"an object with __cuda_stream__), got {type(stream).__name__}",
                        hint="pass torch.cuda.current_stream(), a cupy.cuda.Stream or an int handle")

