"""sequential_async: asynchronous copies for sequential executors (an IR pass).

Assumes: any loop IR.  Guarantees: no ``AsyncCopy``, ``CommitGroup`` or ``WaitGroup``
remain: an ``AsyncCopy`` becomes a store at issue (under its predicate; where the
predicate is false, the zero fill that cp.async's src-size 0 does), commits and waits
disappear.  Exact for race-free programs: nothing reads a copy's destination before the
wait that covers it (the SIMT executor checks that).  A no-op without asynchronous copies.
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, collect


def as_stores(s: n.AsyncCopy) -> n.Stmt:
    """The store(s) that ``s`` amounts to when copies complete at issue."""
    store = n.Store(s.buffer, s.indices, s.value)
    if s.predicate is None:
        return store
    zero = n.Store(s.buffer, s.indices, mk.as_expr(0, s.buffer.dtype))
    return n.IfThenElse(s.predicate, store, zero)


class _Sequential(Mutator):
    def visit_AsyncCopy(self, s):
        return as_stores(self.generic(s))

    def visit_CommitGroup(self, s):
        return n.Seq(())

    def visit_WaitGroup(self, s):
        return n.Seq(())


def sequential_async(func: n.LoweredFunc) -> n.LoweredFunc:
    """The ``sequential_async`` pass (see the module docstring)."""
    if not collect(func.body, lambda x: isinstance(x, (n.AsyncCopy, n.CommitGroup, n.WaitGroup))):
        return func
    return dataclasses.replace(func, body=_Sequential().visit(func.body))


__all__ = ["sequential_async", "as_stores"]
