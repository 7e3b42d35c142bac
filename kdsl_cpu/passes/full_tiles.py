"""full_tiles: a guard-free copy of each loop nest for the tiles that need no guard.

A split by a constant factor ``F`` lowers to ``for x in range(F): if x + c < N:``
(a *tile guard*).  Inside a tile that lies wholly within the array
(``c + F <= N``) the guard always holds.  This pass finds the outermost loop
``L`` below which every tile guard's ``c`` and ``N`` are fixed (they use no
variable bound at or inside ``L``) and rewrites it as

    if c1 + F1 <= N1 and c2 + F2 <= N2 ...:  L with those guards removed
    else:                                    L as it was

so the common, full tiles run with constant trip counts (LLVM can then unroll
them completely and keep a register block of accumulators across the
reduction loop); only edge tiles pay for guards.  ``L``'s own guard is left to
``tighten_loops``.

Assumes: simplified index expressions; runs before ``tighten_loops``.
Guarantees: the same iterations run the same bodies.  Thread-bound loops are
neither versioned nor looked into (their extents are launch sizes).
"""
from __future__ import annotations

import dataclasses

from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import simplify
from kdsl.ir.visitor import Mutator, free_vars
from kdsl.ir.conditions import conjuncts, guard_limit

#: copies are only made for nests with at most this many tile guards
MAX_GUARDS = 4


def _tile_guard(s):
    """(limit, extent, rest-of-condition) when For ``s`` is a constant-extent tile guard."""
    if type(s) is not n.For or not isinstance(s.extent, n.Const) or s.kind is n.ForKind.BOUND:
        return None
    body = s.body
    if type(body) is not n.IfThenElse or body.otherwise is not None:
        return None
    conds = conjuncts(body.cond)
    for k, c in enumerate(conds):
        lim = guard_limit(c, s.var)
        if lim is not None:
            return lim, s, mk.all_of(conds[:k] + conds[k + 1:])
    return None


def _guards(s, bound: set, out: list) -> bool:
    """Collect tile guards below ``s``; False when some guard depends on a var in ``bound``."""
    t = type(s)
    if t is n.For:
        if s.kind is n.ForKind.BOUND:
            return False
        g = _tile_guard(s)
        inner_bound = bound | {s.var}
        if g is not None:
            lim, loop, _ = g
            if free_vars(lim) & bound or free_vars(loop.min) & bound:
                return False
            out.append(g)
            return _guards(loop.body.then, inner_bound, out)
        return _guards(s.body, inner_bound, out)
    if t is n.Seq:
        return all(_guards(x, bound, out) for x in s.stmts)
    if t is n.IfThenElse:
        return _guards(s.then, bound, out) and (s.otherwise is None or
                                                _guards(s.otherwise, bound, out))
    if t in (n.Allocate, n.LetStmt):
        extra = {s.var} if t is n.LetStmt else set()
        return _guards(s.body, bound | extra, out)
    return True


class _Strip(Mutator):
    """Remove the guards of the given tile loops (by identity; other conjuncts stay)."""

    def __init__(self, loops: dict):
        super().__init__()
        self.loops = loops

    def visit_For(self, s):
        rest = self.loops.get(id(s), False)
        if rest is False:
            return self.generic(s)
        body = s.body.then if rest is None else n.IfThenElse(rest, s.body.then)
        return dataclasses.replace(s, body=self.visit(body))


class _Version(Mutator):
    def visit_For(self, s):
        if s.kind is n.ForKind.BOUND:
            return s
        own = _tile_guard(s)
        inner = own[1].body.then if own is not None else s.body
        found: list = []
        if _guards(inner, {s.var}, found) and 0 < len(found) <= MAX_GUARDS:
            full = simplify(mk.all_of([mk.compare(n.CmpOp.LE, mk.add(loop.min, loop.extent), lim)
                                       for lim, loop, _ in found]))
            stripped = _Strip({id(loop): rest for _, loop, rest in found}).visit(s)
            if isinstance(full, n.Const):
                return stripped if full.value else s
            return n.IfThenElse(full, stripped, s)
        return self.generic(s)


def full_tiles(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass: version loop nests so full tiles run without tile guards."""
    body = _Version().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
