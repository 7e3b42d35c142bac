"""The Backend protocol: what a backend package implements (DESIGN principle 7).

A backend is any object with these members, registered in the entry-point
group ``kdsl.backends`` (name -> object or zero-argument factory) or at run
time with ``kdsl.register_backend``.  Dispatch calls, per (signature, schedule):

1. ``backend.schedule(sched, hints)`` unless the user gave an explicit schedule
   function for this backend: apply the backend's default schedule and the
   user's hints (``kdsl.schedule.hints.apply_hints`` does the generic part).
2. ``backend.compile(request)`` -> a ``Compiled``; ``request.lower(pipeline=...)``
   runs the pass table (``kdsl.passes.pipeline.SEQUENTIAL`` or the GPU layer's
   ``kdsl.gpu.pipeline.PIPELINE``, which a backend edits by pass name) and returns the ``LoweredFunc``.
3. ``compiled(inputs, outputs, scalars)`` per call: arrays in the backend's
   array kind, scalars in ``graph.scalars`` order.  Outputs are preallocated
   by dispatch (``backend.empty``) or given by the user with ``out=``.

``source(request)`` returns what the backend compiles (text), for
``kernel.source``.  Codegen must be pure; only ``compile`` may need tools or a
device.

Optional: ``compiled.fast_launcher(plan)`` -> a callable or None.  ``plan`` is
the specialisation's ``kdsl.runtime.callplan.CallPlan`` (argument checks, shape bindings,
constraints, outputs and scalar slots of one specialisation, as data).  The callable takes the
call's positional arguments (plus ``out`` when ``plan.out_mode`` is set) and
returns the result, or ``NotImplemented`` for anything that does not match the
plan exactly or would raise: the kernel then takes its normal path, which keeps
every error message.  It must never raise.  Kernels call it after a
specialisation has run a few times (``fastpath.PROMOTE_AFTER``); a backend
without it keeps the generated Python launcher.  Optional attributes of the
callable: ``__kdsl_device__`` (True: it takes device arrays, and checks that
``out=`` does not overlap its inputs itself) and ``__kdsl_packed__``: the same launcher
taking ``(args, out)`` -- the argument tuple as the kernel received it, whatever its
length -- which the kernel then calls instead (no re-packing of the tuple); it declines
an ``out=`` that shares memory with an argument or another output (the cuda and cpu
backends').
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable


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
        from ..runtime.compile_log import stage
        with stage("lower"):   # timed for logging.getLogger("kdsl")
            return lower(self.schedule, extra_passes=extra_passes, out_contiguous=self.out_contiguous,
                         pipeline=pipeline)


@runtime_checkable
class Compiled(Protocol):
    """A loaded specialisation (``fast_launcher(plan)`` is optional: see the docstring above)."""

    def __call__(self, inputs: list, outputs: list, scalars: list) -> None: ...


@runtime_checkable
class Backend(Protocol):
    """See the module docstring.  ``device`` is "host" (numpy arrays) or "cuda"."""

    name: str
    device: str

    def schedule(self, sched, hints: Sequence) -> None: ...

    def compile(self, request: CompileRequest) -> Compiled: ...

    def source(self, request: CompileRequest) -> str: ...

    def accepts(self, array) -> bool: ...

    def empty(self, shape: tuple, dtype, like=None): ...


CompiledFn = Callable[[list, list, list], None]
