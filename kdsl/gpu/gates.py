"""When a pass of the GPU table has work: the tests the passes start with, importable alone.

Each GPU pass returns its input itself when its test here fails (the pass modules call these
first).  ``kdsl.gpu.pipeline`` imports a pass's module only once a function passes its test,
so that a kernel without tensor cores, pipelined copies, virtual threads, tiled main loops or
scan tiles (a row softmax) compiles without importing those passes (issue 26 item 4: a cold
process's first kernel).

Assumes: GPU-table IR (or, for the schedule-level tests, a ``LowerState``).
Guarantees: each test is cheap (a walk over statements, never expressions) and exact in one
direction: where it is False the pass changes nothing.
"""
from __future__ import annotations

from ..ir import nodes as n
from ..ir.visitor import any_statement


def wants_tensorize(func: n.LoweredFunc) -> bool:
    """``tensorize``: the function has tensorize requests."""
    return bool(func.tensorize)


def has_pipelined_allocations(func: n.LoweredFunc) -> bool:
    """``software_pipeline``: an allocation is multi-buffered."""
    return any_statement(func.body, lambda x: type(x) is n.Allocate and x.stages > 1)


def has_pipelined_stages(state) -> bool:
    """``pipeline_legality``: a stage is pipelined (``double_buffer``/``pipeline``)."""
    return any(h.buffer_stages > 1 for h in state.sched.stages)


def has_vthreads(func: n.LoweredFunc) -> bool:
    """``vthread``: a loop is bound to a virtual thread."""
    return any_statement(func.body, lambda x: type(x) is n.For and x.thread is not None
                         and x.thread.is_vthread)


def is_block_loop(s) -> bool:
    return type(s) is n.For and s.thread is not None and s.thread.is_block


def has_main_loop(body) -> bool:
    """A serial loop with a barrier inside: the turns of a tiled kernel."""
    return any_statement(body, lambda x: type(x) is n.For and x.kind is not n.ForKind.BOUND
                         and any_statement(x.body, lambda y: type(y) is n.Barrier))


def has_tiled_blocks(func: n.LoweredFunc) -> bool:
    """``interior_blocks``: a block loop, and a tiled main loop (it versions only the block
    bodies that hold one)."""
    return any_statement(func.body, is_block_loop) and has_main_loop(func.body)


def scan_tile_handles(state) -> list:
    """``scan_tiles``: the stage handles whose scan the GPU default schedule marked to be
    scanned tile by tile (empty: nothing to do)."""
    return [h for h in state.need("handles", by="scan_tiles")
            if getattr(getattr(h.stage, "scan", None), "tile", None) is not None]


__all__ = ["wants_tensorize", "has_pipelined_allocations", "has_pipelined_stages", "has_vthreads",
           "is_block_loop", "has_main_loop", "has_tiled_blocks", "scan_tile_handles"]
