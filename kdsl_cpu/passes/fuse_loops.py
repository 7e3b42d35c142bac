"""fuse_loops: run adjacent independent loops over the same range as one loop.

A kernel with many outputs of one shape (``return x + 1, x + 2, ...``) lowers
to one loop nest per output, one after the other.  Each nest is a parallel
region, an outlined function and a vectorised loop in the backend, so compile
time and thread wake-ups grow with the number of outputs.  This pass merges

    for i in R: A          for i in R:
    for j in R: B    ->      A
                             B[j := i]

when the two loops have the same kind and range and neither body writes a
buffer the other reads or writes (so running them interleaved computes the
same values), then fuses inside the merged body the same way, and merges
adjacent ``if c: X`` / ``if c: Y`` with the same load-free condition (the
bounds guards of uneven splits) into ``if c: X; Y``.

Assumes: nothing about the order of passes, except that equal ranges print
alike (simplified expressions compare structurally).
Guarantees: the same stores of the same values; unrolled, vectorised and
thread-bound loops are left as they are (their bodies keep the shape the
backends expect), and so are loops around barriers or intrinsics.
"""
from __future__ import annotations

import dataclasses

from kdsl.ir import nodes as n
from kdsl.ir.visitor import Mutator, Visitor, allocate_chain, collect, substitute

#: loop kinds this pass merges
_KINDS = (n.ForKind.SERIAL, n.ForKind.PARALLEL)


class _Effects(Visitor):
    """Buffers a statement reads and writes; ``opaque`` when it holds a barrier or intrinsic."""

    def __init__(self):
        super().__init__()
        self.reads, self.writes, self.opaque = set(), set(), False
        self.shape_vars = set()

    def visit_Allocate(self, s):
        chain, inner = allocate_chain(s)
        for a in chain:
            for e in tuple(a.buffer.shape) + tuple(a.buffer.strides or ()):
                self.shape_vars |= set(collect(e, lambda x: isinstance(x, n.Var)))
        self.visit(inner)

    def visit_Load(self, e):
        self.reads.add(e.buffer)
        self.generic(e)

    def visit_Store(self, s):
        self.writes.add(s.buffer)
        self.generic(s)

    def visit_Barrier(self, s):
        self.opaque = True

    def visit_Intrinsic(self, s):
        self.opaque = True

    visit_WmmaFill = visit_WmmaLoad = visit_WmmaMma = visit_WmmaStore = visit_Intrinsic


def _effects(s: n.Stmt) -> _Effects:
    e = _Effects()
    e.visit(s)
    return e


def _stmts(s: n.Stmt) -> list:
    return list(s.stmts) if type(s) is n.Seq else [s]


def _seq(stmts: list) -> n.Stmt:
    return stmts[0] if len(stmts) == 1 else n.Seq(tuple(stmts))


def _same_range(a: n.For, b: n.For) -> bool:
    return a.kind is b.kind and a.thread is b.thread and a.min == b.min and a.extent == b.extent


class _Fuse(Mutator):
    def visit_Seq(self, s: n.Seq):
        stmts = [self.visit(x) for x in s.stmts]
        out = self._fuse_list(stmts)
        if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
            return s
        return _seq(out)

    def _fuse_list(self, stmts: list) -> list:
        """``stmts`` (already fused inside) with runs of mergeable neighbours merged."""
        out, k = [], 0
        while k < len(stmts):
            k, merged = self._group(stmts, k)
            out += _stmts(merged)
        return out

    def _group(self, stmts: list, k: int):
        """The statements from ``k`` on that merge with ``stmts[k]``: (end index, merged stmt)."""
        first = stmts[k]
        if type(first) is n.For and first.kind in _KINDS:
            match = _same_range
        elif type(first) is n.IfThenElse and first.otherwise is None and not collect(
                first.cond, lambda x: isinstance(x, n.Load)):
            match = lambda a, b: b.otherwise is None and a.cond == b.cond  # noqa: E731
        else:
            return k + 1, first
        fx = _effects(first)
        if fx.opaque:
            return k + 1, first
        reads, writes, bodies = set(fx.reads), set(fx.writes), [first]
        j = k + 1
        while j < len(stmts):
            nxt = stmts[j]
            if type(nxt) is not type(first) or not match(first, nxt):
                break
            ex = _effects(nxt)
            if type(nxt) is n.For and nxt.var is not first.var and nxt.var in ex.shape_vars:
                break    # a buffer allocated inside is shaped by the loop variable
            if ex.opaque or ex.writes & (reads | writes) or writes & ex.reads:
                break
            reads |= ex.reads
            writes |= ex.writes
            bodies.append(nxt)
            j += 1
        if len(bodies) == 1:
            return k + 1, first
        if type(first) is n.For:
            inner = [x.body if x.var is first.var else substitute(x.body, {x.var: first.var})
                     for x in bodies]
        else:
            inner = [x.then for x in bodies]
        flat = []
        for b in inner:
            flat += _stmts(b)
        body = _seq(self._fuse_list(flat))
        if type(first) is n.For:
            return j, dataclasses.replace(first, body=body)
        return j, dataclasses.replace(first, then=body)


def fuse_loops(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass: adjacent independent loops over equal ranges of ``func`` merged (see above)."""
    body = _Fuse().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
