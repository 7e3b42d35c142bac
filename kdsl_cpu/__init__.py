"""kdsl's ``cpu`` backend: loop IR -> LLVM IR (llvmlite) -> host machine code, run on numpy arrays.

``backend`` is the object the ``kdsl.backends`` entry point ``cpu`` names.
Layout: ``codegen/`` (pure: IR in, LLVM IR text out), ``jit`` (optimise,
object code, load), ``parallel`` (OpenMP / thread-pool launchers),
``launcher`` (the per-kernel call path), ``backend`` (the protocol object).
"""
__version__ = "0.1.0"

from .backend import CPUBackend, CPUCompiled  # noqa: E402

#: the backend instance registered as "cpu"
backend = CPUBackend()

__all__ = ["CPUBackend", "CPUCompiled", "backend", "__version__"]
