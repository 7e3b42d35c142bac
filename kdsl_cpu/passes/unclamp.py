"""unclamp: peel the iterations where an index clamp can bite, so the rest reads plainly.

kdsl.frontend.access clamps the index of a read that is in range only where its
``kd.where`` condition holds (``x[max(i - 1, 0)]`` in a padded stencil), because
backends evaluate both branches.  In an innermost loop over ``v`` such a clamp,
``max(v + b, L)`` or ``min(v + b, H)`` (``v`` with coefficient 1; ``b``, ``L``, ``H``
free of ``v``), is inactive for ``v >= L - b`` or ``v <= H - b``.  This pass splits
the loop into a head, a middle and a tail; in the middle the clamps are dropped, so
its loads are contiguous again and vectorize, and only a few boundary iterations
keep them:

    for v in range(m, s1): body            # head: clamped
    for v in range(s1, s2): body'          # middle: no clamp
    for v in range(s2, m + extent): body   # tail: clamped

Assumes: simplified index expressions (kdsl.ir.simplify's linear form).
Guarantees: the same iterations run the same values (a clamp is dropped only where it
is the identity); unrolled, parallel and thread-bound loops and loops holding loops
are left alone.  Backends that compile loops (cpu) append it after ``tighten_loops``.
"""
from __future__ import annotations

import dataclasses

from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import Linear, linear, simplify
from kdsl.ir.visitor import Mutator, collect, substitute, uses_var

_KINDS = (n.ForKind.SERIAL, n.ForKind.VECTORIZED)
#: clamps one loop is split on, at most (each adds a boundary)
MAX_CLAMPS = 8


def _clamp(e, var):
    """(inner, ``v`` threshold, is_lower) when ``e`` is a clamp of ``var + b``, else None."""
    if type(e) is not n.Binary or e.op not in (n.BinOp.MIN, n.BinOp.MAX) or not e.dtype.is_int:
        return None
    for inner, limit in ((e.a, e.b), (e.b, e.a)):
        if uses_var(limit, var) or not uses_var(inner, var):
            continue
        lin = linear(inner)
        if lin.terms.get(var) != 1 or any(uses_var(t, var) for t in lin.terms if t is not var):
            continue
        rest = Linear(lin.dtype, {t: k for t, k in lin.terms.items() if t is not var},
                      lin.const).to_expr()
        # max(v + b, L) is v + b once v >= L - b; min(v + b, H) once v <= H - b
        return inner, mk.sub(limit, rest), e.op is n.BinOp.MAX
    return None


def _load_clamps(body, var) -> list:
    found = []
    for ld in collect(body, lambda x: isinstance(x, n.Load)):
        for idx in ld.indices:
            for c in collect(idx, lambda x: _clamp(x, var) is not None):
                if all(c != f for f in found):
                    found.append(c)
    return found


class _Drop(Mutator):
    """Replace the given clamp nodes (structurally) by their inner expression."""

    def __init__(self, clamps: list, var):
        super().__init__()
        self.clamps, self.var = clamps, var

    def visit_Binary(self, e):
        e2 = self.generic(e)
        if any(e2 == c for c in self.clamps):
            return _clamp(e2, self.var)[0]
        return e2


class _Unclamp(Mutator):
    def visit_For(self, s: n.For):
        s = self.generic(s)
        if s.kind not in _KINDS or collect(s.body, lambda x: isinstance(x, n.For)):
            return s
        clamps = _load_clamps(s.body, s.var)
        if not clamps or len(clamps) > MAX_CLAMPS:
            return s
        end = mk.add(s.min, s.extent)
        s1, s2 = s.min, end
        for c in clamps:
            _inner, at, lower = _clamp(c, s.var)
            if lower:
                s1 = mk.max_(s1, at)
            else:
                s2 = mk.min_(s2, mk.add(at, 1))
        s1 = simplify(mk.min_(s1, end))
        s2 = simplify(mk.max_(s1, s2))
        middle = _Drop(clamps, s.var).visit(s.body)
        parts = []
        for lo, hi, body in ((s.min, s1, s.body), (s1, s2, middle), (s2, end, s.body)):
            extent = simplify(mk.sub(hi, lo))
            if type(extent) is n.Const and extent.value <= 0:
                continue
            var = s.var if body is middle else n.Var(s.var.dtype, s.var.name)
            b = body if var is s.var else substitute(body, {s.var: var})
            parts.append(dataclasses.replace(s, var=var, min=lo, extent=extent, body=b))
        return parts[0] if len(parts) == 1 else n.Seq(tuple(parts))


def unclamp(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass: innermost loops with clamped loads split into head, middle and tail."""
    body = _Unclamp().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
