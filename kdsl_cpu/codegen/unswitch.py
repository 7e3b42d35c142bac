"""Unswitching a tile's row guards out of its reduction loop.

In the copy of a register-tiled nest that ``full_tiles`` keeps for edge tiles,
every row of the tile is guarded inside the reduction loop::

    for r in range(K):                        # serial
        for o in range(4):  # unrolled
            if base + o < N:                  # the row guard
                for x in range(min(32, M - c)):  # vectorized: a masked row
                    acc[o, x] += X[r, x] * W[o, r]

The guards do not change while ``r`` runs, but each is a branch per row and step,
and rows under different branches cannot share their loads (the masked tile ran at
40% of a full one).  When every such guard uses no variable bound inside the loop
but those of unrolled loops of constant range, the loop is emitted twice::

    if <every guard holds for every value of its unrolled variables>: loop without them
    else:                                                             loop as it was

so a tile whose rows are all in range (every one of them in a column-edge tile)
runs the unguarded copy: the column mask alone.
"""
from __future__ import annotations

import itertools

from kdsl.ir import nodes as n
from kdsl.ir.visitor import Mutator, collect, free_vars, substitute

#: guard instances (a guard times the values of its unrolled variables) evaluated at most
MAX_CHECKS = 32


def _unrolled_ranges(s: n.For) -> dict:
    """Var -> values, for the unrolled loops of constant range inside ``s``."""
    out, bad = {}, set()
    for f in collect(s.body, lambda x: type(x) is n.For):
        if (f.kind is n.ForKind.UNROLLED and isinstance(f.min, n.Const)
                and isinstance(f.extent, n.Const)):
            r = range(int(f.min.value), int(f.min.value + f.extent.value))
            if out.setdefault(f.var, r) != r:      # one variable, two ranges (copies)
                bad.add(f.var)
        else:
            bad.add(f.var)
    return {v: r for v, r in out.items() if v not in bad}


def invariant_guards(s: n.For) -> list:
    """The row guards of ``s`` (IfThenElse nodes without else around vectorized loops) whose
    conditions use, of the variables bound inside ``s``, only unrolled loops' variables."""
    if collect(s.body, lambda x: type(x) is n.IfThenElse and x.otherwise is not None):
        return []     # a full/edge version split inside: unswitch the edge copy's loop instead
        # (here both copies would be copied: 4 nests to compile instead of 3)
    inner = {f.var for f in collect(s, lambda x: type(x) is n.For)}
    inner |= {x.var for x in collect(s, lambda x: type(x) is n.LetStmt)}
    unrolled = _unrolled_ranges(s)
    out = []
    for g in collect(s.body, lambda x: type(x) is n.IfThenElse):
        if g.otherwise is not None or collect(g.cond, lambda x: type(x) is n.Load):
            continue
        if not collect(g.then, lambda x: type(x) is n.For and x.kind is n.ForKind.VECTORIZED):
            continue
        used = free_vars(g.cond) & inner
        if used - set(unrolled):
            continue
        out.append(g)
    return out


def instances(guards: list, s: n.For) -> list | None:
    """Each guard's condition at every value of its unrolled variables (None: too many)."""
    unrolled = _unrolled_ranges(s)
    conds = []
    for g in guards:
        vs = sorted(free_vars(g.cond) & set(unrolled), key=lambda v: v.name)
        for values in itertools.product(*(unrolled[v] for v in vs)):
            conds.append(substitute(g.cond, {v: n.Const(v.dtype, k) for v, k in zip(vs, values)}))
            if len(conds) > MAX_CHECKS:
                return None
    return conds


class _Drop(Mutator):
    def __init__(self, guards):
        super().__init__()
        self.guards = {id(g) for g in guards}

    def visit_IfThenElse(self, s):
        if id(s) in self.guards:
            return self.visit(s.then)
        return self.generic(s)


def without(s: n.For, guards: list) -> n.For:
    """``s`` with ``guards`` replaced by their bodies."""
    return _Drop(guards).visit(s)
