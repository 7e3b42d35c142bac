"""Device memory and ``DeviceArray``: the array type for users with no GPU array library.

Memory comes from the device's stream-ordered pool (``cuMemAllocAsync``/``cuMemFreeAsync``, the
pool keeps freed blocks: see ``driver.Device``), so an allocation on the launch stream costs
about a microsecond and is safe to free as soon as the last launch using it is enqueued.

``DeviceArray`` speaks both interchange protocols: ``__cuda_array_interface__`` (v3) and DLPack
(``__dlpack__``/``__dlpack_device__``, ``dlpack.py``), so ``torch.as_tensor(x, device="cuda")``,
``cupy.asarray(x)`` and ``jax.dlpack.from_dlpack(x)`` see it without copies.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from kdsl import dtypes as dt

from . import driver


class Allocation:
    """``nbytes`` of device memory on ``device``, freed on ``stream`` when garbage."""

    __slots__ = ("ptr", "nbytes", "device", "stream", "__weakref__")

    def __init__(self, nbytes: int, device: int = 0, stream: int = 0):
        d = driver.device(device)
        L = driver.lib()
        p = ctypes.c_void_p()
        n = max(int(nbytes), 1)
        if d.pools:
            L.check(L.cuMemAllocAsync(ctypes.byref(p), n, ctypes.c_void_p(stream)), "cuMemAllocAsync")
        else:
            L.check(L.cuMemAlloc_v2(ctypes.byref(p), n), "cuMemAlloc")
        self.ptr, self.nbytes, self.device, self.stream = p.value, int(nbytes), device, stream

    def free(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if not ptr or sys.is_finalizing():
            return
        L = driver.lib()
        if driver.device(self.device).pools:
            L.cuMemFreeAsync(ctypes.c_void_p(ptr), ctypes.c_void_p(self.stream))
        else:
            L.cuMemFree_v2(ctypes.c_void_p(ptr))

    def __del__(self):
        try:
            self.free()
        except Exception:   # never raise from a finaliser (the driver may be gone at exit)
            pass


class DeviceArray:
    """A strided array in CUDA device memory.

    Make one with ``to_device(numpy_array)`` or ``empty(shape, dtype)``; read it back with
    ``.numpy()``.  ``shape``, ``dtype`` (a numpy dtype; kdsl's bfloat16 is stored as its 16 bits
    and reported by ``kdsl_dtype``), ``strides`` (bytes), ``ptr`` (device address), ``device``
    (ordinal), ``stream`` (the stream its last writer used).
    """

    __array_priority__ = -1   # never let numpy treat it as a host array

    def __init__(self, shape, dtype, strides=None, allocation: Allocation | None = None,
                 ptr: int | None = None, device: int = 0, stream: int = 0, kdsl_dtype=None):
        self.kdsl_dtype = dt.as_dtype(kdsl_dtype if kdsl_dtype is not None else dtype)
        try:
            self.dtype = np.dtype(self.kdsl_dtype.np)
        except TypeError:     # bfloat16 without ml_dtypes: its 16 bits
            self.dtype = np.dtype(np.uint16)
        self.shape = tuple(int(s) for s in shape)
        itemsize = self.dtype.itemsize
        if strides is None:
            from kdsl.runtime.arrays import c_strides
            strides = c_strides(self.shape, itemsize)
        self.strides = tuple(int(s) for s in strides)
        self.device, self.stream = device, stream
        from kdsl.runtime.arrays import is_c_contiguous
        self.is_c_contiguous = is_c_contiguous(self.shape, self.strides, self.dtype.itemsize)
        if allocation is None and ptr is None:
            allocation = Allocation(self.nbytes_span(), device, stream)
        self._allocation = allocation
        self.ptr = allocation.ptr if ptr is None else int(ptr)

    # ----------------------------------------------------------------- properties
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def nbytes_span(self) -> int:
        """Bytes from the first to one past the last element (the allocation it needs)."""
        if self.size == 0:
            return 0
        return sum((s - 1) * abs(st) for s, st in zip(self.shape, self.strides)) + self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self.kdsl_dtype.name}, "
                f"device={self.device})")

    # ----------------------------------------------------------------- protocols
    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3,
                "strides": None if self.is_c_contiguous else self.strides,
                # v3: the stream the data was last written on (1 = the legacy default stream)
                "stream": self.stream or 1}

    def __dlpack_device__(self) -> tuple:
        return (2, self.device)       # kDLCUDA

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        from .dlpack import export
        if stream is not None and stream != -1 and int(stream) != (self.stream or 1):
            driver.device(self.device)
            sync_stream(self.stream)   # the consumer's stream may run before ours
        return export(self, max_version)

    # ----------------------------------------------------------------- host transfers
    def numpy(self) -> np.ndarray:
        """A numpy copy (waits for the array's stream)."""
        if self.size and not self.is_c_contiguous:
            return _gather_strided(self)
        out = np.empty(self.shape, self.dtype)
        if self.size:
            driver.device(self.device)
            L = driver.lib()
            L.check(L.cuMemcpyDtoHAsync_v2(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(self.ptr),
                                           self.nbytes, ctypes.c_void_p(self.stream)), "cuMemcpyDtoH")
            sync_stream(self.stream)
        return out

    def item(self):
        """The only element as a Python scalar (waits for the array's stream), like numpy's."""
        if self.size != 1:
            raise ValueError(f"item(): the array has {self.size} elements, not 1")
        return self.numpy().item()

    def copy_to_host(self) -> np.ndarray:
        return self.numpy()


def _gather_strided(a: DeviceArray) -> np.ndarray:
    """A strided device array to numpy: copy the span, then view it with the strides."""
    lo = sum((s - 1) * st for s, st in zip(a.shape, a.strides) if st < 0)
    span = a.nbytes_span()
    raw = np.empty(span, np.uint8)
    L = driver.lib()
    driver.device(a.device)
    L.check(L.cuMemcpyDtoHAsync_v2(ctypes.c_void_p(raw.ctypes.data), ctypes.c_void_p(a.ptr + lo), span,
                                   ctypes.c_void_p(a.stream)), "cuMemcpyDtoH")
    sync_stream(a.stream)
    view = np.lib.stride_tricks.as_strided(raw[-lo:].view(a.dtype) if lo else raw.view(a.dtype),
                                           a.shape, a.strides)
    return np.ascontiguousarray(view)


def sync_stream(stream: int) -> None:
    L = driver.lib()
    L.check(L.cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")


def empty(shape, dtype, device: int = 0, stream: int = 0) -> DeviceArray:
    """An uninitialised C-contiguous DeviceArray."""
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return DeviceArray(shape, dtype, device=device, stream=stream)


def to_device(a, device: int = 0, stream: int = 0, wait: bool = True) -> DeviceArray:
    """A DeviceArray holding a copy of the host array ``a`` (any numpy array or array-like).
    ``wait=False``: the copy is only enqueued on ``stream`` (the array keeps the host copy alive;
    kernels launched after it on that stream see the data)."""
    a = np.asarray(a)
    kd = None
    try:
        kd = dt.as_dtype(a.dtype)
    except TypeError:
        raise TypeError(f"to_device: dtype {a.dtype} is not a kdsl dtype") from None
    a = a if a.flags.c_contiguous else a.copy(order="C")   # (ascontiguousarray makes 0-d 1-d)
    out = DeviceArray(a.shape, a.dtype, device=device, stream=stream, kdsl_dtype=kd)
    if a.nbytes:
        L = driver.lib()
        driver.device(device)
        L.check(L.cuMemcpyHtoDAsync_v2(ctypes.c_void_p(out.ptr), ctypes.c_void_p(a.ctypes.data),
                                       a.nbytes, ctypes.c_void_p(stream)), "cuMemcpyHtoD")
        if wait:
            sync_stream(stream)   # `a` may be freed by the caller as soon as this returns
        else:
            out._host_keepalive = a
    return out


def synchronize(device: int = 0) -> None:
    """Wait until all work on ``device`` is done."""
    L = driver.lib()
    driver.device(device)
    L.check(L.cuCtxSynchronize(), "cuCtxSynchronize")
