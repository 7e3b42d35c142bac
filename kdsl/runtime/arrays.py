"""What dispatch needs to know about an array argument, whatever library made it.

``array_info(a)`` gives (numpy dtype, shape, C-contiguous?) for numpy arrays,
objects exposing ``__cuda_array_interface__`` (CuPy, PyTorch, Numba, kdsl_cuda
DeviceArray) or ``__array_interface__``, and None for anything else.  Nothing
here imports a GPU library.
"""
from __future__ import annotations

import numpy as np


def c_strides(shape, itemsize: int) -> tuple:
    """Byte strides of a C-contiguous array of ``shape``."""
    out, acc = [], itemsize
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def is_c_contiguous(shape, strides, itemsize: int) -> bool:
    """Whether byte ``strides`` are C order (size-1 dims and empty arrays match anything)."""
    if strides is None or any(s == 0 for s in shape):
        return True
    expect = c_strides(shape, itemsize)
    return all(n == 1 or a == b for n, a, b in zip(shape, strides, expect))


def _from_interface(iface: dict):
    dtype = np.dtype(iface["typestr"])
    shape = tuple(int(s) for s in iface["shape"])
    return dtype, shape, is_c_contiguous(shape, iface.get("strides"), dtype.itemsize)


#: type -> reader(a) -> (numpy dtype, shape, C-contiguous): fast or protocol-free readers that
#: backends register for array types they know (kdsl_cuda: torch, CuPy, DLPack-only arrays)
_readers: dict = {}


def register_reader(kind: type, reader) -> None:
    """Let ``array_info`` read arrays of exactly type ``kind`` with ``reader``."""
    _readers[kind] = reader


def array_info(a):
    """(numpy dtype, shape, C-contiguous) of an array argument, or None if ``a`` is not one."""
    if type(a) is np.ndarray or isinstance(a, np.ndarray):
        return a.dtype, a.shape, a.flags.c_contiguous
    reader = _readers.get(type(a))
    if reader is not None:
        return reader(a)
    for attr in ("__cuda_array_interface__", "__array_interface__"):
        try:
            iface = getattr(a, attr, None)
        except Exception:     # e.g. JAX raises for dtypes the interface cannot describe
            iface = None
        if isinstance(iface, dict):
            try:
                got = _from_interface(iface)
            except (KeyError, TypeError, ValueError):
                break
            if got[0].kind != "V":
                return got
            break       # a type the interface cannot describe (torch's bfloat16: '<V2')
    if _dlpack_reader is None and hasattr(a, "__dlpack__"):
        _load_cuda_readers()
    if _dlpack_reader is not None and hasattr(a, "__dlpack__"):
        try:
            return _dlpack_reader(a)
        except Exception:
            return None
    return None


#: reads arrays that only DLPack describes (bfloat16 from JAX), set by a backend that can
_dlpack_reader = None


def _load_cuda_readers() -> None:
    """Load the installed cuda backend, which registers its DLPack reader: a first call with a
    bfloat16 device array reads the key before any backend is loaded."""
    from ..backends import registry
    try:
        if registry.is_installed("cuda"):
            registry.get_backend("cuda")
    except Exception:       # not usable here: the array stays unreadable (a clear error later)
        pass


def register_dlpack_reader(reader) -> None:
    """``reader(a) -> (dtype, shape, C-contiguous)`` for DLPack-only arrays (kdsl_cuda)."""
    global _dlpack_reader
    _dlpack_reader = reader


def is_device_array(a) -> bool:
    """True for arrays that live on a CUDA device."""
    return hasattr(a, "__cuda_array_interface__")
