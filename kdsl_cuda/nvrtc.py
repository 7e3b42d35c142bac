"""NVRTC's C API through ctypes, on the library the pip wheels install (no ``cuda.bindings``).

Why: importing ``cuda.bindings.nvrtc`` costs ~50-80 ms (``cuda.pathfinder`` alone ~40 ms),
a quarter of a cold first kernel; finding and ``dlopen``-ing ``libnvrtc`` ourselves costs a
few stat calls.  The search follows ``cuda.pathfinder``'s order for NVRTC: a library this
process already loaded, then the wheels' layouts on ``sys.path`` (``nvidia/cu13/lib``,
``nvidia/cuda_nvrtc/lib``), ``$CONDA_PREFIX/lib``, the system loader (``LD_LIBRARY_PATH``,
``ld.so.cache``), then ``$CUDA_PATH`` / ``$CUDA_HOME``.  ``$KDSL_NVRTC_LIBRARY`` names a file
explicitly.  Where none loads, ``library()`` answers the ``cuda.bindings`` wrapper (same
interface), so an unusual install still compiles.  ``KDSL_NVRTC_BINDINGS=1`` forces it."""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys

from kdsl import config

#: the sonames NVRTC's pip wheels and toolkits install, newest first
SONAMES = ("libnvrtc.so.13", "libnvrtc.so.12")
#: where the pip wheels put them, relative to a site-packages folder
WHEEL_DIRS = ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib")
_SUCCESS = 0


class CtypesNvrtc:
    """NVRTC called through ctypes on ``path`` (a loaded ``libnvrtc``)."""

    kind = "ctypes"

    def __init__(self, dll: ctypes.CDLL, path: str):
        self.dll, self.path = dll, path
        P, PP, S = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)
        strs = ctypes.POINTER(ctypes.c_char_p)
        for fname, args in (("nvrtcVersion", [ctypes.POINTER(ctypes.c_int)] * 2),
                            ("nvrtcCreateProgram", [PP, ctypes.c_char_p, ctypes.c_char_p,
                                                    ctypes.c_int, strs, strs]),
                            ("nvrtcCompileProgram", [P, ctypes.c_int, strs]),
                            ("nvrtcDestroyProgram", [PP]),
                            ("nvrtcGetProgramLogSize", [P, S]), ("nvrtcGetProgramLog", [P, ctypes.c_char_p]),
                            ("nvrtcGetCUBINSize", [P, S]), ("nvrtcGetCUBIN", [P, ctypes.c_char_p]),
                            ("nvrtcGetPTXSize", [P, S]), ("nvrtcGetPTX", [P, ctypes.c_char_p])):
            f = getattr(dll, fname)
            f.argtypes, f.restype = args, ctypes.c_int
        dll.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        dll.nvrtcGetErrorString.restype = ctypes.c_char_p

    def version(self) -> tuple:
        """``(major, minor)`` of this NVRTC."""
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.dll.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def error_name(self, code: int) -> str:
        """NVRTC's name of a result code (``NVRTC_ERROR_COMPILATION``)."""
        return (self.dll.nvrtcGetErrorString(code) or b"NVRTC_ERROR_%d" % code).decode()

    def _check(self, code: int, what: str) -> None:
        if code != _SUCCESS:
            raise RuntimeError(f"{what}: {self.error_name(code)}")

    def compile(self, source: bytes, name: bytes, args: list, output: str = "cubin"):
        """``(code bytes, None)`` of one compile (``output``: "cubin" or "ptx"), or ``(None,
        "<error name>, compilation log:\\n<log>")`` when NVRTC rejects the source; RuntimeError
        when no program can be made.  The program is destroyed either way."""
        d = self.dll
        prog = ctypes.c_void_p()
        self._check(d.nvrtcCreateProgram(ctypes.byref(prog), source, name, 0, None, None),
                    f"nvrtcCreateProgram({name.decode()})")
        try:
            argv = (ctypes.c_char_p * max(len(args), 1))(*args)
            err = d.nvrtcCompileProgram(prog, len(args), argv)
            size = ctypes.c_size_t()
            if err != _SUCCESS:
                d.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                d.nvrtcGetProgramLog(prog, log)
                text = log.raw.rstrip(b"\0").decode(errors="replace")
                return None, f"{self.error_name(err)}, compilation log:\n{text}"
            get_size, get = ((d.nvrtcGetCUBINSize, d.nvrtcGetCUBIN) if output == "cubin"
                             else (d.nvrtcGetPTXSize, d.nvrtcGetPTX))
            self._check(get_size(prog, ctypes.byref(size)), f"nvrtcGet{output.upper()}Size")
            buf = ctypes.create_string_buffer(size.value)
            self._check(get(prog, buf), f"nvrtcGet{output.upper()}")
            return buf.raw, None
        finally:
            d.nvrtcDestroyProgram(ctypes.byref(prog))


class BindingsNvrtc:
    """The same interface on ``cuda.bindings.nvrtc`` (the fallback; ~50-80 ms to import)."""

    kind = "cuda.bindings"

    def __init__(self, module):
        self.nv, self.path = module, None

    def version(self) -> tuple:
        """``(major, minor)`` of this NVRTC."""
        err, major, minor = self.nv.nvrtcVersion()
        if err != self.nv.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"nvrtcVersion: {err}")
        return major, minor

    def compile(self, source: bytes, name: bytes, args: list, output: str = "cubin"):
        """As ``CtypesNvrtc.compile``."""
        nv = self.nv
        err, prog = nv.nvrtcCreateProgram(source, name, 0, [], [])
        if err != nv.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"nvrtcCreateProgram({name.decode()}): {err}")
        try:
            (err,) = nv.nvrtcCompileProgram(prog, len(args), args)
            if err != nv.nvrtcResult.NVRTC_SUCCESS:
                _, size = nv.nvrtcGetProgramLogSize(prog)
                log = b" " * size
                nv.nvrtcGetProgramLog(prog, log)
                text = log.rstrip(b"\0").decode(errors="replace")
                return None, f"{err.name}, compilation log:\n{text}"
            get_size, get = ((nv.nvrtcGetCUBINSize, nv.nvrtcGetCUBIN) if output == "cubin"
                             else (nv.nvrtcGetPTXSize, nv.nvrtcGetPTX))
            _, size = get_size(prog)
            buf = b" " * size
            get(prog, buf)
            return buf, None
        finally:
            nv.nvrtcDestroyProgram(prog)


def candidates() -> list:
    """Files (absolute paths) or sonames to try, in order (see the module docstring)."""
    out = []
    explicit = config.nvrtc_library()
    if explicit:
        return [explicit]
    for entry in sys.path:
        for d in WHEEL_DIRS:
            for so in SONAMES:
                p = os.path.join(entry or os.getcwd(), d, so)
                if os.path.isfile(p):
                    out.append(p)
    if os.environ.get("CONDA_PREFIX"):
        out += [os.path.join(os.environ["CONDA_PREFIX"], "lib", so) for so in SONAMES]
    out += list(SONAMES)                      # the system loader's search
    for var in ("CUDA_PATH", "CUDA_HOME"):
        root = os.environ.get(var)
        if root:
            out += [os.path.join(root, lib, so) for lib in ("lib64", "lib") for so in SONAMES]
    return out


def _already_loaded():
    """A libnvrtc this process loaded already (e.g. by torch or cuda.bindings), or None:
    loading a second copy of another version beside it would be two NVRTCs in one process."""
    mode = getattr(os, "RTLD_NOLOAD", 0)
    if not mode:
        return None
    for so in SONAMES:
        try:
            return CtypesNvrtc(ctypes.CDLL(so, mode | os.RTLD_GLOBAL), so)
        except OSError:
            continue
    return None


def _preload_builtins(path: str) -> None:
    """``dlopen`` the ``libnvrtc-builtins`` beside a wheel's ``libnvrtc`` first: NVRTC loads it
    by soname at its first compile, which finds it only through its own RUNPATH (what
    cuda.pathfinder does for the 13.0 wheel, whose RUNPATH lacked it)."""
    for sibling in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*"))):
        try:
            ctypes.CDLL(sibling, os.RTLD_GLOBAL)
        except OSError:
            pass
        return


def load_ctypes():
    """``CtypesNvrtc`` on the first candidate that loads and answers its version, or None."""
    found = _already_loaded()
    if found is not None:
        return found
    for cand in candidates():
        if os.sep in cand and not os.path.isfile(cand):
            continue
        try:
            if os.sep in cand:
                _preload_builtins(cand)
            lib = CtypesNvrtc(ctypes.CDLL(cand, os.RTLD_GLOBAL), cand)
            lib.version()
        except (OSError, AttributeError, RuntimeError):
            continue                         # not there, or not an NVRTC this code can call
        return lib
    return None


@functools.lru_cache(maxsize=1)
def library():
    """The NVRTC every compile uses: ``CtypesNvrtc`` where a library loads, else
    ``BindingsNvrtc`` (``cuda.bindings``); ImportError when neither is there."""
    if not config.nvrtc_bindings():
        lib = load_ctypes()
        if lib is not None:
            return lib
    import importlib
    return BindingsNvrtc(importlib.import_module("cuda.bindings.nvrtc"))
