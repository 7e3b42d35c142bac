"""Predication: no barrier under divergent control flow (used by the ``sync`` pass).

A barrier must be reached by all threads of a block or by none (notes/GPU_PLAN.md).  Guards
for tiles that do not divide their axis often depend on a thread index and enclose a whole
phase (a cache stage attached inside a guarded thread loop), so a barrier that ``sync``
put there would be divergent.  ``predicate_kernel`` sinks every such condition onto the
statements around the barrier instead:

- ``if c: (s1; barrier; s2)`` -> ``if c: s1``; ``barrier``; ``if c: s2`` (and ``not c`` for the
  ``else`` branch), through sequences, allocations, lets (whose values load no memory),
  loops (a loop's bounds do not depend on ``c``: every thread enters it and runs the same
  iterations) and conditions that do not depend on a thread index (they stay outside);
- a thread loop shorter than the block's extent for its tag (masked threads) that holds a
  barrier runs to the block's extent with its body under ``var < min + extent``;
- ``CommitGroup``/``WaitGroup`` of asynchronous copies stay unguarded like barriers (F36);
- a ``CrossThreadReduce`` counts as a barrier (every thread must reach it): a condition sunk
  onto it makes the threads where it is false contribute the combiner's identity.

A condition is *divergent* when it mentions a thread loop's variable, a let bound to a value
that does, or loads memory; a condition that loads memory is evaluated once into a let
(the statements it guards may write what it reads).  Sequential executors see the same
program: conditions are pure, re-evaluating them gives the same value.

Assumes: loop bounds inside kernels do not depend on thread indices (a barrier in such a
loop cannot be made uniform: InternalCompilerError).
Guarantees: no Barrier under a divergent ``if`` or a masked thread loop; nothing else moves.
"""
from __future__ import annotations

import dataclasses

from ..errors import InternalCompilerError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import any_statement, collect, collect_stmts, free_vars


def kernel_thread_extents(kernel: n.Stmt) -> dict:
    """ThreadTag -> the block's extent for it (the largest extent of its loops in the
    kernel; None when one is not a constant)."""
    out: dict = {}
    for f in collect_stmts(kernel, lambda x: type(x) is n.For and x.thread is not None and x.thread.is_thread):
        if type(f.extent) is not n.Const:
            out[f.thread] = None
        elif f.thread not in out or out[f.thread] is not None:
            out[f.thread] = max(out.get(f.thread) or 0, int(f.extent.value))
    return out


def _has_barrier(s) -> bool:
    """Whether ``s`` holds a statement every thread of the block must reach (a barrier, or a
    cross-thread reduction: its lowering exchanges values through shuffles and barriers)."""
    return any_statement(s, lambda x: type(x) in _UNIFORM)


# Statements no thread-dependent condition may guard.  Commit/wait groups of asynchronous
# copies: a cooperative copy keeps every thread under a consumer's padded mask (``_cooperative``),
# so each thread must also commit and wait for its share, or a thread the mask turns off leaves
# its cp.async in flight while the others read the tile (F36).  A thread with no copies in
# flight commits an empty group and its wait returns at once: unmasking them is always safe.
_UNIFORM = (n.Barrier, n.CrossThreadReduce, n.CommitGroup, n.WaitGroup)


def _predicated_reduce(cond, s: n.CrossThreadReduce) -> n.CrossThreadReduce:
    """``if cond: s`` for a cross-thread reduction: every thread reaches it, those where
    ``cond`` is false contribute the combiner's identity (issue 24: the rows of threads past
    the array's end, around a reduction over threadIdx.x)."""
    vals = []
    for v, ident in zip(s.values, s.combiner.identity):
        if ident.dtype is not v.dtype:
            ident = n.Cast(v.dtype, ident)
        vals.append(mk.select(cond, v, ident))
    return dataclasses.replace(s, values=tuple(vals))


def _loads(e) -> bool:
    return bool(collect(e, lambda x: isinstance(x, n.Load)))


class _Predicator:
    def __init__(self, extents):
        self.extents = extents
        self.divergent: set = set()     # thread loop vars and lets that depend on them
        self.masks: dict = {}           # id(var < extent) of a padded thread loop -> (it, tag)
        self._k = 0

    def _cooperative(self, cond, s) -> bool:
        """Whether ``cond``, the mask of a padded thread loop, must not guard ``s``: ``s`` binds
        the same thread index again (a cooperative stage computed inside that loop, e.g. a
        shared tile copied by all the block's threads) and reads no thread-dependent value of
        the loops around it.  Masking it would turn off threads whose part of the copy then
        never happens; loop_nests keeps every thread guard off such stages for that reason."""
        tag = self.masks.get(id(cond), (None, None))[1]
        if tag is None or not any_statement(s, lambda x: type(x) is n.For and x.thread is tag):
            return False
        return not (free_vars(s) & self.divergent)

    def is_divergent(self, e) -> bool:
        return _loads(e) or any(v in self.divergent for v in free_vars(e))

    def visit(self, s):
        """``s`` with no barrier under divergent control flow."""
        return self.sink(None, s)

    def split_if(self, cond, then, otherwise):
        wrap = None
        if _loads(cond):        # evaluated once: the guarded statements may write what it reads
            v = n.var(f"pred{self._k}", cond.dtype)
            self._k += 1
            self.divergent.add(v)
            wrap, cond = (v, cond), v
        parts = [self.sink(cond, then)]
        if otherwise is not None:
            parts.append(self.sink(mk.unary(n.UnOp.NOT, cond), otherwise))
        out = parts[0] if len(parts) == 1 else n.Seq(tuple(parts))
        return out if wrap is None else n.LetStmt(wrap[0], wrap[1], out)

    def sink(self, cond, s):
        """``if cond: s`` with the condition moved below every barrier of ``s`` (``cond`` None:
        ``s`` itself, with its own divergent conditions sunk the same way)."""
        if not _has_barrier(s):
            return s if cond is None or self._cooperative(cond, s) else n.IfThenElse(cond, s)
        t = type(s)
        if t in (n.Barrier, n.CommitGroup, n.WaitGroup):
            return s
        if t is n.CrossThreadReduce:
            return s if cond is None else _predicated_reduce(cond, s)
        if t is n.Seq:
            return n.Seq(tuple(self.sink(cond, x) for x in s.stmts))
        if t is n.Allocate:
            return dataclasses.replace(s, body=self.sink(cond, s.body))
        if t is n.LetStmt:
            if cond is not None and _loads(s.value):
                raise InternalCompilerError("cannot predicate a barrier under a let that loads memory")
            if self.is_divergent(s.value):
                self.divergent.add(s.var)
            return dataclasses.replace(s, body=self.sink(cond, s.body))
        if t is n.For:
            if cond is not None and self._cooperative(cond, s):
                cond = None     # a cooperative stage's own thread loop: every thread does its part
            if self.is_divergent(s.min) or self.is_divergent(s.extent):
                raise InternalCompilerError("a barrier inside a loop whose bounds differ between the "
                                            "threads of a block cannot be made uniform")
            if s.thread is not None and s.thread.is_thread:
                self.divergent.add(s.var)
                full = self.extents.get(s.thread)
                if full is not None and not (type(s.extent) is n.Const and s.extent.value >= full):
                    mask = mk.lt(s.var, mk.add(s.min, s.extent))
                    self.masks[id(mask)] = (mask, s.thread)
                    body = self.sink(mask, s.body)
                    body = body if cond is None else self.sink(cond, body)
                    return dataclasses.replace(s, extent=mk.as_expr(full), body=body)
            return dataclasses.replace(s, body=self.sink(cond, s.body))
        if t is n.IfThenElse:
            if not self.is_divergent(s.cond):
                other = None if s.otherwise is None else self.sink(cond, s.otherwise)
                return dataclasses.replace(s, then=self.sink(cond, s.then), otherwise=other)
            return self.sink(cond, self.split_if(s.cond, s.then, s.otherwise))
        raise InternalCompilerError(f"cannot predicate a barrier inside a {t.__name__}")


def predicate_kernel(kernel: n.Stmt, extents: dict | None = None) -> n.Stmt:
    """``kernel`` with every condition that encloses a barrier and depends on a thread index
    sunk onto the statements around the barrier (see the module docstring)."""
    if not _has_barrier(kernel):
        return kernel
    if extents is None:
        extents = kernel_thread_extents(kernel)
    return _Predicator(extents).visit(kernel)
