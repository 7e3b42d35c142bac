"""DLPack export of a ``DeviceArray`` (a legacy ``"dltensor"`` capsule, which every consumer
takes) with ctypes: the structs of dlpack.h, a capsule whose destructor calls the tensor's
deleter when no consumer took it, and a deleter that drops the reference to the array."""
from __future__ import annotations

import ctypes

import numpy as np

from kdsl import dtypes as dt
from kdsl.runtime.dlpack import DLDataType, DLDevice, DLTensor   # dlpack.h's structs


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]

_CUDA = 2
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}   # kDLInt, kDLUInt, kDLFloat, kDLBool
_BFLOAT = 4

#: address of a live DLManagedTensor -> what it keeps alive (struct, shape arrays, the array)
_live: dict = {}


@_DELETER
def _deleter(ptr):
    _live.pop(ctypes.addressof(ptr.contents), None)


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# the destructor runs while the capsule is being freed: it must take the capsule as a raw
# pointer (a py_object argument would revive and free it a second time)
_api = ctypes.PyDLL(None)
_IsValidRaw = _api.PyCapsule_IsValid
_IsValidRaw.restype = ctypes.c_int
_IsValidRaw.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_GetPointerRaw = _api.PyCapsule_GetPointer
_GetPointerRaw.restype = ctypes.c_void_p
_GetPointerRaw.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

_NAME = b"dltensor"


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # a consumer renames the capsule to "used_dltensor" and owns the tensor from then on
    if _IsValidRaw(capsule, _NAME):
        addr = _GetPointerRaw(capsule, _NAME)
        _live.pop(addr, None)


def _dl_dtype(a) -> DLDataType:
    if a.kdsl_dtype is dt.bfloat16:
        return DLDataType(_BFLOAT, 16, 1)
    d = np.dtype(a.dtype)
    return DLDataType(_CODES[d.kind], d.itemsize * 8, 1)


def export(a, max_version=None):
    """A ``"dltensor"`` capsule viewing DeviceArray ``a`` (kept alive until the consumer's
    tensor is deleted)."""
    nd = a.ndim
    shape = (ctypes.c_int64 * max(nd, 1))(*a.shape)
    item = a.dtype.itemsize
    strides = (ctypes.c_int64 * max(nd, 1))(*[s // item for s in a.strides])
    m = DLManagedTensor()
    m.dl_tensor = DLTensor(ctypes.c_void_p(a.ptr), DLDevice(_CUDA, a.device), nd, _dl_dtype(a),
                           ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                           ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 0)
    m.manager_ctx = None
    m.deleter = _deleter
    addr = ctypes.addressof(m)
    _live[addr] = (m, shape, strides, a)
    return _PyCapsule_New(ctypes.c_void_p(addr), _NAME,
                          ctypes.cast(_capsule_destructor, ctypes.c_void_p))
