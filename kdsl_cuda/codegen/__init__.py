"""Pure code generation: GPU-form loop IR in, CUDA C++ text out (no GPU, no compiler)."""
from .module import CudaModule, generate  # noqa: F401
