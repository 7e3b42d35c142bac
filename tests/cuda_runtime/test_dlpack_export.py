"""DeviceArray's DLPack capsule: the struct a consumer reads, and its lifetime (the array stays
alive while a consumer holds the tensor; an unused capsule frees it)."""
import ctypes
import gc

import numpy as np
import pytest

pytest.importorskip("kdsl_cuda", reason="kdsl_cuda is not installed (pip install ./kdsl_cuda)")

from cuda_fakes import device_array  # noqa: E402


def test_capsule_describes_the_array_and_frees_when_unused():
    from kdsl_cuda.runtime import dlpack
    a = device_array((4, 6), np.float32, strides=(48, 8))
    before = len(dlpack._live)
    cap = a.__dlpack__()
    assert len(dlpack._live) == before + 1
    addr = dlpack._PyCapsule_GetPointer(cap, b"dltensor")
    m = dlpack.DLManagedTensor.from_address(addr)
    t = m.dl_tensor
    assert t.data == a.ptr and t.ndim == 2 and t.device.device_type == 2
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)
    assert [t.shape[i] for i in range(2)] == [4, 6]
    assert [t.strides[i] for i in range(2)] == [12, 2]        # elements
    assert a.__dlpack_device__() == (2, 0)
    del cap, m, t
    gc.collect()
    assert len(dlpack._live) == before


def test_consumer_calls_the_deleter():
    from kdsl_cuda.runtime import dlpack
    a = device_array((3,), np.int32)
    before = len(dlpack._live)
    cap = a.__dlpack__()
    addr = dlpack._PyCapsule_GetPointer(cap, b"dltensor")
    # what a consumer does: rename the capsule (it owns the tensor now), later call the deleter
    rename = ctypes.pythonapi.PyCapsule_SetName
    rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
    rename(cap, b"used_dltensor")
    del cap
    gc.collect()
    assert len(dlpack._live) == before + 1          # the consumer still holds it
    m = dlpack.DLManagedTensor.from_address(addr)
    m.deleter(ctypes.pointer(m))
    assert len(dlpack._live) == before
