"""The optional compiled helper of the cuda fast launchers (``launch_helper.c``).

``Launcher(cu, codes, fn, bx, by, bz, grid)``: one kernel's launch in one C call (the slot
values converted by their codes -- the letters of their ``kdsl.runtime.slots.SLOT`` formats,
``codes`` -- onto the C stack, ``cu`` the address of ``cuLaunchKernel``, the GIL released),
``L(stream, [gx, gy, gz, shared,] *slots)`` -> CUresult, OverflowError or TypeError like
``struct``.  ``Entry``: a kernel's call entry (``entry``).  ``Reader``: torch tensors read
through DLPack's C exchange API (``reader``).

It is built once per Python version with the C compiler Python was built with (``cc``
otherwise) into ``$KDSL_CACHE_DIR/native`` (a temporary folder when ``KDSL_CACHE=0``), as
Triton builds its launchers.  No compiler, no headers, a failed build or
``KDSL_CUDA_NATIVE_LAUNCH=0``: ``module()`` is None (``error`` says why) and the fast
launchers launch through ctypes.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import threading

# subprocess, shutil, sysconfig and tempfile are imported where the helper is built: a process
# whose helper is already built (the usual case) does not pay ~5-10 ms to import them

_C_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_helper.c")
_NAME = "_kdsl_launch"
_lock = threading.Lock()
_module = None
#: why there is no helper (None: not tried yet, or built)
error: str | None = None
_tried = False
#: DLPack's device type of CUDA memory (dlpack.h ``kDLCUDA``)
KDL_CUDA = 2


def module():
    """The compiled helper module (built on first use), or None (``error`` says why)."""
    global _module, error, _tried
    if _tried:
        return _module
    with _lock:
        if not _tried:
            from kdsl import config
            if not config.cuda_native_launch():       # KDSL_CUDA_NATIVE_LAUNCH=0
                error = "KDSL_CUDA_NATIVE_LAUNCH is off"
            else:
                try:
                    _module = _load()
                except Exception as e:     # no compiler, no headers: the ctypes path stays
                    error = f"{type(e).__name__}: {e}"
            _tried = True
    return _module


def _directory() -> str:
    from kdsl import config
    if config.cache_enabled():
        d = os.path.join(config.cache_dir(), "native")
        try:
            os.makedirs(d, exist_ok=True)
            return d
        except OSError:
            pass
    import tempfile
    return tempfile.mkdtemp(prefix="kdsl_native_")


def _load():
    # (EXT_SUFFIX without importing sysconfig: the first suffix the import system accepts)
    suffix = (importlib.machinery.EXTENSION_SUFFIXES or [".so"])[0]
    with open(_C_FILE, encoding="utf-8") as f:
        text = f.read()
    key = hashlib.sha256((text + sys.version + suffix).encode()).hexdigest()[:16]
    d = _directory()
    path = os.path.join(d, f"{_NAME}_{key}{suffix}")
    if not os.path.exists(path):
        _build(path, d, text)
    loader = importlib.machinery.ExtensionFileLoader(_NAME, path)
    mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
        _NAME, path, loader=loader))
    loader.exec_module(mod)
    return mod


def _build(path: str, d: str, text: str) -> None:
    import subprocess
    import sysconfig
    import tempfile
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise FileNotFoundError(f"no Python.h in {include} (install the Python headers)")
    cc = _compiler()
    fd, src = tempfile.mkstemp(suffix=".c", dir=d)
    tmp = src[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-I", include, src, "-o", tmp],
                           capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise RuntimeError(f"{cc} failed: {(r.stderr or r.stdout).strip()[:500]}")
        os.replace(tmp, path)       # atomic: another process may build the same file
    finally:
        for p in (src, tmp):
            if os.path.exists(p):
                os.unlink(p)


def _compiler() -> str:
    """The C compiler Python was built with, if this machine has it, else ``cc`` or ``gcc``."""
    import shutil
    import sysconfig
    for name in (sysconfig.get_config_var("CC") or "").split()[:1] + ["cc", "gcc"]:
        if path := shutil.which(name):
            return path
    raise FileNotFoundError("no C compiler (cc, gcc) on PATH")


def cu_launch(raw):
    """(the helper module, the address of ``raw``: the driver's cuLaunchKernel), or None (no
    helper here, or a launch that is not a C function: a test's fake)."""
    mod = module() if isinstance(raw, ctypes._CFuncPtr) else None
    return None if mod is None else (mod, ctypes.cast(raw, ctypes.c_void_p).value)


def codes(fmt: str) -> bytes:
    """The slot codes of a ``struct`` format of 8-byte slots (``"<QQf4xq"`` -> ``b"QQfq"``)."""
    return bytes(c for c in fmt.encode() if chr(c) not in "<>=!@x0123456789")


def entry(kernel):
    """The helper's ``Entry`` for ``kernel`` (Kernel._call's fast-launcher step in C), or None
    (no helper, or an environment it cannot read directly)."""
    mod = module()
    from kdsl.backends import registry as reg
    get, key = reg.env_backend_reader()
    env = getattr(get, "__self__", None)
    if mod is None or type(env) is not dict:    # os.environ's storage not a dict: Python decides
        return None
    return mod.Entry(kernel._call, kernel.__dict__, vars(reg), reg.current_backend_var(), env, key)


def reads_torch() -> bool:
    """Can the helper's ``Reader`` read torch tensors (torch exports DLPack's C exchange API,
    torch >= 2.10; ``KDSL_CUDA_DLPACK_READER=0`` keeps the attribute reads)?"""
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is None:
        return False
    from kdsl import config
    return config.cuda_dlpack_reader() and getattr(module(), "Reader", None) is not None


def dl_spec(spec) -> tuple:
    """``(code, bits, lanes, ndim, contiguous)`` of a torch plan's array spec (dlpack.h's codes:
    kDLBool 6, kDLBfloat 4, kDLFloat 2, kDLInt 0, kDLUInt 1; another one only declines)."""
    d, torch = spec.dtype, sys.modules["torch"]
    code = (6 if d is torch.bool else 4 if d is torch.bfloat16 else 2 if d.is_floating_point
            else 0 if d.is_signed else 1)
    return code, 8 * d.itemsize, 1, len(spec.dims), bool(spec.contiguous)


def reader(specs, ordinal: int):
    """The ``Reader`` of torch tensors of these array specs on GPU ``ordinal``: its call returns
    ``(stream, pointer, sizes..., pointer, sizes...)``, or None (a check failed)."""
    torch = sys.modules["torch"]
    return module().Reader(torch.Tensor.__dlpack_c_exchange_api__, torch.Tensor, KDL_CUDA,
                           ordinal, tuple(dl_spec(s) for s in specs), True)
