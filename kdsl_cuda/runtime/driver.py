"""The CUDA driver API, called through ctypes on the driver's own ``libcuda.so.1``.

Why ctypes and not ``cuda.bindings.driver``: a kernel call's Python cost is the product here
(issue 10: at or below CuPy's ``RawKernel``), and a ctypes call with fixed ``argtypes`` costs
well under a microsecond, with the arguments prepacked once per kernel (``launch.py``).  The
handful of functions used is listed in ``_SIGNATURES`` with the exported (``_v2``) names the
CUDA headers map them to.  NVRTC comes from the pip wheels, through ctypes too
(``nvrtc.py``, ``build.py``); nothing here needs a CUDA toolkit, only the NVIDIA driver.

Contexts: every device is used through its *primary* context, the one the CUDA runtime (and so
PyTorch, CuPy, JAX) uses, so pointers and streams are shared with those libraries.  A thread
makes it current once (``Device.activate``).
"""
from __future__ import annotations

import ctypes
import threading

from kdsl.errors import BackendUnavailable, KdslError

_P = ctypes.c_void_p
_U = ctypes.c_uint
_I = ctypes.c_int
_S = ctypes.c_size_t
_PP = ctypes.POINTER(ctypes.c_void_p)

#: name -> argtypes (every function returns CUresult, an int)
_SIGNATURES = {
    "cuInit": [_U],
    "cuDriverGetVersion": [ctypes.POINTER(_I)],
    "cuDeviceGetCount": [ctypes.POINTER(_I)],
    "cuDeviceGet": [ctypes.POINTER(_I), _I],
    "cuDeviceGetAttribute": [ctypes.POINTER(_I), _I, _I],
    "cuDevicePrimaryCtxRetain": [_PP, _I],
    "cuCtxSetCurrent": [_P],
    "cuCtxGetCurrent": [_PP],
    "cuCtxSynchronize": [],
    "cuModuleLoadData": [_PP, ctypes.c_char_p],
    "cuModuleGetFunction": [_PP, _P, ctypes.c_char_p],
    "cuFuncSetAttribute": [_P, _I, _I],
    "cuFuncGetAttribute": [ctypes.POINTER(_I), _I, _P],
    "cuLaunchKernel": [_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P],
    "cuMemAlloc_v2": [_PP, _S],
    "cuMemFree_v2": [_P],
    "cuMemAllocAsync": [_PP, _S, _P],
    "cuMemFreeAsync": [_P, _P],
    "cuMemcpyHtoDAsync_v2": [_P, _P, _S, _P],
    "cuMemcpyDtoHAsync_v2": [_P, _P, _S, _P],
    "cuMemcpyDtoDAsync_v2": [_P, _P, _S, _P],
    "cuMemsetD8Async": [_P, ctypes.c_ubyte, _S, _P],
    "cuStreamSynchronize": [_P],
    "cuPointerGetAttribute": [_P, _I, _P],
    "cuDeviceGetDefaultMemPool": [_PP, _I],
    "cuMemPoolSetAttribute": [_P, _I, _P],
    "cuGetErrorName": [_I, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [_I, ctypes.POINTER(ctypes.c_char_p)],
}

# enum values from cuda.h
ATTR_MAX_THREADS_PER_BLOCK = 1
ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_CC_MAJOR = 75
ATTR_CC_MINOR = 76
ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
ATTR_MEMORY_POOLS_SUPPORTED = 115
FUNC_ATTR_SHARED_SIZE_BYTES = 1
FUNC_ATTR_MAX_DYNAMIC_SHARED = 8
POINTER_ATTR_DEVICE_ORDINAL = 9
MEMPOOL_ATTR_RELEASE_THRESHOLD = 4
ERROR_NO_DEVICE = 100


class CudaError(KdslError, RuntimeError):
    """A CUDA driver call failed (``code``: the CUresult)."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


class _Lib:
    """``libcuda`` with typed functions; ``check(fn(...), what)`` raises CudaError."""

    def __init__(self):
        try:
            self.dll = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise BackendUnavailable(f"the cuda backend needs the NVIDIA driver (libcuda.so.1), "
                                     f"which this machine does not have ({e}); kernels can still be "
                                     "inspected with kernel.source(..., backend=\"cuda\") and run on "
                                     "backend=\"interp-cuda\" (the SIMT interpreter)") from None
        # the launches of the fast launchers: no argtypes, so no per-call argument conversion
        # (the compiled helper calls its address; without the helper, ctypes calls it)
        raw = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        raw.restype = _I
        self.raw_launch = raw
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(self.dll, name, None)
            if fn is None:
                continue      # an old driver: the calls that need it say so
            fn.argtypes = argtypes
            fn.restype = _I
            setattr(self, name, fn)

    def error_text(self, code: int) -> str:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.cuGetErrorName(code, ctypes.byref(name))
        self.cuGetErrorString(code, ctypes.byref(text))
        n = name.value.decode() if name.value else f"CUresult {code}"
        return f"{n}: {text.value.decode() if text.value else 'unknown error'}"

    def check(self, code: int, what: str) -> None:
        if code:
            raise CudaError(f"CUDA driver call {what} failed with {self.error_text(code)}", code)


_lib: _Lib | None = None
_lib_lock = threading.RLock()   # device() builds a Device, which calls lib()
_devices: dict = {}


def lib() -> _Lib:
    """The loaded and initialised driver (BackendUnavailable where there is none)."""
    global _lib
    if _lib is None:
        with _lib_lock:
            if _lib is None:
                L = _Lib()
                code = L.cuInit(0)
                if code == ERROR_NO_DEVICE:
                    raise BackendUnavailable("the cuda backend found the NVIDIA driver but no CUDA "
                                             "device; run on backend=\"interp-cuda\" instead")
                L.check(code, "cuInit")
                _lib = L
    return _lib


def is_available() -> bool:
    """Whether a CUDA driver and at least one device are usable."""
    try:
        return device_count() > 0
    except (BackendUnavailable, CudaError):
        return False


def device_count() -> int:
    L = lib()
    n = _I()
    L.check(L.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


class Device:
    """One CUDA device used through its primary context (see the module docstring)."""

    def __init__(self, ordinal: int):
        L = lib()
        count = device_count()
        if not 0 <= ordinal < count:
            raise CudaError(f"there is no CUDA device {ordinal} (this machine has {count})")
        self.ordinal = ordinal
        h = _I()
        L.check(L.cuDeviceGet(ctypes.byref(h), ordinal), "cuDeviceGet")
        self.handle = h.value
        ctx = _P()
        L.check(L.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.handle), "cuDevicePrimaryCtxRetain")
        self.context = ctx.value
        self._local = threading.local()
        self.activate()
        self.cc = (self.attribute(ATTR_CC_MAJOR), self.attribute(ATTR_CC_MINOR))
        self.arch = f"sm_{self.cc[0]}{self.cc[1]}"
        self.sm_count = self.attribute(ATTR_MULTIPROCESSOR_COUNT)
        self.max_shared = self.attribute(ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.pools = bool(self.attribute(ATTR_MEMORY_POOLS_SUPPORTED))
        if self.pools:   # keep freed memory in the pool (a caching allocator, like torch's)
            pool = _P()
            L.check(L.cuDeviceGetDefaultMemPool(ctypes.byref(pool), self.handle),
                    "cuDeviceGetDefaultMemPool")
            limit = ctypes.c_uint64(2 ** 64 - 1)
            L.check(L.cuMemPoolSetAttribute(pool, MEMPOOL_ATTR_RELEASE_THRESHOLD, ctypes.byref(limit)),
                    "cuMemPoolSetAttribute")

    def attribute(self, attr: int) -> int:
        v = _I()
        lib().check(lib().cuDeviceGetAttribute(ctypes.byref(v), attr, self.handle),
                    "cuDeviceGetAttribute")
        return v.value

    def activate(self) -> None:
        """Make this device's primary context current on the calling thread, if it is not."""
        L = lib()
        cur = _P()
        L.check(L.cuCtxGetCurrent(ctypes.byref(cur)), "cuCtxGetCurrent")
        if cur.value != self.context:
            L.check(L.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def __repr__(self) -> str:
        return f"Device({self.ordinal}, {self.arch}, {self.sm_count} SMs)"


def device(ordinal: int = 0) -> Device:
    """The Device of ``ordinal`` (made once per process), current on the calling thread."""
    d = _devices.get(ordinal)
    if d is None:
        with _lib_lock:
            d = _devices.get(ordinal)
            if d is None:
                d = _devices[ordinal] = Device(ordinal)
                return d
    d.activate()
    return d


def pointer_device(ptr: int) -> int:
    """The ordinal of the device that owns device pointer ``ptr``."""
    L = lib()
    v = _I()
    L.check(L.cuPointerGetAttribute(ctypes.byref(v), POINTER_ATTR_DEVICE_ORDINAL, _P(ptr)),
            "cuPointerGetAttribute")
    return v.value
