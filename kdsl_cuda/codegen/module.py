"""A GPU-form ``LoweredFunc`` (root workspace Allocates around ``DeviceKernel``s) -> one CUDA
C++ translation unit: the prelude (the helpers the kernels call), then one ``extern "C"
__global__`` function per kernel."""
from __future__ import annotations

from dataclasses import dataclass

from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.visitor import allocate_chain

from .kernel import KernelPrinter, KernelSource, kernel_params
from .prelude import prelude_for
from .wgmma import SWIZZLE_HELPERS


@dataclass(frozen=True)
class CudaModule:
    """Generated CUDA: ``source`` (the text NVRTC compiles) and ``kernels`` (KernelSource:
    name, params, launch), in launch order; ``workspaces`` the global temporaries a call
    allocates (the root Allocates)."""

    source: str
    kernels: tuple
    workspaces: tuple
    #: the source needs the sm_90a target (Hopper's wgmma): ``kdsl_cuda.build.target_arch``
    sm90a: bool = False


def host_kernels(func: n.LoweredFunc) -> tuple:
    """The DeviceKernels of the host program, refusing any other host-level statement."""
    _, inner = allocate_chain(func.body)
    stmts = inner.stmts if type(inner) is n.Seq else (inner,)
    for s in stmts:
        if type(s) is not n.DeviceKernel:
            raise InternalCompilerError(
                f"cuda codegen: {type(s).__name__} at host level of {func.name} (the GPU table "
                "leaves only device kernels inside the workspace allocations)")
    return stmts


def generate(func: n.LoweredFunc) -> CudaModule:
    """CUDA C++ for ``func`` (the output of ``kdsl.gpu.pipeline.PIPELINE``); pure."""
    kernels = []
    for k in host_kernels(func):
        kp = KernelPrinter(func, k)
        params = kernel_params(func, k, kp.names)
        kernels.append(kp.print(params))
    helpers = {}
    for ks in kernels:
        helpers.update(ks.helpers)
    sm90a = any(ks.sm90a for ks in kernels)
    extra = (SWIZZLE_HELPERS if sm90a else "") + "".join(helpers.values())
    body = extra + "\n" + "\n\n".join(ks.text for ks in kernels) + "\n"
    text = prelude_for(body) + body            # only the helpers the kernels call
    return CudaModule(text, tuple(kernels), func.workspaces, sm90a)


__all__ = ["CudaModule", "KernelSource", "generate", "host_kernels"]
