"""hoist_allocations: allocate each buffer once per thread, not once per loop iteration.

A stage attached inside a loop (``compute_at``) allocates its buffer in that
loop's body, so a serial loop around it allocates and frees it every
iteration.  For a buffer that lives on the heap (a packed GEMM panel is
64 KiB) that is a malloc/free per iteration and, when the allocator hands the
pages back, page faults on every reuse.  This pass moves each ``Allocate`` out
of the serial loops, branches and sequences around it, as far as its shape
allows (no variable of a crossed loop or let), but never out of a
``parallel`` loop: each thread keeps its own copy.

Assumes: a buffer's contents do not carry over from one iteration to the next
(true of every buffer the lowering allocates: each is written before it is
read within one iteration of its attach loop).
Guarantees: the same program; every Allocate sits at the top of the body of
a parallel loop, of a loop or let its shape depends on, or of the function.
GPU backends do not use it (there, scopes and thread bindings decide where
memory lives).
"""
from __future__ import annotations

import dataclasses

from kdsl.ir import nodes as n
from kdsl.ir.visitor import allocate_chain, free_vars


def _wrap(allocs, body):
    for a in reversed(allocs):
        body = n.Allocate(a.buffer, body, a.stages)
    return body


def _shape_vars(a: n.Allocate) -> set:
    out = set()
    for e in a.buffer.shape:
        out |= free_vars(e)
    return out


class _Hoist:
    def stmt(self, s):
        """(allocs lifted out of ``s``, ``s`` without them)."""
        fn = getattr(self, "_" + type(s).__name__, None)
        return fn(s) if fn is not None else ([], s)

    def _Allocate(self, s):
        chain, inner = allocate_chain(s)   # a loop, not a recursion: one Allocate per stage
        allocs, body = self.stmt(inner)
        return chain + allocs, body

    def _Seq(self, s):
        allocs, stmts = [], []
        for x in s.stmts:
            a, y = self.stmt(x)
            allocs += a
            stmts.append(y)
        return allocs, n.Seq(tuple(stmts))

    def _IfThenElse(self, s):
        a1, then = self.stmt(s.then)
        a2, other = ([], None) if s.otherwise is None else self.stmt(s.otherwise)
        return a1 + a2, n.IfThenElse(s.cond, then, other, s.alternatives)

    def _For(self, s):
        allocs, body = self.stmt(s.body)
        if s.kind is n.ForKind.PARALLEL:
            return [], dataclasses.replace(s, body=_wrap(_unique(allocs), body))
        return self._cross(s.var, allocs, lambda b: dataclasses.replace(s, body=b), body)

    def _LetStmt(self, s):
        allocs, body = self.stmt(s.body)
        return self._cross(s.var, allocs, lambda b: dataclasses.replace(s, body=b), body)

    @staticmethod
    def _cross(var, allocs, rebuild, body):
        """Lift the allocations whose shape does not use ``var``; keep the others inside."""
        stay, go = [], []
        for a in allocs:
            (stay if var in _shape_vars(a) else go).append(a)
        return go, rebuild(_wrap(_unique(stay), body))


def _unique(allocs):
    """One allocation per buffer (versioned loop nests repeat the same Allocate)."""
    seen, out = set(), []
    for a in allocs:
        if a.buffer not in seen:
            seen.add(a.buffer)
            out.append(a)
    return out


def hoist_allocations(func: n.LoweredFunc) -> n.LoweredFunc:
    """Move every Allocate out of serial loops (see the module docstring)."""
    allocs, body = _Hoist().stmt(func.body)
    return dataclasses.replace(func, body=_wrap(_unique(allocs), body))
