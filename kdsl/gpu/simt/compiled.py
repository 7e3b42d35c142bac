"""A lowered GPU-form function ready to run under the SIMT executor (the ``Compiled`` of the
interpreter backend when it runs a kernel as scheduled for a GPU target: ``interp-cuda``)."""
from __future__ import annotations

from ...ir import nodes as n
from ...ir.visitor import collect
from . import run_simt


class SimtCompiled:
    """``(inputs, outputs, scalars)`` runs ``func`` with ``run_simt`` (race-checked)."""

    fast = None     # no fast launcher (kdsl.backends.spec.FastLaunch)

    def __init__(self, func: n.LoweredFunc):
        from ...schedule.intrin import BlockIntrinsic
        found = collect(func.body, lambda x: isinstance(x, n.Intrinsic) and not (
            x.args and isinstance(x.args[0], BlockIntrinsic)))
        if found:
            raise NotImplementedError(f"the SIMT interpreter cannot execute the intrinsic "
                                      f"{found[0].name!r} of kernel {func.name!r} (tensorize "
                                      f"targets need a backend that implements them)")
        self.func = func

    def __call__(self, inputs: list, outputs: list, scalars: list, stream=None) -> None:
        run_simt(self.func, inputs, outputs, scalars)

    @property
    def source(self) -> str:
        """The host program it runs (GPU-form loop IR: kernels with their launches)."""
        return str(self.func)


__all__ = ["SimtCompiled"]
