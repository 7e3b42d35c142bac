"""tighten_loops: move a loop's bounds guard into its extent.

An uneven split lowers to ``for x in range(F): if base + x < N: body``; the
guard is evaluated every iteration and stops LLVM from vectorizing the loop
cleanly.  When a loop's whole body is such an ``if`` and one conjunct of the
condition is ``x + c < N`` or ``x + c <= N`` (``x`` with coefficient 1,
``c`` and ``N`` free of ``x``), this pass shrinks the loop instead:

    for x in range(min(F, max(N - c - min, 0))): body     # other conjuncts stay an if

Assumes: simplified index expressions (kdsl.ir.simplify's linear form).
Guarantees: the same iterations run the body; thread-bound loops (whose
extent is the launch size) and unrolled loops are left alone.  Backends that run loops on one
core (cpu) append it to their pipeline.
"""
from __future__ import annotations

import dataclasses

from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.conditions import conjuncts, guard_limit
from kdsl.ir.simplify import simplify
from kdsl.ir.visitor import Mutator

#: unrolled loops keep their constant extent (and the guard): a full unroll needs it
_KINDS = (n.ForKind.SERIAL, n.ForKind.VECTORIZED, n.ForKind.PARALLEL)


class _Tighten(Mutator):
    def visit_For(self, s: n.For):
        s = self.generic(s)
        body = s.body
        if s.kind in _KINDS and type(body) in (n.Seq, n.Allocate) and isinstance(s.extent, n.Const):
            return _dead_tail(s)
        if s.kind not in _KINDS or type(body) is not n.IfThenElse or body.otherwise is not None:
            return s
        conds = conjuncts(body.cond)
        for k, c in enumerate(conds):
            lim = guard_limit(c, s.var)
            if lim is None:
                continue
            room = mk.max_(mk.sub(lim, s.min), mk.as_expr(0, lim.dtype))
            extent = simplify(mk.min_(s.extent, room))
            rest = mk.all_of(conds[:k] + conds[k + 1:])
            new_body = body.then if rest is None else n.IfThenElse(rest, body.then)
            return dataclasses.replace(s, extent=extent, body=new_body)
        return s


def _dead_tail(s: n.For) -> n.For:
    """A chunk loop whose body (a sequence) does nothing from some ``x`` on stops there
    (kdsl_cpu/passes/dead_iterations.py)."""
    from .dead_iterations import dead_from
    lim = dead_from(s.body, s.var)
    if lim is None or lim is True:
        return s
    room = mk.max_(mk.sub(lim, s.min), mk.as_expr(0, lim.dtype))
    return dataclasses.replace(s, extent=simplify(mk.min_(s.extent, room)))


def tighten_loops(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass: every guarded loop of ``func`` with its guard folded into the extent."""
    body = _Tighten().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
