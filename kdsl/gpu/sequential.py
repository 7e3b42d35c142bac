"""GPU-form loop IR made runnable by sequential executors again (GPU_PLAN, "The execution model
of BOUND loops": sequential executors run BOUND loops as loops).  The sequential table
(``kdsl.passes.pipeline.SEQUENTIAL``) never makes GPU form, so neither pass is in a target's
table: they serve a table built as the GPU table plus these, hand-built GPU-form IR, and the
interpreter's handlers of GPU-form statements (``as_stores``).

- ``sequential_kernels``: every ``DeviceKernel`` is replaced by its body (its block and thread
  loops are BOUND loops, which run as loops).
- ``lower_async_copies``: ``AsyncCopy`` becomes a ``Store`` at issue (a ``predicate`` false
  stores zero, cp.async's zero fill), ``CommitGroup``/``WaitGroup`` disappear (and the
  ``WgmmaCommit``/``WgmmaWait`` of asynchronous tensor-core products, which run at issue).  Exact: nothing
  may read a copy's destination before the wait that covers it.  (The async-copy semantics
  are those of ``software_pipeline``; the interpreter runs hand IR holding them the same way.)

Assumes: loop IR; DeviceKernels only at the root (``device_kernels``).
Guarantees: no DeviceKernel, AsyncCopy, CommitGroup or WaitGroup remains; every other
statement is unchanged, and a function without them is returned as the same object (the
check walks statements only, never expressions: CPU compile time does not move).
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, allocate_chain, any_statement, rewrap

_ASYNC = (n.AsyncCopy, n.CommitGroup, n.WaitGroup, n.WgmmaCommit, n.WgmmaWait)


def sequential_kernels(func: n.LoweredFunc) -> n.LoweredFunc:
    """Replace each root DeviceKernel by its body (see the module docstring)."""
    chain, inner = allocate_chain(func.body)
    stmts = inner.stmts if type(inner) is n.Seq else (inner,)
    if not any(type(s) is n.DeviceKernel for s in stmts):
        return func
    out = tuple(s.body if type(s) is n.DeviceKernel else s for s in stmts)
    body = out[0] if len(out) == 1 else n.Seq(out)
    return dataclasses.replace(func, body=rewrap(chain, body))


def as_stores(s: n.AsyncCopy) -> n.Stmt:
    """What ``s`` amounts to when copies complete at issue: its store, under its predicate
    (where the predicate is false, the zero fill of cp.async's src-size 0)."""
    store = n.Store(s.buffer, s.indices, s.value)
    if s.predicate is None:
        return store
    zero = n.Store(s.buffer, s.indices, mk.as_expr(0, s.buffer.dtype))
    return n.IfThenElse(s.predicate, store, zero)


class _Async(Mutator):
    def visit_AsyncCopy(self, s):
        return as_stores(s)

    def visit_CommitGroup(self, s):
        return n.Seq(())

    def visit_WaitGroup(self, s):
        return n.Seq(())

    def visit_WgmmaWait(self, s):       # products run at issue
        return n.Seq(())

    visit_WgmmaCommit = visit_WgmmaWait

    def visit_Seq(self, s):
        out = []
        for x in s.stmts:
            y = self.visit(x)
            if type(y) is n.Seq and not y.stmts:
                continue
            out.append(y)
        if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
            return s
        return n.Seq(tuple(out))

    # expressions hold no statements: never walk them
    def visit_Store(self, s):
        return s


def lower_async_copies(func: n.LoweredFunc) -> n.LoweredFunc:
    """AsyncCopy -> Store at issue, CommitGroup/WaitGroup -> nothing (module docstring)."""
    if not any_statement(func.body, lambda x: type(x) in _ASYNC):
        return func
    return dataclasses.replace(func, body=_Async().visit(func.body))


__all__ = ["sequential_kernels", "lower_async_copies", "as_stores"]
