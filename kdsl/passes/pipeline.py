"""The core lowering pipeline: the target-neutral passes, their table and the runner around it.

``CORE`` lists the passes every target runs, from a Schedule to loop IR.  Each is one pure
function in its own module, whose docstring says what it *Assumes* and *Guarantees*:

- ``scan_legality`` (schedule, ``scan_check.check_scans``): a ``kd.scan``'s scan axis is one
  sequential loop, never bound to GPU indices; non-pointwise scans run it outermost; its
  per-step reductions are attached at its scan loop
- ``placement`` (schedule, ``placement.place_stages``): root order, attachments
- ``inline`` (schedule, ``inline.inline``): compute_inline stages substituted
- ``bound_inference`` (schedule, ``bound.infer_bounds``): regions, loop extents, guards
- ``padded_compute`` (schedule, ``padded_compute.padded_compute``): register tiles fed by
  padded caches lose the guards of the arrays' edges (the padding's zeros make them useless)
- ``storage`` (schedule, ``storage.plan_storage``): buffers, scopes, bindings, allocation sites
- ``loop_nests`` (schedule, ``loop_nests.build_loop_nests``): the LoweredFunc (loops,
  guards, reduction init nests, cross-thread reductions, tensorize requests)
- ``simplify`` (IR, ``simplify.simplify_pass``)

Sequential executors (``interp``, ``cpu``: BOUND loops run as loops, one iteration after
another) run ``SEQUENTIAL`` = ``CORE`` followed by:

- ``lower_cross_thread`` (IR, ``lower_cross_thread.lower_cross_thread``): CrossThreadReduce as
  publish / barrier / fold phases over a block-level shared buffer
- ``blocked_sums`` (IR, ``blocked_sums.blocked_sums``): compensated long float sums (CPU
  numerics; GPU reductions accumulate like cuBLAS, so the GPU table leaves it out)

The whole lists, in order (``names()``)::

    CORE:       scan_legality, placement, inline, bound_inference, padded_compute, storage,
                loop_nests, simplify
    SEQUENTIAL: CORE, lower_cross_thread, blocked_sums
    (cpu, kdsl_cpu.backend: SEQUENTIAL + fuse_loops, full_tiles, tighten_loops, unclamp,
     hoist_allocations, passes of kdsl_cpu.passes)

Targets that bind threads (``cuda``, ``interp-cuda``) run the GPU table of the GPU layer
(``kdsl.gpu.pipeline.PIPELINE``: ``CORE`` with the GPU passes inserted, ending with GPU-form
IR); no pass of ``kdsl.gpu`` runs for a sequential target.  A sequential target runs a
schedule's GPU requests (thread bindings, virtual threads, tensorize, double buffers) as the
plain loops they are.

Schedule-level passes map ``LowerState -> LowerState`` (``kdsl.passes.state``:
each fills in one analysis); IR-level passes map ``LoweredFunc -> LoweredFunc``
and run on ``state.func``, so every schedule-level pass comes first.  Backends
edit a table by name: ``SEQUENTIAL.insert_after("blocked_sums", Pass(...))``,
``insert_before``, ``replace``, ``append``, ``remove`` (each returns a new Pipeline; an
unknown or duplicate name raises ``PipelineError``) and hand the result to
``CompileRequest.lower(pipeline=...)``.

Passes most kernels skip (``scan_legality``, ``padded_compute``; in the GPU table also
``pipeline_legality``, ``scan_tiles``, ``tensorize``, ``software_pipeline``, ``vthread``,
``interior_blocks``) are ``Deferred``: their modules are imported when a kernel first has work
for them (``gates``: the tests those passes start with).

The runner verifies the IR after every pass from ``loop_nests`` on when
``config.verify()`` (``KDSL_VERIFY``; on under pytest) with the table's ``verifier``
(``kdsl.ir.verifier.verify`` unless the table names another: the GPU table adds the GPU
rules), prints the state after every pass with ``KDSL_DUMP=passes``
(``config.dump_passes()``), and records pass timings in ``func.attrs["pass_times"]``
(diagnostic only).
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import sys
import time
from dataclasses import dataclass
from typing import Callable

from .. import config
from ..ir import nodes as n
from .bound import infer_bounds
from . import gates
from .inline import inline
from .loop_nests import build_loop_nests
from .placement import place_stages
from .simplify import simplify_pass
from .state import LowerState
from .storage import plan_storage

class PipelineError(ValueError):
    """A pipeline edit names no pass of the table, repeats a name or orders levels wrongly."""


class Level(enum.Enum):
    """What a pass transforms."""

    SCHEDULE = "schedule"    # LowerState -> LowerState
    IR = "ir"                # LoweredFunc -> LoweredFunc


@dataclass(frozen=True)
class Pass:
    """One entry of the table: a unique ``name``, the pure function, its level."""

    name: str
    fn: Callable
    level: Level = Level.IR


def _as_pass(p) -> Pass:
    if isinstance(p, Pass):
        return p
    if isinstance(p, tuple) and len(p) == 2:
        return Pass(p[0], p[1])
    if callable(p):
        return Pass(getattr(p, "__name__", "pass"), p)
    raise PipelineError(f"not a pass: {p!r} (give a Pass, a (name, function) pair or an IR function)")


@dataclass(frozen=True)
class Pipeline:
    """An ordered table of passes; edits return a new Pipeline (with the same ``verifier``).

    ``verifier``: what checks the IR after each pass when ``config.verify()`` (a function of a
    LoweredFunc; None: ``kdsl.ir.verifier.verify``, the loop-IR rules)."""

    passes: tuple
    verifier: Callable | None = None

    def __post_init__(self):
        seen, ir_from = set(), None
        for p in self.passes:
            if p.name in seen:
                raise PipelineError(f"two passes are named {p.name!r}")
            seen.add(p.name)
            if p.level is Level.IR and ir_from is None:
                ir_from = p.name
            elif p.level is Level.SCHEDULE and ir_from is not None:
                raise PipelineError(f"schedule-level pass {p.name!r} comes after IR pass {ir_from!r}: "
                                    "schedule-level passes run before the loop IR exists")

    def names(self) -> tuple:
        return tuple(p.name for p in self.passes)

    def index(self, name: str) -> int:
        for k, p in enumerate(self.passes):
            if p.name == name:
                return k
        raise PipelineError(f"no lowering pass named {name!r}; the pipeline has: {', '.join(self.names())}")

    def _with(self, k: int, drop: int, new) -> Pipeline:
        new = tuple(_as_pass(p) for p in new)
        return dataclasses.replace(self, passes=self.passes[:k] + new + self.passes[k + drop:])

    def insert_before(self, name: str, *new) -> Pipeline:
        return self._with(self.index(name), 0, new)

    def insert_after(self, name: str, *new) -> Pipeline:
        return self._with(self.index(name) + 1, 0, new)

    def replace(self, name: str, new) -> Pipeline:
        return self._with(self.index(name), 1, (new,))

    def append(self, *new) -> Pipeline:
        return self._with(len(self.passes), 0, new)

    def remove(self, name: str) -> Pipeline:
        return self._with(self.index(name), 1, ())

    def __iter__(self):
        return iter(self.passes)


class Deferred:
    """The pass ``module.name``, whose module is imported when a function (or state) first has
    work for it (``has_work``: the pass's own first test, in a gates module; False: the input
    is returned, as the pass would).  Most kernels have no scans, padded tiles, tensor cores,
    pipelined copies, virtual threads or tiled main loops: a cold process's first kernel
    compiles without importing those passes.  ``__module__``/``__name__`` name the pass
    function."""

    def __init__(self, module: str, name: str, has_work):
        self.__module__, self.__name__, self.has_work = module, name, has_work
        self._fn = None

    def __call__(self, x):
        fn = self._fn
        if fn is None:
            if not self.has_work(x):
                return x
            fn = self._fn = getattr(importlib.import_module(self.__module__), self.__name__)
        return fn(x)

    def __repr__(self) -> str:
        return f"<pass {self.__module__}.{self.__name__}>"


def deferred(name: str, module: str, fn: str, has_work, level: Level = Level.IR) -> Pass:
    """The table entry ``name`` of the pass ``module.fn`` (absolute module name), imported when
    ``has_work`` first holds (``Deferred``)."""
    return Pass(name, Deferred(module, fn, has_work), level)


S = Level.SCHEDULE
#: the target-neutral passes, from a Schedule to loop IR, in order (every target runs them)
CORE = Pipeline((
    deferred("scan_legality", f"{__package__}.scan_check", "check_scans", gates.scan_stages, S),
    Pass("placement", place_stages, S),
    Pass("inline", inline, S),
    Pass("bound_inference", infer_bounds, S),
    deferred("padded_compute", f"{__package__}.padded_compute", "padded_compute",
             gates.has_padded_stages, S),
    Pass("storage", plan_storage, S),
    Pass("loop_nests", build_loop_nests, S),
    Pass("simplify", simplify_pass),
))

def sequential() -> Pipeline:
    """``SEQUENTIAL``, the table of sequential executors (interp, cpu): CORE, then what makes
    its IR sequential.  Made on first use (``SEQUENTIAL`` is this module's attribute through
    ``__getattr__``): a GPU target never imports those two passes."""
    table = globals().get("SEQUENTIAL")
    if table is None:
        from .blocked_sums import blocked_sums
        from .lower_cross_thread import lower_cross_thread
        table = globals()["SEQUENTIAL"] = CORE.append(
            Pass("lower_cross_thread", lower_cross_thread),
            Pass("blocked_sums", blocked_sums),
        )
    return table


def __getattr__(name):
    if name == "SEQUENTIAL":
        return sequential()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run_one(p: Pass, state: LowerState) -> LowerState:
    if p.level is Level.SCHEDULE:
        return p.fn(state)
    if state.func is None:
        raise PipelineError(f"IR pass {p.name!r} runs before any pass made the loop IR")
    func = p.fn(state.func)
    return state if func is state.func else dataclasses.replace(state, func=func)


def run_pipeline(state: LowerState, pipeline: Pipeline | None = None, stop_after: str | None = None) -> LowerState:
    """Run ``pipeline`` (default ``SEQUENTIAL``) over ``state`` (up to and including
    ``stop_after``) with verification, dumps and timing; returns the last state
    (``state.func`` once ``loop_nests`` ran)."""
    if pipeline is None:
        pipeline = sequential()
    passes = pipeline.passes
    if stop_after is not None:
        passes = passes[:pipeline.index(stop_after) + 1]
    verify_on, dump = config.verify(), config.dump_passes()
    verify = pipeline.verifier
    if verify_on and verify is None:
        from ..ir.verifier import verify
    times = {}
    for p in passes:
        t0 = time.perf_counter()
        state = _run_one(p, state)
        times[p.name] = times.get(p.name, 0.0) + time.perf_counter() - t0
        if verify_on and state.func is not None:
            verify(state.func)
        if dump:
            print(f"# ---- after {p.name}\n{state}", file=sys.stderr)
    if state.func is not None:
        attrs = dict(state.func.attrs)
        attrs["pass_times"] = {**attrs.get("pass_times", {}), **times}
        state = dataclasses.replace(state, func=dataclasses.replace(state.func, attrs=attrs))
    return state


def run_passes(func: n.LoweredFunc, passes) -> n.LoweredFunc:
    """Run IR passes (``Pass``es or (name, fn) pairs) over ``func`` alone, as the pipeline would."""
    state = LowerState(None, func=func)
    table = passes if isinstance(passes, Pipeline) else Pipeline(tuple(_as_pass(p) for p in passes))
    return run_pipeline(state, table).func


def lower(sched, extra_passes=(), out_contiguous=(), pipeline: Pipeline | None = None) -> n.LoweredFunc:
    """Lower a ``Schedule`` to loop IR through ``pipeline`` (default ``SEQUENTIAL``; GPU form:
    ``kdsl.gpu.pipeline.lower``), then the IR passes ``extra_passes`` appended (``Pass``es,
    (name, fn) pairs or functions)."""
    pipe = pipeline if pipeline is not None else sequential()
    if extra_passes:
        pipe = pipe.append(*extra_passes)
    state = run_pipeline(LowerState(sched, tuple(out_contiguous)), pipe)
    if state.func is None:
        raise PipelineError(f"the pipeline ({', '.join(pipe.names())}) made no loop IR")
    return state.func
