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
import pickle

from kdsl.ir import nodes as n

MAGIC = b"KDSLCUE1"


def interface(func: n.LoweredFunc) -> n.LoweredFunc:
    """``func`` without its loop body: the workspaces' Allocate chain around an empty Seq."""
    body: n.Stmt = n.Seq(())
    for w in reversed(func.workspaces):
        body = n.Allocate(w, body)
    return dataclasses.replace(func, body=body, attrs={}, tensorize=())


def pack(func, module, arch: str, cubin: bytes) -> bytes:
    """The payload of an early entry for ``func``/``module`` with ``cubin`` built for ``arch``."""
    kernels = tuple(dataclasses.replace(k, text="", helpers=()) for k in module.kernels)
    mod = dataclasses.replace(module, kernels=kernels)
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
            and isinstance(cubin, bytes) and hasattr(mod, "kernels") and hasattr(mod, "source")):
        return None
    return func, mod, arch, cubin
