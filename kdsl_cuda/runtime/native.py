"""An optional compiled helper for the fast launchers: one C call packs a kernel's parameters and
calls ``cuLaunchKernel``.

Through ctypes a launch costs a ``struct`` pack into a shared buffer, a lock around it (threads
share the buffer) and ctypes' per-argument conversion: ~1.5 us of Python per launch on the
session-13 H100 host, above the driver's own cost.  ``Launcher(cu, codes, fn, bx, by, bz,
grid)`` does it in C for one kernel, its constants bound once: called ``L(stream, *slots)``
when ``grid`` is ``(gx, gy, gz, shared)``, ``L(stream, gx, gy, gz, shared, *slots)`` when it is
None (a vectorcall object: a launch passes only what changes per call).  Each slot value is
converted by its code (the first letter of its ``kdsl.runtime.slots.SLOT`` format: ``Q``
pointer, ``q`` int64, ``d`` float64, ``f`` float32, ``e`` float16, ``i``/``h``/``b`` signed,
``I``/``H``/``B`` unsigned, ``?`` bool) into 8-byte slots on the C stack (no lock), the GIL
released around the driver call (``cu``: the address of ``cuLaunchKernel``); it returns the
CUresult, and raises OverflowError (a value its slot cannot hold) or TypeError like ``struct``.

The helper is built once per Python version with the C compiler Python was built with (``cc``
otherwise) and Python's headers, into ``$KDSL_CACHE_DIR/native`` (a temporary folder when
``KDSL_CACHE=0``), as Triton builds its launchers.  No compiler, no headers, a failed build or
``KDSL_CUDA_NATIVE_LAUNCH=0``: ``module()`` is None (``error`` says why) and the fast launchers
keep the ctypes path.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import threading

# subprocess, shutil, sysconfig and tempfile are imported where the helper is built: a process
# whose helper is already built (the usual case) does not pay ~5-10 ms to import them

#: the helper's C source, beside this module
_C_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_helper.c")
_NAME = "_kdsl_launch"
_lock = threading.Lock()
_module = None
#: why there is no helper (None: not tried yet, or built)
error: str | None = None
_tried = False


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
    spec = importlib.util.spec_from_file_location(_NAME, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
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
            try:
                os.unlink(p)
            except OSError:
                pass


def _compiler() -> str:
    """The C compiler Python was built with, if this machine has it, else ``cc`` or ``gcc``."""
    import shutil
    import sysconfig
    names = [(sysconfig.get_config_var("CC") or "").split()[:1], ["cc"], ["gcc"]]
    for name in (n[0] for n in names if n):
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError("no C compiler (cc, gcc) on PATH")


def entry(kernel):
    """A C call entry for ``kernel`` (``Entry`` in launch_helper.c: Kernel._call's fast-launcher step in
    C, for packed launchers), or None (no helper, or an environment it cannot read directly)."""
    mod = module()
    if mod is None:
        return None
    from kdsl.backends import registry as reg
    get, key = reg.env_backend_reader()
    env = getattr(get, "__self__", None)
    if type(env) is not dict:       # os.environ's storage is not a dict here: Python decides
        return None
    return mod.Entry(kernel._call, kernel.__dict__, vars(reg), reg.current_backend_var(), env, key)


def codes(fmt: str) -> bytes:
    """The slot codes of a ``struct`` format of 8-byte slots (``"<QQf4xq"`` -> ``b"QQfq"``)."""
    return bytes(c for c in fmt.encode() if chr(c) not in "<>=!@x0123456789")
