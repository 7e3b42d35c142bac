"""Trace a small expression of loop axes (for ``set_store_predicate``)."""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import nodes as n
from . import context
from .array import Array, scalar


def trace_axis_expr(fn, ivs) -> n.Expr:
    """Call ``fn`` with one 0-d traced integer per IterVar of ``ivs``; return its expression."""
    ctx = context.TraceContext("predicate")
    with context.tracing(ctx):
        out = fn(*[scalar(iv.var, weak=True, op=iv.name, iv=iv) for iv in ivs])
        if not isinstance(out, Array) or out.ndim != 0:
            raise ScheduleError("the predicate function must return a comparison of its axes",
                                hint="e.g. lambda tx: tx == 0")
        return out.at(())
