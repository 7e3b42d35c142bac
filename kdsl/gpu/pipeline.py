"""The GPU table: the core passes with the GPU passes inserted, ending with GPU-form loop IR.

``PIPELINE`` = ``kdsl.passes.pipeline.CORE`` with, in order:

- ``pipeline_legality`` (schedule, after ``placement``; ``software_pipeline.check_pipelines``):
  pipelined stages still qualify (a primitive after ``double_buffer`` may have broken it)
- ``scan_tiles`` (schedule, after ``loop_nests``; ``scan_tiles.scan_tiles``): the tiles of a
  scan marked by the GPU default schedule scanned by a block's threads together (issue 25)
- ``tensorize`` (IR, before ``simplify``; ``tensorize.tensorize``): tensorized nests ->
  warp-level WMMA statements
- after ``simplify``:
  ``software_pipeline`` (pipelined copies become rings of shared buffers filled by
  asynchronous copies), ``vthread`` (virtual-thread loops unrolled, interleaved), ``sync``
  (barriers for shared memory, guards predicated where a barrier would be under divergence),
  ``interior_blocks`` (a block's tiled main loop versioned: a guard-free copy for the blocks
  inside the arrays), ``full_thread_tiles`` (``thread_tiles``: the same for a thread's
  register tile), ``async_copies`` (a block's one-shot copies global -> shared become
  asynchronous copies), ``coalesced_fallbacks`` (cooperative vector copies get an
  element-by-element alternative whose warps copy whole rows), ``shared_layout`` (padded
  shared rows against bank conflicts) and ``device_kernels`` (the host program of GPU kernels
  with their launches and workspaces)

The passes most kernels skip (``pipeline_legality``, ``scan_tiles``, ``tensorize``,
``software_pipeline``, ``vthread``, ``interior_blocks``) are ``Deferred``: their modules are
imported when a kernel first has work for them (``kdsl.passes.pipeline.Deferred``;
``kdsl.gpu.gates``: the tests those passes start with).  The table's verifier adds the GPU rules (``kdsl.gpu.verify``).  ``GPU_TARGETS`` are the
targets whose code runs as GPU kernels; ``for_target(name)`` gives a target's table: this
one for them, ``kdsl.passes.pipeline.SEQUENTIAL`` for every other target (and None).
``sequential.py`` holds the two passes that make GPU-form IR sequential again
(``sequential_kernels``, ``lower_async_copies``) for executors that meet it;
``GPU_SEQUENTIAL`` is the table with which the tests run the GPU passes' output on the
sequential interpreter (no target runs it).

Assumes: what ``kdsl.passes.pipeline`` says of its passes.
Guarantees: GPU-form IR (DeviceKernels at the root, barriers, CrossThreadReduce, AsyncCopy,
WMMA statements), verified with the GPU rules under ``config.verify()``.
"""
from __future__ import annotations

import dataclasses

from ..ir import nodes as n
from ..passes import pipeline as _core
from ..passes.pipeline import CORE, Deferred, Level, Pass, Pipeline, deferred  # noqa: F401 (Deferred)
from ..passes.pipeline import lower as lower_with
from . import gates
from .async_copies import async_copies
from .coalesced_fallbacks import coalesced_fallbacks
from .device_kernels import device_kernels
from .shared_layout import shared_layout
from .sync import sync
from .thread_tiles import full_thread_tiles
from .verify import verify


def _deferred(name: str, module: str, fn: str, has_work, level=Level.IR) -> Pass:
    return deferred(name, f"{__package__}.{module}", fn, has_work, level)


#: every pass from a Schedule to GPU-form loop IR, in order (the table of GPU targets)
PIPELINE = dataclasses.replace(
    CORE.insert_after("placement", _deferred("pipeline_legality", "software_pipeline", "check_pipelines",
                                             gates.has_pipelined_stages, Level.SCHEDULE))
        .insert_after("loop_nests", _deferred("scan_tiles", "scan_tiles", "scan_tiles",
                                              gates.scan_tile_handles, Level.SCHEDULE))
        .insert_before("simplify", _deferred("tensorize", "tensorize", "tensorize", gates.wants_tensorize))
        .append(_deferred("software_pipeline", "software_pipeline", "software_pipeline",
                          gates.has_pipelined_allocations),
                _deferred("vthread", "vthread", "inject_vthreads", gates.has_vthreads),
                Pass("sync", sync),
                _deferred("interior_blocks", "interior_blocks", "interior_blocks", gates.has_tiled_blocks),
                Pass("full_thread_tiles", full_thread_tiles),
                Pass("async_copies", async_copies),
                Pass("coalesced_fallbacks", coalesced_fallbacks),
                Pass("shared_layout", shared_layout),
                Pass("device_kernels", device_kernels)),
    verifier=verify)


def _gpu_sequential() -> Pipeline:
    """The GPU passes checked by a sequential executor (the GPU-form interpreter of the tests):
    the GPU table without the passes only a GPU can run (``async_copies``, ``shared_layout``,
    ``device_kernels``), then the core's sequential passes with the GPU form undone around
    them (made on first use: no target runs it)."""
    from .sequential import lower_async_copies, sequential_kernels
    seq = _core.sequential()
    return dataclasses.replace(
        PIPELINE.remove("device_kernels").remove("async_copies").remove("shared_layout")
                .append(Pass("sequential_kernels", sequential_kernels),
                        *seq.passes[seq.index("simplify") + 1:seq.index("blocked_sums")],
                        Pass("lower_async_copies", lower_async_copies),
                        *seq.passes[seq.index("blocked_sums"):]),
        verifier=None)


def __getattr__(name):
    """``GPU_SEQUENTIAL`` (made on first use) and ``SEQUENTIAL`` (the core's)."""
    if name == "GPU_SEQUENTIAL":
        table = globals()["GPU_SEQUENTIAL"] = _gpu_sequential()
        return table
    if name == "SEQUENTIAL":
        return _core.sequential()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: targets whose code runs as GPU kernels: they get ``PIPELINE`` (GPU form)
GPU_TARGETS = frozenset({"cuda"})


def for_target(name) -> Pipeline:
    """The table a target runs: ``PIPELINE`` for GPU targets (``GPU_TARGETS``), the core's
    ``SEQUENTIAL`` for every other one (and for None)."""
    return PIPELINE if name in GPU_TARGETS else _core.sequential()


def lower(sched, extra_passes=(), out_contiguous=(), pipeline: Pipeline = PIPELINE) -> n.LoweredFunc:
    """``sched`` lowered to GPU-form loop IR through ``pipeline`` (then ``extra_passes``)."""
    return lower_with(sched, extra_passes, out_contiguous, pipeline=pipeline)


def lower_sequential(sched, extra_passes=(), out_contiguous=(), pipeline: Pipeline | None = None) -> n.LoweredFunc:
    """``sched`` lowered through ``GPU_SEQUENTIAL``: the GPU passes' IR, made sequential."""
    if pipeline is None:
        pipeline = __getattr__("GPU_SEQUENTIAL") if "GPU_SEQUENTIAL" not in globals() \
            else globals()["GPU_SEQUENTIAL"]
    return lower_with(sched, extra_passes, out_contiguous, pipeline=pipeline)


__all__ = ["PIPELINE", "GPU_SEQUENTIAL", "GPU_TARGETS", "for_target", "lower", "lower_sequential"]
