"""The ``cuda`` Backend object (kdsl/backends/protocol.py): lower, source, compile.

``lower`` runs the core GPU table (``kdsl.passes.pipeline.PIPELINE``: device kernels with
launches); ``source`` prints it as CUDA C++ (``kdsl_cuda.codegen``); ``build`` compiles that to
a cubin with NVRTC (``kdsl_cuda.build``, no GPU needed).  Executing kernels (loading cubins,
launching, device arrays) is not implemented yet: ``compile`` says so.  Kernels without a
cuda schedule get the defaults of ``kdsl_cuda.schedules``.
"""
from __future__ import annotations

from kdsl.backends.protocol import CompileRequest
from kdsl.errors import BackendUnavailable
from kdsl.passes.pipeline import PIPELINE

from . import build
from .codegen import CudaModule, generate


class CUDABackend:
    """Generates CUDA C++ from the GPU loop IR and compiles it to cubins with NVRTC."""

    name = "cuda"
    device = "cuda"

    def __init__(self, arch: str | None = None):
        self.arch = arch or build.DEFAULT_ARCH

    # ------------------------------------------------------------- protocol
    def schedule(self, sched, hints) -> None:
        """The default cuda schedules (``kdsl_cuda.schedules``: blocks and threads by stage
        kind and size), adjusted by the user's declarative ``hints``."""
        from .schedules import schedule
        schedule(sched, hints)

    def lower(self, request: CompileRequest):
        """The GPU-form loop IR of ``request`` (the core GPU table)."""
        return request.lower(pipeline=PIPELINE)

    def generate(self, request: CompileRequest) -> CudaModule:
        return generate(self.lower(request))

    def source(self, request: CompileRequest) -> str:
        """The CUDA C++ of the request (what NVRTC compiles)."""
        return self.generate(request).source

    def build(self, request: CompileRequest) -> bytes:
        """The cubin of the request for ``self.arch`` (NVRTC; no device needed)."""
        mod = self.generate(request)
        name = (mod.kernels[0].name if mod.kernels else "kdsl") + ".cu"
        return build.compile_cubin(mod.source, self.arch, name)

    def compile(self, request: CompileRequest):
        raise BackendUnavailable(
            "the cuda backend generates and NVRTC-compiles CUDA (kernel.source(..., backend=\"cuda\")) "
            "but cannot run kernels yet (loading cubins and launching is issue 10 items 2-4); run "
            "cuda schedules on backend=\"interp-cuda\" (the SIMT interpreter) meanwhile")

    def accepts(self, array) -> bool:
        return hasattr(array, "__cuda_array_interface__")

    def empty(self, shape: tuple, dtype, like=None):
        raise BackendUnavailable("the cuda backend cannot allocate device arrays yet (issue 10 item 3)")

    def __repr__(self) -> str:
        return f"CUDABackend(arch={self.arch!r})"
