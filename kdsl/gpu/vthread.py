"""vthread: virtual-thread loops unrolled into each thread's body, interleaved (an IR pass).

Assumes: loop IR; loops bound to ``vthread.x/y`` have constant extents.  Virtual threads are
independent, like the threads of a block (a race-free program: one virtual thread never
reads what another wrote, except through shared memory across a barrier).

Guarantees: no loop bound to a vthread tag remains.  As TVM's InjectVirtualThread, the
virtual-thread loop ``for v in [m, m+K)`` is pushed down to the innermost statements,
where its K copies (v replaced by m, ..., m+K-1) sit next to each other:
- through a sequence (fission), a loop, an ``if`` or a ``let`` that does not depend on v
  (interchange, legal since virtual threads are independent);
- through the allocation of a local buffer, which gets a leading dimension of K (one copy
  per virtual thread, indexed by v);
- barriers, commit_group and wait_group stay single: all virtual threads reach them
  together (K commits would change the group count a wait refers to);
- a statement that does not use v and reads none of the buffers it writes (a cooperative
  copy into shared memory, an init) is the same for every virtual thread: it stays single
  (running it K times would do the same K times; an asynchronous copy would even be issued
  K times into one slot);
- any other statement (a store, an asynchronous copy, or a loop/if/let depending on v, a
  shared allocation) is copied K times in order.
So ``for vy: for vx: for ty: for tx: for i: C.local[i] = ...`` becomes
``for ty: for tx: for i: {C.local[0, 0, i] = ...; C.local[0, 1, i] = ...; ...}``, each
thread's outputs spread over the tile as the schedule bound them.  A no-op without vthreads.
"""
from __future__ import annotations

import dataclasses

from ..errors import ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify_stmt
from ..ir.visitor import Mutator, any_statement, collect, collect_stmts, substitute, uses_var
from .gates import has_vthreads

_SINGLE = (n.Barrier, n.CommitGroup, n.WaitGroup, n.WgmmaWait, n.WgmmaCommit)


class _Replicate(Mutator):
    """Accesses of local buffers allocated inside a virtual thread get its index first."""

    def __init__(self, old: n.Buffer, new: n.Buffer, v: n.Var):
        super().__init__()
        self.old, self.new, self.v = old, new, v

    def visit_Load(self, e):
        e = self.generic(e)
        return n.Load(e.dtype, self.new, (self.v,) + e.indices) if e.buffer is self.old else e

    def visit_Store(self, s):
        s = self.generic(s)
        return n.Store(self.new, (self.v,) + s.indices, s.value) if s.buffer is self.old else s


class _Injector:
    """Push one virtual-thread loop (var ``v``, values ``m..m+K-1``) down to the statements."""

    def __init__(self, loop: n.For, K: int):
        self.v, self.m, self.K = loop.var, loop.min, K

    def copies(self, s) -> n.Stmt:
        return n.Seq(tuple(substitute(s, {self.v: mk.add(self.m, c)}) for c in range(self.K)))

    def inject(self, s) -> n.Stmt:
        v = self.v
        if isinstance(s, _SINGLE):
            return s
        if isinstance(s, n.Seq):
            return n.Seq(tuple(self.inject(x) for x in s.stmts))
        if isinstance(s, n.For) and not (uses_var(s.min, v) or uses_var(s.extent, v)):
            return dataclasses.replace(s, body=self.inject(s.body))
        if isinstance(s, n.IfThenElse) and not uses_var(s.cond, v):
            return n.IfThenElse(s.cond, self.inject(s.then),
                                None if s.otherwise is None else self.inject(s.otherwise))
        if isinstance(s, n.LetStmt) and not uses_var(s.value, v):
            return dataclasses.replace(s, body=self.inject(s.body))
        if isinstance(s, n.Allocate) and s.buffer.scope is n.Scope.LOCAL:
            b = s.buffer
            new = dataclasses.replace(b, shape=(mk.as_expr(self.K),) + tuple(b.shape), strides=None)
            if b.strides is not None:
                raise ScheduleError(f"vthread: the local buffer {b.name} has explicit strides and "
                                    "cannot be given one copy per virtual thread",
                                    hint="give the local stage default strides (no storage_align) when it is inside a vthread loop")
            body = _Replicate(b, new, mk.sub(v, self.m)).visit(s.body)
            return dataclasses.replace(s, buffer=new, body=self.inject(body))
        if not uses_var(s, v) and _idempotent(s):
            return s      # the same for every virtual thread (a cooperative copy): once
        return self.copies(s)


def _idempotent(s) -> bool:
    """Running ``s`` twice in a row does what running it once does: it reads none of the
    buffers it writes (a copy, an init; not an accumulation)."""
    written = {x.buffer for x in collect_stmts(s, lambda x: isinstance(x, (n.Store, n.AsyncCopy)))}
    return not any(x.buffer in written for x in collect(s, lambda x: isinstance(x, n.Load)))


class _VThreads(Mutator):
    def visit_For(self, s: n.For):
        s = self.generic(s)                # inner virtual threads first
        if s.thread is None or not s.thread.is_vthread:
            return s
        if not isinstance(s.extent, n.Const):
            raise ScheduleError(f"vthread: the loop {s.var.name} bound to {s.thread.value} has a "
                                "non-constant extent; virtual threads are unrolled",
                                hint="split the axis with nparts=<a small int> and bind the outer part")
        return _Injector(s, int(s.extent.value)).inject(s.body)


def inject_vthreads(func: n.LoweredFunc) -> n.LoweredFunc:
    """The ``vthread`` pass (see the module docstring)."""
    if not has_vthreads(func):
        return func
    body = simplify_stmt(_VThreads().visit(func.body))
    return dataclasses.replace(func, body=body)


__all__ = ["inject_vthreads"]
