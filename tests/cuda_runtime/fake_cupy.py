"""A module standing in for ``cupy`` without a GPU: arrays at fake device addresses with what
kdsl_cuda reads of them, modelled on CuPy's Cython ``_ndarray_base`` (cupy/_core/core.pxd):
``dtype`` (a numpy dtype), ``shape``, ``strides`` (bytes), ``size``, ``data`` (a memory
pointer: ``ptr``, ``device_id``), ``_c_contiguous``/``_f_contiguous``, ``flags`` (a new object
per read, as CuPy's property builds one), ``device`` (``id``; a context manager), ``base``,
``__cuda_array_interface__``; ``cupy.ndarray(shape, dtype)``, ``cupy.empty`` and
``cupy.cuda.get_current_stream()``.  The plain attributes are ``__slots__`` members (C
getters, as CuPy's are), so benchmarks/launch_host.py --cupy times kdsl's own work.
``install(monkeypatch)`` puts it in ``sys.modules`` for one test."""
import functools
import sys
import types

import numpy as np


def _c_strides(shape, itemsize):
    out, acc = [], itemsize
    for s in reversed(shape):
        out.insert(0, acc)
        acc *= max(s, 1)
    return tuple(out)


def _c_contiguous(shape, strides, itemsize) -> bool:
    """numpy's (and CuPy's) rule: size-1 dims and empty arrays do not count."""
    if 0 in shape:
        return True
    return all(st == want or s == 1
               for s, st, want in zip(shape, strides, _c_strides(shape, itemsize)))


def make(fields=True):
    """A fresh fake ``cupy`` module (``cupy.ndarray(shape, dtype, strides=None, device=0,
    ptr=None)``; ``cupy.cuda.current``: the current stream object, its ``ptr`` settable;
    ``cupy.cuda.device``: the current device's id, settable).  ``fields=False``: arrays without
    the Cython fields ``_c_contiguous``/``_f_contiguous`` (only the public ``flags``)."""
    cc, fc = ("_c_contiguous", "_f_contiguous") if fields else ("_cc", "_fc")
    cupy = types.ModuleType("cupy")
    next_ptr = [1 << 42]

    class MemoryPointer:
        __slots__ = ("ptr", "device_id")

        def __init__(self, ptr, device_id):
            self.ptr, self.device_id = ptr, device_id

    class Device:
        __slots__ = ("id", "_prev")

        def __init__(self, id=0):
            self.id = id

        def __enter__(self):
            self._prev, cupy.cuda.device = cupy.cuda.device, self.id
            return self

        def __exit__(self, *exc):
            cupy.cuda.device = self._prev

    class Flags:
        __slots__ = ("c_contiguous", "f_contiguous", "owndata")

        def __init__(self, c, f, own):
            self.c_contiguous, self.f_contiguous, self.owndata = c, f, own

    class ndarray:
        __slots__ = ("dtype", "shape", "strides", "size", "data", cc, fc, "base")

        def __init__(self, shape, dtype=float, strides=None, device=None, ptr=None, base=None):
            shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else
                                           (shape,)))
            dtype = np.dtype(dtype)
            size = 1
            for s in shape:
                size *= s
            st = _c_strides(shape, dtype.itemsize) if strides is None else tuple(strides)
            if ptr is None:
                ptr = next_ptr[0]
                next_ptr[0] += max(size, 1) * dtype.itemsize + 256
            dev = cupy.cuda.device if device is None else device
            self.dtype, self.shape, self.strides, self.size = dtype, shape, st, size
            self.data = MemoryPointer(ptr, dev)
            setattr(self, cc, _c_contiguous(shape, st, dtype.itemsize))
            setattr(self, fc, _c_contiguous(shape[::-1], st[::-1], dtype.itemsize))
            self.base = base

        @property
        def flags(self):
            return Flags(getattr(self, cc), getattr(self, fc), self.base is None)

        @property
        def device(self):
            return Device(self.data.device_id)

        @property
        def ndim(self):
            return len(self.shape)

        @property
        def __cuda_array_interface__(self):
            return {"version": 3, "shape": self.shape, "typestr": self.dtype.str,
                    "strides": None if getattr(self, cc) else self.strides,
                    "data": (self.data.ptr if self.size else 0, False), "stream": 1}

        def __dlpack_device__(self):
            return (2, self.data.device_id)

    ndarray.__module__ = "cupy"
    cupy.ndarray = ndarray
    cupy.__version__ = "0+fake"

    def empty(shape, dtype=float, order="C"):
        return ndarray(shape, dtype)

    def empty_like(a, dtype=None):
        return ndarray(a.shape, a.dtype if dtype is None else dtype)

    cupy.empty, cupy.empty_like = empty, empty_like

    class Stream:
        __slots__ = ("ptr",)

        def __init__(self, ptr=0):
            self.ptr = ptr

    cupy.cuda = types.SimpleNamespace(Device=Device, Stream=Stream, device=0,
                                      current=Stream(0))
    # a C callable, as CuPy's (Cython) one is; an optional device id is accepted (as
    # getattr's default, never used: one device, one current stream)
    cupy.cuda.get_current_stream = functools.partial(getattr, cupy.cuda, "current")
    return cupy


def install(monkeypatch, fields=True):
    """The fake CuPy (``make(fields)``) as ``cupy`` for one test; kdsl's readers are restored
    after."""
    import importlib

    from kdsl.runtime import arrays
    backend = importlib.import_module("kdsl_cuda.backend")     # the module, not the instance
    cupy = make(fields)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(backend, "_readers_done", set())
    monkeypatch.setattr(arrays, "_readers", dict(arrays._readers))
    return cupy
