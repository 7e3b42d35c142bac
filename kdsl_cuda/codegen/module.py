"""A GPU-form ``LoweredFunc`` (root workspace Allocates around ``DeviceKernel``s) -> one CUDA
C++ translation unit: the prelude (the helpers the kernels call), then one ``extern "C"
__global__`` function per kernel."""
from __future__ import annotations

from dataclasses import dataclass

from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.visitor import allocate_chain, collect_stmts

from .kernel import KernelPrinter, KernelSource, kernel_params
from .prelude import prelude_for


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


#: the line that marks a memory-bound module: ``kdsl_cuda.build`` compiles it with NVRTC's
#: ``--Ofast-compile=min`` under ``KDSL_CUDA_FAST_COMPILE=auto`` (the default)
LIGHT_MARK = "// kdsl: memory-bound module (no tensor cores, small register arrays)\n"

#: per-thread register-array elements (LOCAL buffers of one kernel, summed) up to which a
#: kernel counts as memory-bound: row reductions' rfactor slots and vector temporaries stay
#: under it; register tiles (a GEMM's or a stencil's micro-tile) exceed it
LIGHT_LOCAL_ELEMENTS = 32


def is_light(kernel: n.DeviceKernel) -> bool:
    """Whether ``kernel`` is memory-bound in the sense NVRTC's fast compile costs it nothing:
    no tensor-core or block intrinsic statements, and at most ``LIGHT_LOCAL_ELEMENTS`` register
    array elements.  Measured (docs/cuda.md): softmax, layernorm, gelu chains, cumsum and
    transposes ran at 0.99-1.01x their fully optimised time with ``--Ofast-compile=min``,
    while a register-tiled stencil lost its vector loads in the PTX."""
    heavy = n.WMMA_STMTS + (n.Intrinsic,)
    local = 0
    for s in collect_stmts(kernel.body, lambda x: type(x) in heavy or type(x) is n.Allocate):
        if type(s) is not n.Allocate:
            return False
        if s.buffer.scope is n.Scope.LOCAL:
            size = 1
            for e in s.buffer.shape:
                if type(e) is not n.Const:
                    return False
                size *= e.value
            local += size
    return local <= LIGHT_LOCAL_ELEMENTS


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
    light = True
    for k in host_kernels(func):
        light = light and is_light(k)
        kp = KernelPrinter(func, k)
        params = kernel_params(func, k, kp.names)
        kernels.append(kp.print(params))
    helpers = {}
    for ks in kernels:
        helpers.update(ks.helpers)
    sm90a = any(ks.sm90a for ks in kernels)
    extra = "".join(helpers.values())
    if sm90a:
        from .wgmma import SWIZZLE_HELPERS      # (tensor-core code generators: imported when used)
        extra = SWIZZLE_HELPERS + extra
    body = extra + "\n" + "\n\n".join(ks.text for ks in kernels) + "\n"
    text = prelude_for(body) + body            # only the helpers the kernels call
    if light:       # (wgmma modules hold WMMA_STMTS: never light)
        text = LIGHT_MARK + text
    return CudaModule(text, tuple(kernels), func.workspaces, sm90a)


__all__ = ["LIGHT_MARK", "CudaModule", "KernelSource", "generate", "host_kernels", "is_light"]
