"""Early-key entries of the cuda backend: a warm process launches without lowering (issue 26.4).

``CUDABackend.compile`` keys a request before lowering (kdsl.runtime.fingerprint: graph,
schedule, signature, the device's architecture, NVRTC's version, kdsl_cuda's source).  The entry
it stores holds what ``CudaCompiled`` needs and nothing more: the lowered function's interface
(parameters, scalar slots and their bindings, the root workspaces; the loop body is dropped),
the kernels' names, parameters and launch expressions (their CUDA text dropped), the module's
source (to compile for another architecture) and the cubin for the device's.  It is a pickle:
the IR's dataclasses and the identity of the Vars its expressions share survive as they are.
A payload that does not unpickle into that shape is a miss (the entry is rebuilt).  (The cache
directory is the user's own and its entries are checksummed; what it holds runs on the device
anyway, so unpickling it trusts nothing more than loading its cubin does.)
"""
from __future__ import annotations

import dataclasses
import functools
import os
import pickle
import sys

from kdsl.ir import nodes as n

#: KDSLCUE2: the module and kernels are EarlyModule/EarlyKernel (unpickling them imports
#: nothing of the code generator)
MAGIC = b"KDSLCUE2"


@dataclasses.dataclass(frozen=True)
class EarlyParam:
    """codegen.kernel.Param as an entry keeps it: a buffer (``buffer`` set) or a scalar Var."""

    name: str
    ctype: str
    buffer: n.Buffer | None = None
    var: n.Var | None = None


@dataclasses.dataclass(frozen=True)
class EarlyKernel:
    """What the launcher reads of a generated kernel (codegen.kernel.KernelSource without its
    text): its ``extern "C"`` name, parameters and launch."""

    name: str
    params: tuple
    launch: n.Launch
    text: str = ""
    helpers: tuple = ()
    sm90a: bool = False


@dataclasses.dataclass(frozen=True)
class EarlyModule:
    """codegen.module.CudaModule as an entry keeps it: the source (to build for another
    architecture), the kernels' interfaces, the root workspaces."""

    source: str
    kernels: tuple
    workspaces: tuple
    sm90a: bool = False


@functools.lru_cache(maxsize=1)
def nvrtc_identity() -> str:
    """Which NVRTC builds this process's cubins, for early keys, without loading it (~50 ms:
    cuda.bindings' NVRTC module, cuda.pathfinder, the library): the installed NVRTC and
    cuda-bindings wheels (their dist-info names carry the versions) and the variables that
    steer cuda.pathfinder, which takes a wheel's library first.  Without an NVRTC wheel on
    ``sys.path``: the version NVRTC reports (loading it)."""
    wheels = []
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except (OSError, TypeError):
            continue
        for name in names:
            low = name.lower().replace("-", "_")
            if low.endswith(".dist_info") and low.startswith(("nvidia_cuda_nvrtc",
                                                              "cuda_bindings")):
                wheels.append(name)     # the name only: one install seen by two paths is one
    if not any("nvrtc" in w.lower() for w in wheels):
        from ..build import nvrtc_version
        return f"nvrtc {nvrtc_version()}"
    env = [os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX",
                                           "LD_LIBRARY_PATH")]
    return repr((sorted(set(wheels)), env))


def interface(func: n.LoweredFunc) -> n.LoweredFunc:
    """``func`` without its loop body: the workspaces' Allocate chain around an empty Seq."""
    body: n.Stmt = n.Seq(())
    for w in reversed(func.workspaces):
        body = n.Allocate(w, body)
    return dataclasses.replace(func, body=body, attrs={}, tensorize=())


def pack(func, module, arch: str, cubin: bytes) -> bytes:
    """The payload of an early entry for ``func``/``module`` with ``cubin`` built for ``arch``."""
    kernels = tuple(EarlyKernel(k.name, tuple(EarlyParam(p.name, p.ctype, p.buffer, p.var)
                                              for p in k.params), k.launch, sm90a=k.sm90a)
                    for k in module.kernels)
    mod = EarlyModule(module.source, kernels, module.workspaces, module.sm90a)
    return MAGIC + pickle.dumps({"func": interface(func), "module": mod, "arch": arch,
                                 "cubin": bytes(cubin)}, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(blob: bytes):
    """``(func, module, arch, cubin)`` of an early entry's payload, or None if it is not one."""
    if not blob.startswith(MAGIC):
        return None
    try:
        d = pickle.loads(blob[len(MAGIC):])
        func, mod, arch, cubin = d["func"], d["module"], d["arch"], d["cubin"]
    except Exception:       # another version's classes, a truncated pickle: a miss
        return None
    if not (isinstance(func, n.LoweredFunc) and isinstance(arch, str)
            and isinstance(cubin, bytes) and type(mod) is EarlyModule
            and all(type(k) is EarlyKernel and all(type(p) is EarlyParam for p in k.params)
                    for k in mod.kernels)):
        return None
    return func, mod, arch, cubin
