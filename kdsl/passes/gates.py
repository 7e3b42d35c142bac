"""When a core pass has work: the tests the passes start with, importable alone.

Each pass returns its input itself when its test here finds nothing (the pass modules call
these first).  ``kdsl.passes.pipeline`` imports a pass's module only once a function passes
its test (``Deferred``), so that a kernel without scans or padded register tiles compiles
without importing those passes (issue 26 item 4: a cold process's first kernel).

Assumes: a ``LowerState`` (the schedule-level passes' input).
Guarantees: each test is cheap (a loop over the stages) and exact in one direction: where it
finds nothing the pass changes nothing.
"""
from __future__ import annotations


def scan_stages(state) -> list:
    """``scan_legality``: the (handle, ScanInfo) of the ``kd.scan`` stages with per-step
    reductions to check and attach (empty: nothing to do)."""
    out = []
    for h in state.sched.stages:
        info = getattr(h.stage, "scan", None)
        if info is not None and hasattr(info, "init_steps"):
            out.append((h, info))
    return out


def has_padded_stages(state) -> bool:
    """``padded_compute``: a stage reads a zero-padded cache (``cache_read(pad=True)``)."""
    return any(h.pad for h in state.need("domains", by="padded_compute"))


__all__ = ["scan_stages", "has_padded_stages"]
