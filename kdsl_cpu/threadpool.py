"""threadpoolctl support: ``threadpool_info()`` lists kdsl's pool, ``threadpool_limits`` limits it.

threadpoolctl (optional: kdsl never imports it) finds thread pools by the shared
libraries loaded in the process and a ``LibController`` class registered for a
filename prefix.  kdsl's kernels are JIT-compiled, so the controller is keyed on
llvmlite's library (``libllvmlite``, loaded whenever the cpu backend is) and reads
and sets kdsl's process-wide count (kdsl.threads) -- ``user_api="openmp"``, so that
``threadpool_limits(1)`` and ``threadpool_limits(1, user_api="openmp")`` (what joblib
and scikit-learn use) limit kdsl's loops too.  Leaving a ``threadpool_limits`` block
sets the count back to the number it had before, as an explicit setting.

``install()`` registers the controller now when threadpoolctl is imported, else when it
is first imported (a one-shot import hook), so ``import kdsl_cpu`` does not pay the
~17 ms of importing threadpoolctl.
"""
from __future__ import annotations

import sys

from kdsl import threads

_registered = False


def _register(tpc) -> None:
    """Register kdsl's ``LibController`` with the threadpoolctl module ``tpc`` (once)."""
    global _registered
    if _registered or not hasattr(tpc, "register") or not hasattr(tpc, "LibController"):
        return   # threadpoolctl < 3.0 has no registration API
    _registered = True

    class KdslController(tpc.LibController):
        """kdsl's cpu thread count, as threadpoolctl sees it."""

        user_api = "openmp"
        internal_api = "kdsl"
        filename_prefixes = ("libllvmlite",)

        def get_num_threads(self):
            return threads.resolve()

        def set_num_threads(self, num_threads):
            threads.set_num_threads(max(1, int(num_threads)))

        def get_version(self):
            from . import __version__
            return __version__

    tpc.register(KdslController)
    # threadpoolctl lists a controller only while a library of its prefix is loaded: kdsl_cpu
    # loads LLVM lazily (a warm process may never need it), so load it once threadpoolctl is here
    import llvmlite.binding  # noqa: F401


class _ImportHook:
    """Registers the controller right after ``threadpoolctl`` is first imported, then leaves."""

    def find_spec(self, name, path=None, target=None):
        if name != "threadpoolctl":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _register(module)
        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Make threadpoolctl see kdsl's pool: now if it is imported, else when it is."""
    tpc = sys.modules.get("threadpoolctl")
    if tpc is not None:
        _register(tpc)
    elif not any(isinstance(f, _ImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _ImportHook())


__all__ = ["install"]
