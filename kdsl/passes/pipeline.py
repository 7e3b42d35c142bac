"""The lowering pipeline: one ordered table of passes and the runner around it.

``PIPELINE`` lists every pass from a Schedule to GPU-form loop IR.  Each is
one pure function in its own module, whose docstring says what it *Assumes*
and *Guarantees*:

- ``scan_legality`` (schedule, ``scan_check.check_scans``): a ``kd.scan``'s scan axis is one
  sequential loop, never bound to GPU indices; non-pointwise scans run it outermost; its
  per-step reductions are attached at its scan loop
- ``placement`` (schedule, ``placement.place_stages``): root order, attachments
- ``pipeline_legality`` (schedule, ``software_pipeline.check_pipelines``): pipelined stages
  still qualify (a primitive after ``double_buffer`` may have broken it)
- ``inline`` (schedule, ``inline.inline``): compute_inline stages substituted
- ``bound_inference`` (schedule, ``bound.infer_bounds``): regions, loop extents, guards
- ``padded_compute`` (schedule, ``padded_compute.padded_compute``): register tiles fed by
  padded caches lose the guards of the arrays' edges (the padding's zeros make them useless)
- ``storage`` (schedule, ``storage.plan_storage``): buffers, scopes, bindings, allocation sites
- ``loop_nests`` (schedule, ``loop_nests.build_loop_nests``): the LoweredFunc (loops,
  guards, reduction init nests, cross-thread reductions, tensorize requests)
- ``tensorize`` (IR, ``tensorize.tensorize``): tensorized nests -> warp-level WMMA statements
- ``simplify`` (IR, ``simplify.simplify_pass``)
- ``software_pipeline`` (IR, ``software_pipeline.software_pipeline``): pipelined copies
  become rings of shared buffers filled by asynchronous copies
- ``vthread`` (IR, ``vthread.inject_vthreads``): virtual-thread loops unrolled, interleaved
- ``sync`` (IR, ``sync.sync``): barriers for shared memory in GPU kernels, guards predicated
  where a barrier would be under divergence
- ``interior_blocks`` (IR, ``interior_blocks.interior_blocks``): a block's tiled main loop
  versioned: a copy without the guards that hold for every thread of the blocks inside the arrays
- ``full_thread_tiles`` (IR, ``thread_tiles.full_thread_tiles``): the work of a thread with many
  tile guards (a register tile) versioned: a guard-free copy for threads whose tile is inside
- ``async_copies`` (IR, ``async_copies.async_copies``): a block's one-shot copies of global
  memory into shared memory (row caches, stencil tiles) become asynchronous copies
- ``coalesced_fallbacks`` (IR, ``coalesced_fallbacks.coalesced_fallbacks``): cooperative vector
  copies get an element-by-element alternative whose warps copy whole rows (unaligned arrays)
- ``shared_layout`` (IR, ``shared_layout.shared_layout``): shared tiles get padded rows
  (strides) so that column and fragment accesses spread over the banks
- ``device_kernels`` (IR, ``device_kernels.device_kernels``): the host program of GPU
  kernels with their launches and workspaces (GPU form)

That table, ``PIPELINE``, is target-neutral and ends with GPU-form IR (DeviceKernels, barriers,
CrossThreadReduce, AsyncCopy, WMMA statements); GPU targets run it as is.  Sequential executors (the
interpreter, the cpu backend) run ``SEQUENTIAL``: ``PIPELINE`` without ``device_kernels``
(its GPU checks do not apply to loops that run one iteration after another),
``async_copies`` (copies complete at issue there) and ``shared_layout`` (addresses are a GPU
matter), followed by
``SEQUENTIAL_TAIL``:

- ``sequential_kernels`` (IR, ``sequential.sequential_kernels``): DeviceKernels -> their loops
- ``lower_cross_thread`` (IR, ``lower_cross_thread.lower_cross_thread``): CrossThreadReduce as
  publish / barrier / fold phases over a block-level shared buffer
- ``lower_async_copies`` (IR, ``sequential.lower_async_copies``): AsyncCopy -> Store
- ``blocked_sums`` (IR, ``blocked_sums.blocked_sums``): compensated long float sums (CPU
  numerics; GPU reductions accumulate like cuBLAS, so the GPU table leaves it out)

The whole lists, in order (``names()``)::

    PIPELINE:   scan_legality, placement, pipeline_legality, inline, bound_inference, padded_compute, storage,
                loop_nests,
                tensorize, simplify, software_pipeline, vthread, sync, interior_blocks,
                full_thread_tiles, async_copies, coalesced_fallbacks,
                shared_layout, device_kernels
    SEQUENTIAL: PIPELINE without device_kernels, async_copies and shared_layout, then
                sequential_kernels, lower_cross_thread, lower_async_copies, blocked_sums
    (cpu: SEQUENTIAL + fuse_loops, full_tiles, tighten_loops, unclamp, hoist_allocations)

``for_target(name)`` gives the table of a target.  On functions without BOUND loops
``SEQUENTIAL`` gives the IR the single table gave before the GPU passes (the tail's new passes
return the function as is, after a walk over statements only).  GPU passes that sequential
executors must also see go before ``device_kernels``.

Schedule-level passes map ``LowerState -> LowerState`` (``kdsl.passes.state``:
each fills in one analysis); IR-level passes map ``LoweredFunc -> LoweredFunc``
and run on ``state.func``, so every schedule-level pass comes first.  Backends
edit a table by name: ``SEQUENTIAL.insert_after("blocked_sums", Pass(...))``,
``insert_before``, ``replace``, ``append``, ``remove`` (each returns a new Pipeline; an
unknown or duplicate name raises ``PipelineError``) and hand the result to
``CompileRequest.lower(pipeline=...)``.

The runner verifies the IR after every pass from ``loop_nests`` on when
``config.verify()`` (``KDSL_VERIFY``; on under pytest), prints the state after
every pass with ``KDSL_DUMP=passes`` (``config.dump_passes()``), and records
pass timings in ``func.attrs["pass_times"]`` (diagnostic only).
"""
from __future__ import annotations

import dataclasses
import enum
import sys
import time
from dataclasses import dataclass
from typing import Callable

from .. import config
from ..ir import nodes as n
from .blocked_sums import blocked_sums
from .coalesced_fallbacks import coalesced_fallbacks
from .bound import infer_bounds
from .device_kernels import device_kernels
from .inline import inline
from .loop_nests import build_loop_nests
from .padded_compute import padded_compute
from .lower_cross_thread import lower_cross_thread
from .placement import place_stages
from .scan_check import check_scans
from .sequential import lower_async_copies, sequential_kernels
from .shared_layout import shared_layout
from .async_copies import async_copies
from .simplify import simplify_pass
from .software_pipeline import check_pipelines, software_pipeline
from .state import LowerState
from .storage import plan_storage
from .sync import sync
from .tensorize import tensorize
from .interior_blocks import interior_blocks
from .thread_tiles import full_thread_tiles
from .vthread import inject_vthreads


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
    """An ordered table of passes; edits return a new Pipeline."""

    passes: tuple

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
        return Pipeline(self.passes[:k] + new + self.passes[k + drop:])

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


S = Level.SCHEDULE
#: every pass from a Schedule to GPU-form loop IR, in order (the table of GPU targets)
PIPELINE = Pipeline((
    Pass("scan_legality", check_scans, S),
    Pass("placement", place_stages, S),
    Pass("pipeline_legality", check_pipelines, S),
    Pass("inline", inline, S),
    Pass("bound_inference", infer_bounds, S),
    Pass("padded_compute", padded_compute, S),
    Pass("storage", plan_storage, S),
    Pass("loop_nests", build_loop_nests, S),
    Pass("tensorize", tensorize),
    Pass("simplify", simplify_pass),
    Pass("software_pipeline", software_pipeline),
    Pass("vthread", inject_vthreads),
    Pass("sync", sync),
    Pass("interior_blocks", interior_blocks),
    Pass("full_thread_tiles", full_thread_tiles),
    Pass("async_copies", async_copies),
    Pass("coalesced_fallbacks", coalesced_fallbacks),
    Pass("shared_layout", shared_layout),
    Pass("device_kernels", device_kernels),
))

#: what sequential executors run after the target-neutral passes (module docstring)
SEQUENTIAL_TAIL = (
    Pass("sequential_kernels", sequential_kernels),
    Pass("lower_cross_thread", lower_cross_thread),
    Pass("lower_async_copies", lower_async_copies),
    Pass("blocked_sums", blocked_sums),
)

#: the table of sequential executors (interp, cpu): PIPELINE without its GPU-only passes, then the tail
SEQUENTIAL = (PIPELINE.remove("device_kernels").remove("async_copies").remove("shared_layout")
              .append(*SEQUENTIAL_TAIL))

#: targets whose code runs as GPU kernels: they get ``PIPELINE`` (GPU form)
GPU_TARGETS = frozenset({"cuda"})


def for_target(name) -> Pipeline:
    """The table a target runs: ``PIPELINE`` for GPU targets (``GPU_TARGETS``), ``SEQUENTIAL``
    for every other one (and for None)."""
    return PIPELINE if name in GPU_TARGETS else SEQUENTIAL


def _run_one(p: Pass, state: LowerState) -> LowerState:
    if p.level is Level.SCHEDULE:
        return p.fn(state)
    if state.func is None:
        raise PipelineError(f"IR pass {p.name!r} runs before any pass made the loop IR")
    func = p.fn(state.func)
    return state if func is state.func else dataclasses.replace(state, func=func)


def run_pipeline(state: LowerState, pipeline: Pipeline = SEQUENTIAL, stop_after: str | None = None) -> LowerState:
    """Run ``pipeline`` over ``state`` (up to and including ``stop_after``) with verification,
    dumps and timing; returns the last state (``state.func`` once ``loop_nests`` ran)."""
    passes = pipeline.passes
    if stop_after is not None:
        passes = passes[:pipeline.index(stop_after) + 1]
    verify_on, dump = config.verify(), config.dump_passes()
    if verify_on:
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
    return run_pipeline(state, Pipeline(tuple(_as_pass(p) for p in passes))).func


def lower(sched, extra_passes=(), out_contiguous=(), pipeline: Pipeline | None = None,
          target: str | None = None) -> n.LoweredFunc:
    """Lower a ``Schedule`` to loop IR through ``pipeline`` (default: ``for_target(target)``,
    ``SEQUENTIAL`` without a target), then the IR passes ``extra_passes`` appended
    (``Pass``es, (name, fn) pairs or functions)."""
    pipe = pipeline if pipeline is not None else for_target(target)
    if extra_passes:
        pipe = pipe.append(*extra_passes)
    state = run_pipeline(LowerState(sched, tuple(out_contiguous)), pipe)
    if state.func is None:
        raise PipelineError(f"the pipeline ({', '.join(pipe.names())}) made no loop IR")
    return state.func
