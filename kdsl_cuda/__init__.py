"""kdsl's ``cuda`` backend: GPU-form loop IR -> CUDA C++ -> cubin (NVRTC from pip wheels) ->
launched through the CUDA driver.

``backend`` is the object the ``kdsl.backends`` entry point ``cuda`` names.  Layout:
``codegen/`` (pure: IR in, CUDA C++ out), ``build`` (NVRTC through cuda.bindings), ``runtime/``
(driver, memory, arrays of other libraries, launch), ``backend`` (the protocol object).

For users with no GPU array library: ``to_device(numpy_array)`` -> ``DeviceArray``
(``.numpy()`` copies back; ``__cuda_array_interface__`` and ``__dlpack__`` hand it to torch,
CuPy, JAX), ``empty(shape, dtype)``, ``synchronize()``, ``is_available()``.
"""
__version__ = "0.1.0"

from .backend import CUDABackend  # noqa: E402
from .runtime.driver import CudaError, is_available  # noqa: E402
from .runtime.memory import DeviceArray, empty, synchronize, to_device  # noqa: E402

#: the backend instance registered as "cuda"
backend = CUDABackend()

__all__ = ["CUDABackend", "CudaError", "DeviceArray", "backend", "empty", "is_available",
           "synchronize", "to_device", "__version__"]
