"""The lowering pipeline: a table of passes and the runner around it.

``lower(sched)`` converts the schedule to loop IR (``schedule_ops``) and then
runs every pass of ``PASSES`` plus the backend's ``extra_passes`` in order.
Each pass is a pure function ``LoweredFunc -> LoweredFunc``.  The runner
verifies the IR after each pass when ``KDSL_VERIFY=1`` or under pytest,
prints the IR after each pass with ``KDSL_DUMP=passes`` (``KDSL_DUMP=1`` prints
the final IR), and records pass timings in ``func.attrs["pass_times"]``.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time

from ..ir import nodes as n
from .blocked_sums import blocked_sums
from .schedule_ops import schedule_to_ir
from .simplify import simplify_pass

#: (name, pass) in order; backends append theirs through ``extra_passes``
PASSES = (
    ("simplify", simplify_pass),
    ("blocked_sums", blocked_sums),
)


def _verify_enabled() -> bool:
    if os.environ.get("KDSL_VERIFY") is not None:
        return os.environ["KDSL_VERIFY"] not in ("", "0")
    return "pytest" in sys.modules


def _dump_mode() -> str:
    return os.environ.get("KDSL_DUMP", "")


def run_passes(func: n.LoweredFunc, passes) -> n.LoweredFunc:
    """Run ``passes`` ((name, fn) pairs) over ``func`` with verification, dumps and timing."""
    verify_on, dump = _verify_enabled(), _dump_mode()
    if verify_on:
        from ..ir.verifier import verify
    times = dict(func.attrs.get("pass_times", {}))
    if verify_on:
        verify(func)
    for name, fn in passes:
        t0 = time.perf_counter()
        func = fn(func)
        times[name] = times.get(name, 0.0) + time.perf_counter() - t0
        if verify_on:
            verify(func)
        if dump == "passes":
            print(f"# ---- after {name}\n{func}", file=sys.stderr)
    attrs = dict(func.attrs)
    attrs["pass_times"] = times
    return dataclasses.replace(func, attrs=attrs)


def lower(sched, extra_passes=(), out_contiguous=()) -> n.LoweredFunc:
    """Lower a ``Schedule`` to loop IR through ``PASSES`` and the backend's ``extra_passes``."""
    t0 = time.perf_counter()
    func = schedule_to_ir(sched, out_contiguous)
    func.attrs["pass_times"] = {"schedule_ops": time.perf_counter() - t0}
    if _dump_mode() == "passes":
        print(f"# ---- after schedule_ops\n{func}", file=sys.stderr)
    extra = tuple(p if isinstance(p, tuple) else (getattr(p, "__name__", "pass"), p) for p in extra_passes)
    return run_passes(func, PASSES + extra)
