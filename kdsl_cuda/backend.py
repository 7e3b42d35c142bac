"""The ``cuda`` Backend object (kdsl/backends/protocol.py): spec, schedule, lower, source, compile.

``lower`` runs the GPU table (``kdsl.gpu.pipeline.PIPELINE``: device kernels with
launches); ``source`` prints it as CUDA C++ (``kdsl_cuda.codegen``); ``build`` compiles that to
a cubin with NVRTC (``kdsl_cuda.build``, no GPU needed; cubins are kept in kdsl's disk cache,
keyed by the source, the architecture and the NVRTC version); ``compile`` loads it on the device
and returns the launcher (``kdsl_cuda.runtime.launch.CudaCompiled``).  ``compile`` first looks
up the key of a request not yet scheduled (``schedule_key``: kernels without schedule
functions), then the request's early key (kdsl.runtime.fingerprint; kdsl_cuda.runtime.early):
a warm process gets the kernels' interface and cubin without scheduling, lowering, code
generation or NVRTC (the passes
and the code generator are imported only when something is lowered).  Arrays: device arrays of
any library in place, numpy arrays copied (``kdsl_cuda.runtime``).  Kernels without a cuda
schedule get the defaults of ``kdsl_cuda.schedules``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from kdsl import dtypes as dt
from kdsl.backends.protocol import CompileRequest
from kdsl.backends.spec import BackendSpec

from . import build

_HERE = os.path.dirname(os.path.abspath(__file__))


def generate(func):
    """kdsl_cuda.codegen.generate (imported on first use: a warm process never needs it)."""
    from .codegen import generate as gen
    return gen(func)


class CUDABackend:
    """Generates CUDA C++ from the GPU loop IR and compiles it to cubins with NVRTC."""

    #: compile takes a kdsl.runtime.dispatch.DeferredRequest: looked up before it is scheduled
    defers_schedule = True

    def __init__(self, arch: str | None = None):
        from . import __version__
        self.arch = arch or build.DEFAULT_ARCH
        # device arrays; default schedules choose by size (kdsl.runtime.signature); the GPU
        # table; JAX results wrapped back into JAX arrays
        self.spec = BackendSpec(name="cuda", device="cuda", size_classes=True,
                                pipeline=_gpu_pipeline, result_wrapper=self.result_wrapper,
                                version=__version__)
        #: lowered: requests lowered; early_hits: loaded by their early key (nothing lowered);
        #: unscheduled: those of them found before scheduling (nothing scheduled either)
        self.stats = {"lowered": 0, "early_hits": 0, "unscheduled": 0}
        _register_readers()

    # ------------------------------------------------------------- protocol
    def schedule(self, sched, hints) -> None:
        """The default cuda schedules (``kdsl_cuda.schedules``: blocks and threads by stage
        kind and size), adjusted by the user's declarative ``hints``."""
        from .schedules import schedule
        schedule(sched, hints)

    def lower(self, request: CompileRequest):
        """The GPU-form loop IR of ``request`` (the core GPU table, ``spec.pipeline()``)."""
        return request.lower(pipeline=self.spec.pipeline())

    def generate(self, request: CompileRequest):
        return generate(self.lower(request))

    def source(self, request: CompileRequest) -> str:
        """The CUDA C++ of the request (what NVRTC compiles)."""
        return self.generate(request).source

    def build(self, request: CompileRequest, arch: str | None = None) -> bytes:
        """The cubin of the request for ``arch`` (default ``self.arch``; NVRTC, no device needed)."""
        mod = self.generate(request)
        return self.cubin(mod, arch or self.arch)

    def cubin(self, mod, arch: str, fresh: bool = False) -> bytes:
        """The cubin of a generated module for ``arch``: from the disk cache, or NVRTC
        (``fresh``: the cached one failed to load: rebuilt, its entry discarded)."""
        from .runtime.cubin_cache import cached_cubin
        return cached_cubin(mod.source, arch, _module_name(mod), fresh)

    def compile(self, request: CompileRequest):
        """Load the early key's entry, else lower, generate, build (or load the cubin from the
        disk cache) and record the entry; then load on the device."""
        from kdsl.runtime import cache as disk

        from .runtime import driver, early
        from .runtime.launch import CudaCompiled
        _register_readers()
        try:
            dev = driver.device(0)     # BackendUnavailable where there is no driver or device
        except Exception:
            request.schedule           # a schedule's user error first (a deferred request)
            raise
        store = disk.DiskCache()
        pre = self.schedule_key(request, dev.arch) if store.enabled else None
        hit = key = None
        if pre is not None:     # before scheduling: a warm process neither schedules nor lowers
            blob = store.get(pre, lambda b: early.unpack(b) is not None)
            hit = early.unpack(blob) if blob is not None else None
            if hit is not None:
                self.stats["unscheduled"] += 1
                key = pre
        if hit is None:
            key = self.early_key(request, dev.arch) if store.enabled else None   # (schedules it)
            if key is not None:
                blob = store.get(key, lambda b: early.unpack(b) is not None)
                hit = early.unpack(blob) if blob is not None else None
                if hit is not None and pre is not None:  # the next process: before scheduling
                    store.put(pre, blob)
        if hit is not None:
            func, mod, arch, cubin = hit
            self.stats["early_hits"] += 1
        else:
            func = self.lower(request)
            self.stats["lowered"] += 1
            mod = generate(func)
            arch, cubin = dev.arch, self.cubin(mod, dev.arch)
            if key is not None:
                blob = early.pack(func, mod, arch, cubin)
                store.put(key, blob)
                if pre is not None:
                    store.put(pre, blob)
        cubins = {arch: cubin}

        def cubin_for(a, fresh=False):
            if a not in cubins or fresh:
                if fresh and key is not None:    # the entry's cubin failed to load: not again
                    store.discard(key, f"cuda kernel {func.name} ({a})")
                cubins[a] = self.cubin(mod, a, fresh)
            return cubins[a]
        return CudaCompiled(func, mod, cubin_for, mod.source)

    def early_key(self, request: CompileRequest, arch: str) -> str | None:
        """The request's disk-cache key before lowering for a device of ``arch`` (None: the
        request cannot be keyed canonically, kdsl.runtime.fingerprint)."""
        from kdsl.runtime import fingerprint

        from .runtime.early import nvrtc_identity
        return fingerprint.request_key(
            request, self.spec.name, self.spec.version,
            {"arch": arch, "nvrtc": nvrtc_identity(), **build.options(arch, "k.cu")},
            source_dirs=(_HERE,))

    def schedule_key(self, request: CompileRequest, arch: str) -> str | None:
        """The key of a request not scheduled yet (``dispatch.DeferredRequest``: no explicit
        schedule function) for a device of ``arch``, or None.  Besides the request's
        ``schedule_roots`` (graph, hints, size classes...) it holds what the default schedules
        (kdsl_cuda.schedules) read: the architecture they plan for (``hopper.target_arch``:
        device 0's, i.e. ``arch``, unless set otherwise) and the switches
        ``KDSL_CUDA_TENSOR_CORES`` and ``KDSL_CUDA_WGMMA``; the compiler's source is in every
        key."""
        from kdsl.runtime import fingerprint
        from kdsl.runtime.dispatch import DeferredRequest

        from .runtime.early import nvrtc_identity
        if not isinstance(request, DeferredRequest) or request.scheduled:
            return None
        from kdsl import config
        hopper = sys.modules.get("kdsl_cuda.schedules.hopper")
        planned = hopper.target_arch() if hopper is not None else arch
        inputs = {"schedule_arch": planned, "tensor_cores": config.cuda_tensor_cores(),
                  "wgmma": config.cuda_wgmma()}
        return fingerprint.schedule_key(
            request, self.spec.name, self.spec.version,
            {"arch": arch, "nvrtc": nvrtc_identity(), **build.options(arch, "k.cu")},
            inputs, source_dirs=(_HERE,))

    def accepts(self, array) -> bool:
        """Device arrays of any library (and numpy arrays, which calls copy)."""
        return isinstance(array, np.ndarray) or hasattr(array, "__cuda_array_interface__") or \
            hasattr(array, "__dlpack__")

    def empty(self, shape: tuple, dtype, like=None):
        """A result array: numpy when the call's first array is numpy (or there is none), else
        made by the library of ``like`` (torch, CuPy, JAX: a DeviceArray; kdsl: DeviceArray)."""
        if like is None or isinstance(like, np.ndarray):
            return np.empty(tuple(shape), dtype=dt.as_dtype(dtype).np)
        from .runtime import interop
        return interop.library(like).empty(shape, dtype, like)

    def result_wrapper(self, kind):
        """What turns an allocated result into the call's result for inputs of type ``kind``
        (JAX: its array, through DLPack), or None."""
        from .runtime import interop
        mod = getattr(kind, "__module__", "") or ""
        if mod.startswith("jax"):
            return interop._LIBS["jax"].result
        return None

    def __repr__(self) -> str:
        return f"CUDABackend(arch={self.arch!r})"


def _gpu_pipeline():
    """The core GPU table (``kdsl.gpu.pipeline.PIPELINE``, imported on first use)."""
    from kdsl.gpu.pipeline import PIPELINE
    return PIPELINE


def _module_name(mod) -> str:
    return (mod.kernels[0].name if mod.kernels else "kdsl") + ".cu"


_readers_done = set()


def _register_readers() -> None:
    """Let kdsl's dispatch read torch and CuPy arrays through their attributes (cheap) instead of
    ``__cuda_array_interface__`` (costly on torch), for the libraries imported so far."""
    import sys
    from kdsl.runtime.arrays import register_dlpack_reader, register_reader
    from .runtime import interop
    register_dlpack_reader(interop.dlpack_info)
    for mod, attr in (("torch", "Tensor"), ("cupy", "ndarray")):
        m = sys.modules.get(mod)
        if m is not None and mod not in _readers_done:
            register_reader(getattr(m, attr), interop.array_info)
            _readers_done.add(mod)
