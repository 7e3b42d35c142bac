"""single_thread: work that a block's threads would all repeat runs on one thread (issue 24).

Inside a GPU kernel, a statement outside the loops bound to some ``threadIdx`` tag of the
block runs in every thread along that tag (CUDA semantics, GPU_PLAN's execution model).  For
a pure value kept per thread (a local) that is what the schedule means; for a side effect on
memory the threads share it is a race: a stage attached at a block loop whose loops are not
bound (``C.compute_at(O, bx)``: every thread accumulates into the same shared ``C``), a copy
bound to ``threadIdx.x`` only in a block that also spreads over ``threadIdx.y``, an epilogue
stored after a cross-thread reduction outside its ``threadIdx.x`` loop (every thread stores
the element, from a value only thread 0 holds).

``pin_unspread(kernel)`` puts each such statement on one thread.  A store to shared or global
memory *misses* a thread tag of the block (extent > 1) when neither its indices nor the
conditions around it depend on that tag's thread index (a loop bound to the tag, or a let of
one): every thread along the tag would store the same element.  The statement is wrapped in
a loop of one iteration bound to each missing tag, i.e. it runs on the threads whose index
along those tags is 0 (a masked thread loop: the SIMT executor and the CUDA code generator
run it on the threads below its extent; sequential executors run it once).  ``sync`` then
puts a barrier between that thread's writes and the other threads' reads (an access inside
such a *pinned* loop is by thread 0 along its tag).  The wrapped unit is the largest
statement whose stores all miss the same tags and that holds no thread loop of a missing
tag, no barrier, cross-thread reduction or warp-level statement, no shared allocation and no
store to a local buffer allocated outside it (a local is per thread: the other threads would
lose their value).  Local stores, cross-thread reductions (their results are per-thread
values) and warp statements are left alone.

In a kernel holding tensor-core (warp-level) statements the lanes of each warp are threads
along ``threadIdx.x`` although no loop binds it; that tag counts among the block's tags.

Assumes: loop IR of one kernel (``sync`` calls it first on each kernel, before barriers are
placed), thread extents constant.
Guarantees: the same program for sequential executors (loops of one iteration); on a GPU no
store to shared or global memory is repeated by the threads of a block along a tag that its
indices and guards do not use.
"""
from __future__ import annotations

import dataclasses

from ..ir import nodes as n
from ..ir.visitor import any_statement, collect_stmts, free_vars
from .predicate import kernel_thread_extents

_TAGS = (n.ThreadTag.THREAD_Z, n.ThreadTag.THREAD_Y, n.ThreadTag.THREAD_X)
_BLOCKERS = (n.Barrier, n.CrossThreadReduce, n.CommitGroup, n.WaitGroup, n.Intrinsic, n.DeviceKernel)


def _shared_side_effect(s) -> bool:
    """True when ``s`` stores to memory the block's threads share (shared, global)."""
    return any_statement(s, lambda x: type(x) in (n.Store, n.AsyncCopy)
                         and x.buffer.scope in (n.Scope.SHARED, n.Scope.GLOBAL))


class _Pin:
    def __init__(self, tags):
        self.tags = tags           # the block's thread tags of extent > 1
        self._k = 0

    @staticmethod
    def _tags(e, env) -> frozenset:
        """The thread tags whose index ``e`` depends on (``env``: Var -> tags)."""
        out = frozenset()
        for v in free_vars(e):
            out |= env.get(v, frozenset())
        return out

    def missing(self, s, env, conds) -> set:
        """The sets of block tags that the shared/global stores in ``s`` do not depend on
        (through their indices or the conditions around them): one set per distinct answer."""
        t = type(s)
        if t in (n.Store, n.AsyncCopy):
            if s.buffer.scope not in (n.Scope.SHARED, n.Scope.GLOBAL):
                return set()
            used = conds
            for i in s.indices:
                used = used | self._tags(i, env)
            return {self.tags - used}
        if t is n.Seq:
            return set().union(*(self.missing(x, env, conds) for x in s.stmts))
        if t is n.For:
            if s.thread is not None and s.thread.is_thread:
                env = {**env, s.var: frozenset({s.thread})}
            return self.missing(s.body, env, conds)
        if t is n.LetStmt:
            return self.missing(s.body, {**env, s.var: self._tags(s.value, env)}, conds)
        if t is n.Allocate:
            return self.missing(s.body, env, conds)
        if t is n.IfThenElse:
            conds = conds | self._tags(s.cond, env)
            out = self.missing(s.then, env, conds)
            return out if s.otherwise is None else out | self.missing(s.otherwise, env, conds)
        return set()

    def wrappable(self, s, missing) -> bool:
        """``s`` may run on one thread as a whole (see the module docstring)."""
        def bad(x):
            t = type(x)
            return (t in _BLOCKERS or t in n.WMMA_STMTS
                    or (t is n.For and x.thread is not None and x.thread in missing)
                    or (t is n.Allocate and x.buffer.scope is n.Scope.SHARED))
        if any_statement(s, bad):
            return False
        inside = {a.buffer for a in collect_stmts(s, lambda x: type(x) is n.Allocate)}
        return not any_statement(s, lambda x: type(x) is n.Store and x.buffer.scope is n.Scope.LOCAL
                                 and x.buffer not in inside)

    def wrap(self, s, missing):
        for tag in reversed([t for t in _TAGS if t in missing]):
            v = n.var(f"t{tag.value[-1]}.one{self._k}")
            self._k += 1
            s = n.For(v, n.Const(v.dtype, 0), n.Const(v.dtype, 1), n.ForKind.BOUND, s, tag)
        return s

    def visit(self, s, env: dict, conds: frozenset):
        if not _shared_side_effect(s):
            return s
        t = type(s)
        if t is n.Seq:
            return n.Seq(tuple(self.visit(x, env, conds) for x in s.stmts))
        if t is n.For and s.thread is not None and (s.thread.is_thread or s.thread.is_block):
            if s.thread.is_thread:
                env = {**env, s.var: frozenset({s.thread})}
            return dataclasses.replace(s, body=self.visit(s.body, env, conds))
        sets = self.missing(s, env, conds)
        if len(sets) == 1:
            (miss,) = sets
            if miss and self.wrappable(s, miss):
                return self.wrap(s, miss)
        if t in (n.For, n.Allocate):
            return dataclasses.replace(s, body=self.visit(s.body, env, conds))
        if t is n.LetStmt:
            return dataclasses.replace(s, body=self.visit(s.body, {**env, s.var: self._tags(s.value, env)},
                                                          conds))
        if t is n.IfThenElse:
            conds = conds | self._tags(s.cond, env)
            other = None if s.otherwise is None else self.visit(s.otherwise, env, conds)
            return dataclasses.replace(s, then=self.visit(s.then, env, conds), otherwise=other)
        return s


def pin_unspread(kernel: n.Stmt) -> n.Stmt:
    """``kernel`` with its unspread side effects on one thread (see the module docstring)."""
    tags = frozenset(t for t, e in kernel_thread_extents(kernel).items() if e is None or e > 1)
    if any_statement(kernel, lambda x: type(x) in n.WMMA_STMTS):
        # tensor-core statements run on whole warps: their 32 lanes are threads along
        # threadIdx.x (``device_kernels.launch_of``) even where no loop binds it (F38)
        tags |= {n.ThreadTag.THREAD_X}
    if not tags or not _shared_side_effect(kernel):
        return kernel
    return _Pin(tags).visit(kernel, {}, frozenset())


__all__ = ["pin_unspread"]
