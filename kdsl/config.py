"""Every ``KDSL_*`` environment variable, read in one place (DESIGN principle 10).

Values are read on demand (``config()`` builds a fresh frozen snapshot each
time), so tests and users may change the environment between calls.  Code
that sits on a hot path reads a snapshot once and keeps it.

| variable           | meaning                                   | default           |
|--------------------|-------------------------------------------|-------------------|
| KDSL_BACKEND       | default backend name                      | unset (automatic) |
| KDSL_DUMP          | print IR and source as kernels compile;   | off               |
|                    | ``passes``: also the state after each pass |                   |
| KDSL_VERIFY        | verify the IR after every lowering pass   | on under pytest   |
| KDSL_CACHE         | ``0`` disables the on-disk cache          | on                |
| KDSL_CACHE_DIR     | on-disk cache directory                   | $XDG_CACHE_HOME/kdsl, |
|                    |                                           | else ~/.cache/kdsl |
| KDSL_NUM_THREADS   | CPU worker threads per parallel loop      | OMP_NUM_THREADS,  |
|                    | (an invalid value is an error)            | else usable cores [1]_ |
| KDSL_CUDA_TENSOR_CORES | ``0``: default cuda schedules of      | on [2]_           |
|                    | 16-bit matmuls keep to CUDA cores         |                   |
| KDSL_CUDA_WGMMA    | ``0``: on sm_90 GPUs, default 16-bit      | on [2]_           |
|                    | matmuls use mma.sync, not Hopper's wgmma  |                   |
| KDSL_CUDA_NATIVE_LAUNCH | ``0``: cuda fast launchers launch     | on [3]_           |
|                    | through ctypes, not the compiled helper   |                   |
| KDSL_AUTOTUNE      | ``1``: a kernel with no tuned winner for   | off               |
|                    | a call's key is tuned (``kernel.tune``,    |                   |
|                    | small budget) before it first compiles [4]_ |                  |
| KDSL_CUDA_DLPACK_READER | ``0``: cuda fast launchers read torch | on [3]_           |
|                    | tensors' attributes, not DLPack's C API   |                   |
| KDSL_CUDA_FAST_COMPILE | ``min``/``mid``/``max``: NVRTC's      | auto [5]_         |
|                    | ``--Ofast-compile`` level for every module|                   |
|                    | (``0``: none; invalid values are errors)  |                   |
| KDSL_NVRTC_LIBRARY | the ``libnvrtc`` file to load             | searched [6]_     |
| KDSL_NVRTC_BINDINGS | ``1``: NVRTC through ``cuda.bindings``   | off (ctypes)      |

.. [1] the CPUs this process may run on (``os.sched_getaffinity``, so ``taskset``,
   cpusets and a parent's ``sched_setaffinity`` are honoured), else ``os.cpu_count()``.
   Read when a kernel compiles and by ``kd.get_num_threads()``, and applied at every call of
   every compiled kernel (kdsl.threads; ``kd.set_num_threads`` overrides it).  Parallel loops with little work use fewer threads
   (each thread gets at least ``kdsl_cpu.codegen.stmt.PARALLEL_MIN_WORK`` iterations), and
   idle OpenMP workers sleep instead of spinning unless ``OMP_WAIT_POLICY`` or
   ``GOMP_SPINCOUNT`` is set (``kdsl_cpu.parallel``).
.. [2] read when a kernel is scheduled.  Explicit schedules (``tensorize`` with
   ``kd.intrin.wmma``, the hint ``tensor_cores=True``) use tensor cores either way.
.. [3] read once per process, when the first fast launcher is built
   (``kdsl_cuda.runtime.native``: the helper is compiled with the system C compiler).
.. [4] read when a specialisation compiles (kdsl/tune, docs/tuning.md); winners of
   ``kernel.tune`` are used whether it is set or not.
.. [5] read at each NVRTC compile and part of the cubin cache's key (``kdsl_cuda.build.options``).
   ``auto``: ``min`` (less NVVM/ptxas optimisation, a faster first compile) for the modules the
   codegen marks memory-bound, full optimisation for tensor-core and register-tiled ones
   (docs/cuda.md has the measurements).
.. [6] the nvidia wheels on ``sys.path``, ``$CONDA_PREFIX``, the system loader, ``$CUDA_PATH`` /
   ``$CUDA_HOME`` (``kdsl_cuda.nvrtc``); read once per process.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

_FALSE = {"", "0", "false", "no", "off"}


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() not in _FALSE


@dataclass(frozen=True)
class Config:
    """A snapshot of kdsl's environment configuration."""

    backend: str | None
    dump: bool
    cache: bool
    cache_dir: str
    num_threads: int
    verify: bool = False
    dump_passes: bool = False


def backend() -> str | None:
    """``KDSL_BACKEND``: the default backend name, or None when unset/empty."""
    v = os.environ.get("KDSL_BACKEND", "").strip()
    return v or None


def dump() -> bool:
    """``KDSL_DUMP``: print lowered IR and backend source as kernels compile."""
    return _flag(os.environ.get("KDSL_DUMP"), False)


def dump_passes() -> bool:
    """``KDSL_DUMP=passes``: print the lowering state after every pass of the pipeline."""
    return os.environ.get("KDSL_DUMP", "").strip().lower() == "passes"


def verify_explicit() -> bool:
    """``KDSL_VERIFY`` set to a true value explicitly (not the pytest default of ``verify``):
    cache hits found before tracing or scheduling are checked against a fresh trace/compile."""
    v = os.environ.get("KDSL_VERIFY")
    return v is not None and _flag(v, False)


def verify() -> bool:
    """``KDSL_VERIFY``: check the IR's invariants after every lowering pass; when unset,
    on under pytest (``pytest`` imported) and off otherwise."""
    v = os.environ.get("KDSL_VERIFY")
    if v is None:
        return "pytest" in sys.modules
    return _flag(v, False)


def cache_enabled() -> bool:
    """``KDSL_CACHE``: the on-disk cache is on unless this is 0/false/off."""
    return _flag(os.environ.get("KDSL_CACHE"), True)


def cache_dir() -> str:
    """``KDSL_CACHE_DIR``: where the on-disk cache lives; default ``$XDG_CACHE_HOME/kdsl`` where
    ``XDG_CACHE_HOME`` is set to an absolute path (the XDG spec ignores relative ones), else
    ``~/.cache/kdsl``."""
    v = os.environ.get("KDSL_CACHE_DIR", "").strip()
    if not v:
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        base = xdg if xdg and os.path.isabs(xdg) else os.path.join("~", ".cache")
        v = os.path.join(base, "kdsl")
    return os.path.abspath(os.path.expanduser(v))


def usable_cores() -> int:
    """How many CPUs this process may run on: its affinity mask where the OS has one
    (``taskset``, cpusets, containers pinned to cores), else ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):   # macOS, Windows: no affinity API
        return os.cpu_count() or 1


def _thread_var(name: str) -> int | None:
    """A thread-count variable's value (None when unset or empty); invalid values raise
    kdsl.threads.ThreadCountError naming the variable.  ``OMP_NUM_THREADS`` may be a list
    (``"4,2"``: one count per nesting level); kdsl's loops are the outer level."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    v = raw.split(",")[0].strip() if name == "OMP_NUM_THREADS" else raw
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n >= 1:
        return n
    from .errors import ThreadCountError
    raise ThreadCountError(
        f"{name}={raw!r} is not a thread count",
        hint=f"set {name} to a positive integer such as {usable_cores()} (or unset it to use "
        f"the CPUs this process may run on)")


def num_threads() -> int:
    """The environment's CPU thread count: ``KDSL_NUM_THREADS``, else ``OMP_NUM_THREADS``, else
    ``usable_cores()``.  Invalid values (0, -1, "abc") raise ThreadCountError naming the
    variable.  ``kd.set_num_threads`` overrides all of them (kdsl.threads.resolve)."""
    for name in ("KDSL_NUM_THREADS", "OMP_NUM_THREADS"):
        n = _thread_var(name)
        if n is not None:
            return n
    return usable_cores()


def cuda_tensor_cores() -> bool:
    """``KDSL_CUDA_TENSOR_CORES``: whether default cuda schedules put 16-bit matrix products
    on tensor cores (on; ``0`` keeps them on CUDA cores)."""
    return _flag(os.environ.get("KDSL_CUDA_TENSOR_CORES"), True)


def cuda_wgmma() -> bool:
    """``KDSL_CUDA_WGMMA``: whether default cuda schedules of 16-bit matrix products on sm_90
    GPUs use Hopper's ``wgmma`` (on; ``0`` keeps them on ``mma.sync`` tensor-core code)."""
    return _flag(os.environ.get("KDSL_CUDA_WGMMA"), True)


def cuda_native_launch() -> bool:
    """``KDSL_CUDA_NATIVE_LAUNCH``: whether cuda fast launchers launch through the compiled
    helper (on; ``0`` keeps them on ctypes)."""
    return _flag(os.environ.get("KDSL_CUDA_NATIVE_LAUNCH"), True)


def cuda_dlpack_reader() -> bool:
    """``KDSL_CUDA_DLPACK_READER``: whether cuda fast launchers read torch tensors through
    DLPack's C exchange API in the compiled helper (on; ``0`` keeps the attribute reads)."""
    return _flag(os.environ.get("KDSL_CUDA_DLPACK_READER"), True)


def autotune() -> bool:
    """``KDSL_AUTOTUNE``: tune a kernel (small budget) when a specialisation with no persisted
    winner first compiles (off; kdsl/tune)."""
    return _flag(os.environ.get("KDSL_AUTOTUNE"), False)
#: the levels NVRTC's ``--Ofast-compile`` takes (``0``: off)
FAST_COMPILE_LEVELS = ("min", "mid", "max")


def cuda_fast_compile() -> str | None:
    """``KDSL_CUDA_FAST_COMPILE``: NVRTC's ``--Ofast-compile`` level for every module (``min``,
    ``mid``, ``max``), ``"auto"`` (unset or empty: ``min`` for the modules the cuda codegen marks
    memory-bound -- no tensor cores, small register arrays -- full optimisation for the rest), or
    None (``0``/``off``: never); ValueError naming the variable otherwise (docs/cuda.md)."""
    v = os.environ.get("KDSL_CUDA_FAST_COMPILE", "").strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v in _FALSE:
        return None
    if v not in FAST_COMPILE_LEVELS:
        raise ValueError(f"KDSL_CUDA_FAST_COMPILE={v!r}: use one of {', '.join(FAST_COMPILE_LEVELS)} "
                         "(NVRTC's --Ofast-compile levels), auto (the default) or 0 to turn it off")
    return v


def nvrtc_library() -> str | None:
    """``KDSL_NVRTC_LIBRARY``: the ``libnvrtc`` file the cuda backend loads, or None (searched)."""
    return os.environ.get("KDSL_NVRTC_LIBRARY", "").strip() or None


def nvrtc_bindings() -> bool:
    """``KDSL_NVRTC_BINDINGS``: call NVRTC through ``cuda.bindings`` instead of ctypes (off)."""
    return _flag(os.environ.get("KDSL_NVRTC_BINDINGS"), False)


def config() -> Config:
    """Read every variable now and return a frozen snapshot."""
    return Config(backend(), dump(), cache_enabled(), cache_dir(), num_threads(), verify(), dump_passes())
