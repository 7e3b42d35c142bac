"""NVRTC -> cubin through ``kdsl_cuda.nvrtc`` (``libnvrtc`` from the pip wheels through ctypes,
else ``cuda.bindings``; no system CUDA, no headers: the generated source includes nothing).
Works without a GPU: the architecture is explicit (``sm_90`` when there is no device).  A
rejected source raises ``BackendCompileError`` with NVRTC's log, the path of the dumped source
and the options (a repro)."""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile

from kdsl import config
from kdsl.errors import BackendCompileError, BackendUnavailable

#: the architecture compiled for when no device says otherwise
DEFAULT_ARCH = "sm_90"

#: the temp folder's subfolder rejected sources are written to (not an identifier, so that
#: it can never be imported in place of the package by a script run from the temp folder)
DUMP_FOLDER = "kdsl-cuda-sources"


def options(arch: str = DEFAULT_ARCH, name: str = "kdsl_kernel.cu") -> dict:
    """The ProgramOptions keywords used for every module (part of the cache keys).

    ``minimal``: NVRTC (12.4+) skips its implicit device-runtime declarations (textures,
    surfaces, ``cudaDevice*``), which generated modules never use: ~20 ms less front end a
    module, the same cubin byte for byte.  Dropped where NVRTC is older (``_nvrtc_options``).
    ``ofast_compile``: ``$KDSL_CUDA_FAST_COMPILE`` (NVRTC 12.8+'s ``--Ofast-compile``: less
    NVVM/ptxas optimisation).  ``"auto"`` (the default) resolves per module
    (``for_source``): ``min`` for memory-bound modules (``codegen.module.LIGHT_MARK``), where
    kernel timings showed it costs nothing, none for the rest (docs/cuda.md)."""
    opts = {"arch": arch, "std": "c++17", "name": name, "minimal": True}
    fast = config.cuda_fast_compile()
    if fast:
        opts["ofast_compile"] = fast
    return opts


def for_source(opts: dict, source: str) -> dict:
    """``opts`` with an ``"auto"`` fast-compile level resolved for ``source``: ``min`` where the
    codegen marked the module memory-bound, else no ``--Ofast-compile``."""
    if opts.get("ofast_compile") != "auto":
        return opts
    from .codegen.module import LIGHT_MARK
    if source.startswith(LIGHT_MARK):
        return {**opts, "ofast_compile": "min"}
    return {k: v for k, v in opts.items() if k != "ofast_compile"}


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> str:
    """NVRTC's version (part of the cubin cache's key; "unknown" when it cannot be asked)."""
    try:
        major, minor = _nvrtc().version()
        return f"{major}.{minor}"
    except Exception:
        return "unknown"


def _nvrtc_options(opts: dict) -> dict:
    """``opts`` as this NVRTC takes them: without ``minimal`` before 12.4 (same cubin)."""
    try:
        major, minor = (int(x) for x in nvrtc_version().split(".")[:2])
    except ValueError:              # "unknown": ask nothing of it
        major, minor = 0, 0
    if opts.get("minimal") and (major, minor) < (12, 4):
        opts = {k: v for k, v in opts.items() if k != "minimal"}
    if opts.get("ofast_compile") and (major, minor) < (12, 8):
        opts = {k: v for k, v in opts.items() if k != "ofast_compile"}
    return opts


def target_arch(source: str, arch: str) -> str:
    """The architecture ``source`` is compiled for on an ``arch`` device: ``sm_90a`` for code
    that uses Hopper's ``wgmma`` (``kd.intrin.wgmma``; the codegen marks it) on an sm_90
    device, else ``arch``; BackendCompileError where such code meets another GPU."""
    from .codegen.types import SM90A_MARK
    if SM90A_MARK not in source:
        return arch
    if arch in ("sm_90", "sm_90a"):
        return "sm_90a"
    raise BackendCompileError(
        f"this kernel multiplies on Hopper's tensor cores (wgmma: kd.intrin.wgmma, or the default "
        f"16-bit matmul schedule chosen for an sm_90 GPU), which the {arch} GPU it is compiled for "
        "lacks; on other GPUs use kd.intrin.wmma(16, 16, 16) (tensor_cores=True chooses by device)")


def _nvrtc():
    """The NVRTC library (``kdsl_cuda.nvrtc.library()``: ``libnvrtc`` through ctypes, a few ms
    to find and load, else ``cuda.bindings.nvrtc``, ~50-80 ms to import)."""
    from . import nvrtc
    try:
        return nvrtc.library()
    except ImportError as e:        # no libnvrtc found and no cuda-bindings wheel
        raise BackendUnavailable(
            f"the cuda backend needs NVRTC: no libnvrtc was found ({', '.join(nvrtc.SONAMES)} in "
            f"the nvidia wheels, $CONDA_PREFIX, the system library path, $CUDA_PATH or "
            f"$CUDA_HOME; $KDSL_NVRTC_LIBRARY names one) and cuda.bindings is missing ({e}); install "
            "it with pip install cuda-bindings cuda-pathfinder nvidia-cuda-nvrtc") from e


def nvrtc_args(opts: dict) -> list:
    """NVRTC's command line for ``options()``' keywords (what cuda.core's ProgramOptions
    gives NVRTC for them: ``-arch=``, ``--std=``, ``--minimal``, ``--Ofast-compile=``)."""
    args = [f"-arch={opts['arch']}".encode(), f"--std={opts['std']}".encode()]
    if opts.get("minimal"):
        args.append(b"--minimal")
    if opts.get("ofast_compile") not in (None, "auto"):    # "auto": resolved by for_source
        args.append(f"--Ofast-compile={opts['ofast_compile']}".encode())
    return args


def dump_source(source: str, name: str) -> str:
    """Write ``source`` where a user can find it (``$KDSL_CUDA_DUMP_DIR`` or the temp folder's
    ``kdsl-cuda-sources``: a name no import can resolve -- a folder ``kdsl_cuda`` in /tmp
    shadowed the package for scripts run from /tmp)."""
    folder = os.environ.get("KDSL_CUDA_DUMP_DIR") or os.path.join(tempfile.gettempdir(),
                                                                   DUMP_FOLDER)
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = os.path.join(folder, f"{os.path.splitext(name)[0]}-{digest}.cu")
    with open(path, "w") as f:
        f.write(source)
    return path


def compile_cubin(source: str, arch: str = DEFAULT_ARCH, name: str = "kdsl_kernel.cu") -> bytes:
    """The cubin of ``source`` for ``arch``; BackendCompileError (log, dumped source, options)
    when NVRTC rejects it."""
    nvrtc = _nvrtc()
    arch = target_arch(source, arch)
    opts = _nvrtc_options(for_source(options(arch, name), source))
    cubin, log = _try_compile(nvrtc, source, opts)
    if cubin is None and opts.get("minimal"):    # something -minimal leaves out: full front end
        opts = {k: v for k, v in opts.items() if k != "minimal"}
        cubin, log = _try_compile(nvrtc, source, opts)
    if cubin is None:
        path = dump_source(source, name)
        args = ", ".join(f"{k}={v!r}" for k, v in opts.items())
        repro = (f"python3 -c \"from cuda.core import Program, ProgramOptions; "
                 f"Program(open({path!r}).read(), code_type='c++', "
                 f"options=ProgramOptions({args})).compile('cubin')\"")
        raise BackendCompileError(f"NVRTC rejected the generated CUDA for {name} "
                                  f"(options: {args})", log=log, source_path=path,
                                  repro=repro) from None
    if cubin[:4] != b"\x7fELF":
        raise BackendCompileError(f"NVRTC produced no cubin for {name}")
    return cubin


def _try_compile(nvrtc, source: str, opts: dict, output: str = "cubin"):
    """``(code, None)`` of one NVRTC compile, or ``(None, NVRTC's log)`` when it rejects the
    source (the program is destroyed either way)."""
    try:
        return nvrtc.compile(source.encode(), opts["name"].encode(), nvrtc_args(opts), output)
    except RuntimeError as e:       # no program could be made (out of memory, a broken library)
        raise BackendCompileError(f"NVRTC could not compile {opts['name']} ({e})") from None


def compile_ptx(source: str, arch: str = DEFAULT_ARCH, name: str = "kdsl_kernel.cu") -> str:
    """The PTX of ``source`` (for reading and tests: do the shuffles, ``cp.async`` and 16-byte
    loads appear?), with the options of ``compile_cubin``; BackendCompileError with the log
    on rejection."""
    nvrtc = _nvrtc()
    arch = target_arch(source, arch)
    opts = _nvrtc_options(for_source(options(arch, name), source))
    ptx, log = _try_compile(nvrtc, source, opts, "ptx")
    if ptx is None:
        raise BackendCompileError(f"NVRTC rejected {name} (PTX, {arch})", log=log,
                                  source_path=dump_source(source, name))
    return ptx.rstrip(b"\0").decode()
