"""async_copies: the one-shot copies of global memory into shared memory of a GPU block as
asynchronous copies (IR pass, GPU table).

A block that caches a tile or a row in shared memory (a row-wise chain's row cache,
``cache_rows`` of the cuda schedules; a stencil's input tile) copies it with a loop nest of
``X.shared[...] = X[...]``.  Written as loads and stores, each thread's load must arrive in a
register before its store, and the guards around every vector make the compiler keep one load
in flight per thread: a 32 KB softmax row over 512 threads takes four full memory latencies
(8192x8192 f32 on the H200: 181 us, against 134 us with every load in flight).  Asynchronous
copies (``cp.async``) need no register: every copy of the nest is issued, then the thread
waits once.

Assumes: the GPU table's loop IR after ``sync`` (the barriers a shared buffer needs are placed
for its stores), before ``device_kernels``.
Guarantees: a *copy nest* -- a statement of a ``Seq`` built only of loops, guards (``if``
without ``else``), lets and Stores of a ``Load`` of a global buffer that the function never
writes into a shared buffer of the same dtype -- that runs once per block or per thread (no
serial, unrolled, vectorized or parallel loop encloses it: a copy inside a K loop is left to
``pipeline()``, whose rings overlap it with compute) has every Store replaced by an
``AsyncCopy`` and is followed by ``CommitGroup(); WaitGroup(0)`` (one for adjacent nests).  A
copy's destination is indexed by every serial loop of its nest (two copies of one thread in
flight together never write one element).  The wait comes before any statement after the nest
(so before the barriers ``sync`` placed there): each thread sees its own copies as it saw its
stores, other threads after the same barriers as before.
Sequential executors get the stores back (``sequential.lower_async_copies``); everything
else is unchanged, and a function without such a nest is returned as the same object.
"""
from __future__ import annotations

import dataclasses

from ..ir import nodes as n
from ..ir.visitor import Mutator, any_statement, collect_stmts, uses_var

#: loops that run their body many times per thread: a copy inside one is not one-shot
_REPEATING = (n.ForKind.SERIAL, n.ForKind.UNROLLED, n.ForKind.VECTORIZED, n.ForKind.PARALLEL)


def _is_copy(s, written) -> bool:
    v = s.value
    return (type(v) is n.Load and s.buffer.scope is n.Scope.SHARED
            and v.buffer.scope is n.Scope.GLOBAL and v.buffer.dtype == s.buffer.dtype
            and v.buffer not in written)


def _copy_nest(s, written) -> bool:
    """Whether ``s`` is built of loops, guards and lets around copies only (one at least),
    each copy's destination indexed by every serial loop around it (no two iterations of a
    thread write one element: copies in flight together land in no set order)."""
    found = False
    todo = [(s, ())]
    while todo:
        x, loops = todo.pop()
        t = type(x)
        if t is n.Store:
            if not _is_copy(x, written) or not all(
                    any(uses_var(i, v) for i in x.indices) for v in loops):
                return False
            found = True
        elif t is n.For:
            todo.append((x.body, loops if x.kind is n.ForKind.BOUND else loops + (x.var,)))
        elif t is n.LetStmt:
            todo.append((x.body, loops))
        elif t is n.IfThenElse:
            if x.otherwise is not None:
                return False
            todo.append((x.then, loops))
        elif t is n.Seq:
            todo.extend((y, loops) for y in x.stmts)
        else:
            return False
    return found


class _ToAsync(Mutator):
    """The Stores of a copy nest as AsyncCopies (nothing else in a copy nest changes)."""

    def visit_Store(self, s):
        return n.AsyncCopy(s.buffer, s.indices, s.value)


class _Nests(Mutator):
    """Copy nests outside repeating loops become AsyncCopies + commit + wait (module doc)."""

    def __init__(self, written: set):
        super().__init__()
        self.written = written
        self.repeating = 0       # enclosing loops of a _REPEATING kind
        self.changed = False

    def visit_For(self, s):
        rep = s.kind in _REPEATING
        self.repeating += rep
        try:
            return self.generic(s)
        finally:
            self.repeating -= rep

    def visit_Seq(self, s):
        s = self.generic(s)
        if self.repeating:
            return s
        # adjacent copy nests (several cached inputs) share one wait: all their copies fly together
        out, hit, open_ = [], False, False
        for x in s.stmts:
            if type(x) is not n.Seq and _copy_nest(x, self.written):
                out.append(_ToAsync().visit(x))
                hit = open_ = True
                continue
            if open_:
                out += [n.CommitGroup(), n.WaitGroup(0)]
                open_ = False
            out.append(x)
        if open_:
            out += [n.CommitGroup(), n.WaitGroup(0)]
        if not hit:
            return s
        self.changed = True
        return n.Seq(tuple(out))

    # expressions hold no statements: never walk them
    def visit_Store(self, s):
        return s


def async_copies(func: n.LoweredFunc) -> n.LoweredFunc:
    """Copy nests into shared memory as asynchronous copies (see the module docstring)."""
    if not any_statement(func.body, lambda x: type(x) is n.Allocate
                         and x.buffer.scope is n.Scope.SHARED):
        return func     # (a walk over statements only)
    written = {x.buffer for x in collect_stmts(func.body, lambda x: type(x) in (n.Store, n.AsyncCopy))}
    m = _Nests(written)
    body = m.visit(func.body)
    if not m.changed:
        return func
    return dataclasses.replace(func, body=body)
