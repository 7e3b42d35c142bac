"""Guard placement helpers of the ``loop_nests`` pass (not a pass), and ``combine_store``: the
store of a combiner's result (reduction nests, cross-thread reductions and their lowering).

A guard goes right inside the innermost loop whose variable it uses
(``guards_by_depth``); conditions that load memory are nested inside the pure
index conditions (``guard_all``), because IR ``and`` does not short-circuit.
"""
from __future__ import annotations

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import collect, substitute


def seq(stmts) -> n.Stmt:
    """One statement for ``stmts`` (None dropped, nested Seqs flattened)."""
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, n.Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else n.Seq(tuple(flat))


def guard(cond, stmt):
    """``stmt`` under ``cond`` (None: unguarded)."""
    return stmt if cond is None else n.IfThenElse(cond, stmt)


def guard_all(conds, stmt):
    """``stmt`` under every condition of ``conds``; those that load memory (a reduction's
    ``where=``, a store predicate reading data) go in an inner ``if``, so that they run only
    where the index guards hold (IR ``and`` does not short-circuit)."""
    loads = [c for c in conds if collect(c, lambda x: isinstance(x, n.Load))]
    pure = [c for c in conds if not any(c is d for d in loads)]
    return guard(mk.all_of(pure), guard(mk.all_of(loads), stmt))


def guards_by_depth(leaves, guards) -> dict:
    """depth -> the guards to put there: depth k is right outside loop ``leaves[k]`` (inside
    ``leaves[k-1]``), depth ``len(leaves)`` around the innermost statement."""
    pos = {iv.var: k for k, iv in enumerate(leaves)}
    at = {}
    for g in guards:
        used = [pos[v] + 1 for v in collect(g, lambda x: isinstance(x, n.Var)) if v in pos]
        at.setdefault(max(used, default=0), []).append(g)
    return at


def combine_store(comb, lhs, rhs, store):
    """The statement storing ``comb(lhs, rhs)``: ``store(j, value)`` per result (tuple
    combiners bind every result to a fresh Var first, so that no store sees another's)."""
    mapping = {v: e for v, e in zip(comb.lhs, lhs)}
    mapping.update({v: e for v, e in zip(comb.rhs, rhs)})
    results = [substitute(r, mapping) for r in comb.result]
    if len(results) == 1:
        return store(0, results[0])
    temps = [n.var(f"{comb.name}_{j}", r.dtype) for j, r in enumerate(results)]
    stmt = seq([store(j, t) for j, t in enumerate(temps)])
    for t, r in reversed(list(zip(temps, results))):
        stmt = n.LetStmt(t, r, stmt)
    return stmt
