"""kdsl's ``cuda`` backend: GPU-form loop IR -> CUDA C++ -> cubin (NVRTC from pip wheels).

``backend`` is the object the ``kdsl.backends`` entry point ``cuda`` names.
Layout: ``codegen/`` (pure: IR in, CUDA C++ out), ``build`` (NVRTC through cuda.core),
``backend`` (the protocol object).  Running kernels on a device is not implemented yet.
"""
__version__ = "0.1.0"

from .backend import CUDABackend  # noqa: E402

#: the backend instance registered as "cuda"
backend = CUDABackend()

__all__ = ["CUDABackend", "backend", "__version__"]
