"""Backends: the contract (``spec``, ``protocol``, ``base``), the registry, the numpy reference
backend, the loop-IR interpreter.

This package is also the public ``kd.backends``: calling it (``kd.backends()``) lists the
installed backends (``registry.backends``).  One object serves both, so that neither shadows
the other (``kd.backends()`` works after ``import kdsl.backends.interpreter``, and
``kdsl.backends.interpreter.step`` after ``import kdsl``).
"""
import sys
import types


class _CallablePackage(types.ModuleType):
    """The package module, callable as ``registry.backends``."""

    def __call__(self):
        """Sorted names of installed and registered backends (nothing is imported)."""
        from .registry import backends
        return backends()


sys.modules[__name__].__class__ = _CallablePackage
