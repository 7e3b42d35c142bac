"""The CPython and numpy layouts the native fast launchers read (kdsl_cpu.fastcall), verified
at first use against live objects (``abi``): where anything differs, no launcher is built."""
from __future__ import annotations

import ctypes
import functools
import sys

import numpy as np

# PyArrayObject_fields (numpy/ndarraytypes.h), PyObject and PyTupleObject offsets (64-bit)
OFF_TYPE, OFF_DATA, OFF_ND, OFF_DIMS, OFF_STRIDES, OFF_BASE, OFF_DESCR, OFF_FLAGS = (
    8, 16, 24, 32, 40, 48, 56, 64)
OFF_TUPLE_SIZE, OFF_TUPLE_ITEMS = 16, 24
OFF_BYTES_DATA = 32          # PyBytesObject's ob_sval
NPY_C_CONTIGUOUS, NPY_F_CONTIGUOUS, NPY_WRITEABLE = 0x1, 0x2, 0x400
METH_FASTCALL = 0x80
#: PyArray_GetNDArrayCVersion() values whose PyArrayObject layout and API indices we know
_NUMPY_ABI = (0x02000000, 0x01000009)
_API_NEW_FROM_DESCR = 94     # PyArray_NewFromDescr's index in numpy's C-API table
_INT64_MIN = -(1 << 63)


class Unsupported(Exception):
    """The plan needs something the native launcher does not do (the normal path stays)."""


# ----------------------------------------------------------------- the ABI, verified once
class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


def _api_fn(name, restype, *argtypes):
    # own function objects: never change the shared ctypes.pythonapi attributes
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


def _addr(name: str) -> int:
    return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value


def _word(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


def _numpy_api_table() -> int:
    """Address of numpy's C-API table (what ``import_array()`` reads)."""
    try:
        from numpy._core import _multiarray_umath as mu
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as mu
    get = _api_fn("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
    return get(mu._ARRAY_API, None)


def _check_array(a) -> str | None:
    """Why ``a``'s PyArrayObject does not have the layout we compile against (None: it does)."""
    o = id(a)
    base = id(a.base) if a.base is not None else 0
    flags = ((NPY_C_CONTIGUOUS if a.flags.c_contiguous else 0)
             | (NPY_F_CONTIGUOUS if a.flags.f_contiguous else 0)
             | (NPY_WRITEABLE if a.flags.writeable else 0))
    fixed = [(OFF_TYPE, _word(o + OFF_TYPE), id(type(a))),
             (OFF_DATA, _word(o + OFF_DATA), a.ctypes.data or 0),
             (OFF_ND, ctypes.c_int.from_address(o + OFF_ND).value, a.ndim),
             (OFF_BASE, _word(o + OFF_BASE), base),
             (OFF_DESCR, _word(o + OFF_DESCR), id(a.dtype)),
             (OFF_FLAGS, ctypes.c_int.from_address(o + OFF_FLAGS).value
              & (NPY_C_CONTIGUOUS | NPY_F_CONTIGUOUS | NPY_WRITEABLE), flags)]
    for off, got, want in fixed:
        if got != want:
            return f"ndarray field at offset {off} is {got:#x}, expected {want:#x}"
    # every field around them matched: dims and strides are pointers, safe to follow
    if a.ndim:
        for off, want in ((OFF_DIMS, a.shape), (OFF_STRIDES, a.strides)):
            p = _word(o + off)
            if not p or tuple((ctypes.c_int64 * a.ndim).from_address(p)) != tuple(want):
                return f"ndarray field at offset {off} does not point to {want}"
    return None


@functools.lru_cache(maxsize=None)
def abi():
    """The addresses the launchers call and compare against, or a string saying why native
    launchers are off here (not CPython, not 64-bit, an unknown numpy or object layout)."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return "needs 64-bit CPython"
    if hasattr(sys, "gettotalrefcount") or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return "debug and free-threaded CPython builds have other object layouts"
    try:
        table = (ctypes.c_void_p * 300).from_address(_numpy_api_table())
        version = ctypes.CFUNCTYPE(ctypes.c_uint)(table[0])()
        if version not in _NUMPY_ABI:
            return f"unknown numpy C ABI {version:#x}"
        if table[2] != id(np.ndarray) or table[3] != id(np.dtype):
            return "numpy's C-API table does not hold PyArray_Type/PyArrayDescr_Type"
        x = np.arange(24, dtype=np.float32).reshape(4, 6)
        ro = np.ones(5, np.int64)
        ro.flags.writeable = False
        samples = [x, x[::-1, ::2], np.asfortranarray(x), x.T, np.zeros(()), ro,
                   np.empty((0, 3), np.int8)]
        for a in samples:
            why = _check_array(a)
            if why:
                return why
        t = (x, ro, 7)
        if (ctypes.c_ssize_t.from_address(id(t) + OFF_TUPLE_SIZE).value != 3
                or [_word(id(t) + OFF_TUPLE_ITEMS + 8 * j) for j in range(3)] != list(map(id, t))):
            return "unexpected tuple layout"
        if _word(id(5) + OFF_TYPE) != id(int) or _word(id(True) + OFF_TYPE) != id(bool):
            return "unexpected object header"
        sample = bytes(range(7, 31))
        if ctypes.string_at(id(sample) + OFF_BYTES_DATA, len(sample)) != sample:
            return "unexpected bytes layout"
        fns = {k: _addr(k) for k in (
            "PyEval_SaveThread", "PyEval_RestoreThread", "Py_IncRef", "Py_DecRef", "PyErr_Clear",
            "PyLong_AsLongLongAndOverflow", "PyFloat_AsDouble", "PyTuple_New", "PyTuple_SetItem",
            "PyCFunction_NewEx")}
    except Exception as e:  # no capsule, a symbol missing, ...: stay on the normal path
        return f"{type(e).__name__}: {e}"
    fns["PyArray_NewFromDescr"] = table[_API_NEW_FROM_DESCR]
    objs = {"ndarray": id(np.ndarray), "int": id(int), "float": id(float), "bool": id(bool),
            "tuple": id(tuple), "True": id(True), "NotImplemented": id(NotImplemented)}
    return {"fn": fns, "obj": objs}
