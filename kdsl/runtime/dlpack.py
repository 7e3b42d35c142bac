"""Reading a host DLPack tensor as a numpy array, in place (ctypes, no third-party code).

``np.from_dlpack`` refuses dtypes numpy has no type for, bfloat16 above all (torch and JAX
export it as DLPack's ``kDLBfloat``), and marks the views of legacy capsules read-only (an
``out=`` must be written), so tensors are read here: the legacy ``"dltensor"`` capsule is
opened, never consumed (its name is left as it is, so the producer's capsule destructor frees
the tensor), and kept alive by the numpy view's base object for as long as the view lives.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .. import dtypes as dt


class DLDevice(ctypes.Structure):
    """dlpack.h's DLDevice."""
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """dlpack.h's DLDataType."""
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """dlpack.h's DLTensor (the structs are shared with kdsl_cuda's DLPack export)."""
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


#: DLPack device types whose memory the CPU reads: kDLCPU, kDLCUDAHost (pinned), kDLCUDAManaged,
#: kDLROCMHost
HOST_DEVICES = frozenset((1, 3, 13, 11))
#: kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool -> numpy kind letter ("bf" for bfloat16)
_KINDS = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "b"}

_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_GetPointer.restype = ctypes.c_void_p
_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_IsValid.restype = ctypes.c_int
_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Holder:
    """The base of a view made from a capsule: keeps the exporter and the capsule alive."""

    __slots__ = ("__array_interface__", "keep")

    def __init__(self, iface, keep):
        self.__array_interface__ = iface
        self.keep = keep


def device_type(a) -> int:
    """The DLPack device type of ``a`` (``__dlpack_device__()[0]``), -1 when it cannot say."""
    try:
        return int(a.__dlpack_device__()[0])
    except Exception:
        return -1


def _numpy_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    kind = _KINDS.get(code)
    if kind is None or lanes != 1:
        raise TypeError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) is not a "
                        "kdsl dtype")
    if kind == "bf":
        if bits != 16:
            raise TypeError(f"DLPack bfloat of {bits} bits is not a kdsl dtype")
        return dt.bfloat16.np          # ml_dtypes' bfloat16 (TypeError naming it if absent)
    if kind == "b":
        return np.dtype(np.bool_)
    return np.dtype(f"{kind}{bits // 8}")


def from_dlpack(a) -> np.ndarray:
    """A numpy array viewing host DLPack tensor ``a`` in place (no copy; writable: legacy
    capsules cannot say the memory is read-only, and kernels write only into ``out=``).  Raises
    TypeError for a dtype kdsl has no type for, ValueError for memory the CPU cannot read."""
    cap = a.__dlpack__()        # no max_version: a legacy "dltensor" capsule (the spec's rule)
    if not _IsValid(cap, b"dltensor"):
        raise TypeError(f"{type(a).__name__}.__dlpack__() did not return a DLPack capsule")
    t = DLTensor.from_address(_GetPointer(cap, b"dltensor"))
    dev, code, bits, lanes = t.device.device_type, t.dtype.code, t.dtype.bits, t.dtype.lanes
    if dev not in HOST_DEVICES:
        del cap     # the producer frees it now, not while the exception is being raised
        raise ValueError(f"the DLPack tensor lives on device type {dev}, not in host memory")
    try:
        dtype = _numpy_dtype(code, bits, lanes)
    except TypeError:
        del cap
        raise
    nd = t.ndim
    shape = tuple(int(t.shape[i]) for i in range(nd))
    strides = (tuple(int(t.strides[i]) * dtype.itemsize for i in range(nd))
               if t.strides else None)
    ptr = (t.data or 0) + t.byte_offset
    if ptr == 0 or 0 in shape:     # nothing is read: an empty array of that shape
        return np.empty(shape, dtype)
    # the interface describes the bytes as unsigned ints (bfloat16 has no typestr), viewed as
    # the real dtype after; the holder keeps the capsule (and so the tensor) alive: it is never
    # consumed (renamed), so the producer's capsule destructor frees the tensor
    store = np.dtype(f"u{dtype.itemsize}") if dtype.kind != "b" else dtype
    iface = {"version": 3, "data": (ptr, False), "shape": shape, "strides": strides,
             "typestr": store.str}
    view = np.asarray(_Holder(iface, (a, cap)))
    return view if store == dtype else view.view(dtype)
