"""``BackendBase``: the usual defaults of the backend contract's methods (kdsl/backends/spec.py).

Kept apart from ``spec`` because its ``lower`` may reach the GPU layer's table (for a GPU
target), which sequential backends must never import (docs/design.md, Layers).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype
from .spec import BackendSpec


class BackendBase:
    """The usual defaults of a host backend; a subclass sets ``spec`` and writes ``compile``.

    ``schedule`` applies the user's generic hints (``kdsl.schedule.hints.apply_hints``),
    ``lower`` runs ``spec.pipeline()`` (else the core table of the target), ``source`` prints
    the lowered loop IR, ``accepts`` takes numpy arrays and ``empty`` allocates them."""

    spec: BackendSpec

    def schedule(self, sched, hints) -> None:
        """The user's hints, applied generically (no default schedule of its own)."""
        from ..schedule.hints import apply_hints
        apply_hints(sched, hints)

    def lower(self, request):
        """The loop IR of ``request``, through ``spec.pipeline()`` or the target's core table."""
        make = self.spec.pipeline
        if make is None:
            from ..gpu.pipeline import for_target
            return request.lower(pipeline=for_target(self.spec.schedule_target))
        return request.lower(pipeline=make())

    def source(self, request) -> str:
        """The lowered loop IR as text."""
        return str(self.lower(request))

    def accepts(self, array) -> bool:
        return isinstance(array, np.ndarray)

    def empty(self, shape: tuple, dtype, like=None):
        return np.empty(shape, as_dtype(dtype).np)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend {self.spec.name!r}>"


class TargetOnly(BackendBase):
    """Stands for a backend that is not installed, so ``kernel.lower`` can still show
    the loop nest its schedules give (generic hints applied, the target's core passes only;
    it compiles nothing)."""

    def __init__(self, name: str):
        self.spec = BackendSpec(name=name, device="host")

    def compile(self, request):
        from .registry import _not_installed
        raise _not_installed(self.spec.name)


__all__ = ["BackendBase", "TargetOnly"]
