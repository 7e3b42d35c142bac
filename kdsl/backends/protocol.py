"""The Backend protocol: what a backend package implements (DESIGN principle 7).

A backend is an object with a ``spec`` (a ``kdsl.backends.spec.BackendSpec``: name, device
kind, target, size classes, pass table, options, result wrapper, version -- typed data) and
the methods of ``Backend`` below, registered in the entry-point group ``kdsl.backends``
(name -> object, class or zero-argument factory) or at run time with
``kdsl.register_backend``; the registry checks it (``spec.check_backend``) when it loads it.
Dispatch calls, per (signature, schedule):

1. ``backend.schedule(sched, hints)`` unless the user gave an explicit schedule
   function for ``spec.schedule_target``: apply the backend's default schedule and the
   user's hints (``kdsl.schedule.hints.apply_hints`` does the generic part).
2. ``backend.compile(request)`` -> a ``Compiled``; ``backend.lower(request)`` gives the
   ``LoweredFunc`` (``request.lower(pipeline=...)`` runs a pass table:
   ``kdsl.passes.pipeline.SEQUENTIAL`` or the GPU layer's ``kdsl.gpu.pipeline.PIPELINE``,
   which a backend edits by pass name; ``kernel.lower`` shows it).
3. ``compiled(inputs, outputs, scalars)`` per call (``stream=`` added when the user passed
   one): arrays in the backend's array kind, scalars in ``graph.scalars`` order.  Outputs
   are preallocated by dispatch (``backend.empty``, then ``spec.result_wrapper``) or given
   by the user with ``out=``.

``source(request)`` returns what the backend compiles (text), for ``kernel.source``.
Codegen must be pure; only ``compile`` may need tools or a device.

The compiled object's ``fast`` is its optional fast-launch capability: None, or a
``spec.FastLaunch`` whose ``build(plan)`` gives a ``spec.FastLauncher`` (or None) for one
specialisation's ``kdsl.runtime.callplan.CallPlan``; see their docstrings and
docs/backends.md.  ``kdsl.backends.base.BackendBase`` has the usual defaults of the methods.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:   # kdsl.backends.spec is imported when a backend loads, not by `import kdsl`
    from .spec import BackendSpec, FastLaunch


@dataclass
class CompileRequest:
    """Everything a backend needs to build one specialisation of a kernel."""

    graph: Any                 # kdsl.graph.Graph
    schedule: Any              # kdsl.schedule.Schedule, hints/defaults already applied
    signature: Any             # kdsl.runtime.signature.Signature (hashable)
    out_contiguous: tuple = () # per output: written through compact C strides?
    options: dict = field(default_factory=dict)

    def lower(self, extra_passes: Sequence = (), pipeline=None):
        """Run a lowering pipeline on the schedule: ``pipeline`` (a ``kdsl.passes.pipeline.Pipeline``,
        usually ``SEQUENTIAL`` or ``kdsl.gpu.pipeline.PIPELINE`` edited by name; default
        ``SEQUENTIAL``), then ``extra_passes`` appended."""
        from ..passes.pipeline import lower
        from ..compile_log import stage
        with stage("lower"):   # timed for logging.getLogger("kdsl")
            return lower(self.schedule, extra_passes=extra_passes, out_contiguous=self.out_contiguous,
                         pipeline=pipeline)


@runtime_checkable
class Compiled(Protocol):
    """A loaded specialisation: ``(inputs, outputs, scalars, stream=None)`` runs it; ``fast``
    is its fast-launch capability (a ``spec.FastLaunch``) or None."""

    fast: FastLaunch | None

    def __call__(self, inputs: list, outputs: list, scalars: list, stream=None) -> None: ...


@runtime_checkable
class Backend(Protocol):
    """See the module docstring; ``spec`` says what the backend is, as data."""

    spec: BackendSpec

    def schedule(self, sched, hints: Sequence) -> None: ...

    def lower(self, request: CompileRequest) -> Any: ...

    def compile(self, request: CompileRequest) -> Compiled: ...

    def source(self, request: CompileRequest) -> str: ...

    def accepts(self, array) -> bool: ...

    def empty(self, shape: tuple, dtype, like=None): ...


CompiledFn = Callable[[list, list, list], None]
