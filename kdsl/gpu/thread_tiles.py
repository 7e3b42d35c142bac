"""full_thread_tiles: a guard-free copy of each thread's work for the threads whose tile lies
inside the arrays (an IR pass of the GPU table).

A thread's work in a GPU kernel is the body of its innermost thread loop: often constant,
unrolled loops over a register tile (a stencil's R x C outputs and the window of inputs
they read), each statement under the guards of the tiles that do not divide the arrays
(``base + i < N``).  Evaluated per element, those guards cost more than the work (a select
per multiply-add of a 3x3 stencil) and stop NVRTC from keeping the tile in registers
cleanly.  When a guard is a comparison linear in the variables of the constant loops inside
the body, it holds for every iteration iff it holds at the extreme iteration (each variable
at its first or last value, by the sign of its coefficient); the pass rewrites the body as

    if <every such guard at its extreme iteration>:  body without those guards
    else:                                             body as it was

so interior threads run straight-line code and only edge threads pay for guards.  It is
``kdsl_cpu.passes.full_tiles`` for the thread level (that CPU pass does not look into thread
loops, whose extents are launch sizes).

Only bodies worth it are versioned: at least ``MIN_GUARD_EVALS`` guard evaluations per
thread (a register tile's unrolled loops), and nothing a copy could break: no barrier, no
cross-thread reduction, asynchronous copy or warp-level (WMMA) statement, no nested thread
loop.  Guards that load memory, use a variable bound inside the body by a let or a loop of
non-constant bounds, or are not linear in the loop variables, stay in both copies.

Assumes: GPU-form loop IR after ``sync`` (barriers placed).
Guarantees: the same iterations run the same stores in the same order; a no-op on functions
without thread loops.
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import linear, simplify
from ..ir.visitor import Mutator, any_statement, collect, substitute
from ..ir.conditions import conjuncts

#: a thread body is versioned when its guards are evaluated at least this often per thread
MIN_GUARD_EVALS = 32

_BLOCKERS = (n.Barrier, n.CrossThreadReduce, n.AsyncCopy, n.CommitGroup, n.WaitGroup, n.WgmmaWait, n.WgmmaCommit,
             n.Intrinsic, n.WmmaFill, n.WmmaLoad, n.WmmaMma, n.WmmaStore, n.DeviceKernel)
_ORDERED = (n.CmpOp.LT, n.CmpOp.LE, n.CmpOp.GT, n.CmpOp.GE)


def _is_thread_loop(s) -> bool:
    return type(s) is n.For and s.thread is not None and s.thread.is_thread


def _const(e):
    return e.value if type(e) is n.Const else None


def _extreme(c, ranges: dict, opaque: set):
    """``c`` at the iteration where it is hardest to satisfy (an Expr free of the loop
    variables in ``ranges``: Var -> (first, last)), or None when that cannot be told."""
    if type(c) is not n.Compare or c.op not in _ORDERED or not c.a.dtype.is_int:
        return None
    if collect(c, lambda x: isinstance(x, (n.Load, n.TensorRead))):
        return None
    used = set(collect(c, lambda x: type(x) is n.Var))
    if used & opaque:
        return None
    inner = used & ranges.keys()
    lin = linear(c.a).add(linear(c.b), -1)
    for t, k in lin.terms.items():
        if t in inner:
            continue
        if any(v in inner for v in collect(t, lambda x: type(x) is n.Var)):
            return None      # an inner variable inside a non-linear term
    upper = c.op in (n.CmpOp.LT, n.CmpOp.LE)     # a - b must stay below: its maximum
    point = {}
    for v in inner:
        k = lin.terms.get(v, 0)
        first, last = ranges[v]
        point[v] = n.Const(v.dtype, last if (k > 0) == upper else first)
    return simplify(substitute(c, point))


class _Guards:
    """The strippable guard conjuncts of a thread body and their extreme forms."""

    def __init__(self):
        self.extremes: dict = {}     # id(conjunct) -> [extreme Exprs]
        self.failed: set = set()     # ids of conjuncts seen where they cannot be stripped
        self.keep: list = []         # the conjunct objects (ids stay valid)
        self.evals = 0

    def walk(self, s, ranges: dict, opaque: set, trips: int) -> None:
        t = type(s)
        if t is n.Seq:
            for x in s.stmts:
                self.walk(x, ranges, opaque, trips)
        elif t is n.For:
            lo, ext = _const(s.min), _const(s.extent)
            if lo is not None and ext is not None and ext > 0:
                self.walk(s.body, {**ranges, s.var: (lo, lo + ext - 1)}, opaque, trips * ext)
            elif ext != 0:
                self.walk(s.body, ranges, opaque | {s.var}, trips)
        elif t is n.IfThenElse:
            for c in conjuncts(s.cond):
                e = _extreme(c, ranges, opaque)
                self.keep.append(c)
                if e is None:
                    self.failed.add(id(c))
                else:
                    self.extremes.setdefault(id(c), []).append(e)
                    self.evals += trips
            self.walk(s.then, ranges, opaque, trips)
            if s.otherwise is not None:
                self.walk(s.otherwise, ranges, opaque, trips)
        elif t is n.LetStmt:
            self.walk(s.body, ranges, opaque | {s.var}, trips)
        elif t is n.Allocate:
            self.walk(s.body, ranges, opaque, trips)

    def strippable(self) -> list:
        """The strippable conjuncts' ids in the order of the code (never a set's order: ids
        are addresses, so the versioning condition's conjunction would vary between runs and
        the source-keyed cubin cache would miss across processes)."""
        return [k for k in self.extremes if k not in self.failed]


class _Strip(Mutator):
    """Remove the conjuncts whose ids are in ``ids`` from every condition."""

    def __init__(self, ids: set):
        super().__init__()
        self.ids = ids

    def visit_IfThenElse(self, s):
        then = self.visit(s.then)
        other = self.visit(s.otherwise) if s.otherwise is not None else None
        rest = [c for c in conjuncts(s.cond) if id(c) not in self.ids]
        if not rest:
            return then
        return n.IfThenElse(mk.all_of(rest), then, other)


def _version(body):
    """``body`` versioned into a guard-free copy and itself, or ``body`` when not worth it."""
    if any_statement(body, lambda x: isinstance(x, _BLOCKERS) or _is_thread_loop(x)):
        return body
    g = _Guards()
    g.walk(body, {}, set(), 1)
    ids = g.strippable()
    if not ids or g.evals < MIN_GUARD_EVALS:
        return body
    conds = []
    for k in ids:
        for e in g.extremes[k]:
            if not any(e == c for c in conds):     # structural (variables by identity)
                conds.append(e)
    full = simplify(mk.all_of(conds))
    if type(full) is n.Const and not full.value:
        return body
    stripped = _Strip(set(ids)).visit(body)
    if type(full) is n.Const:
        return stripped
    # the else is the body as it was, right for every thread: an ``alternatives`` if, so a
    # backend may add kernel-uniform tests of its own (the cuda codegen: the alignment of the
    # vector accesses, tested once instead of at every unrolled step); not around a
    # cooperative copy's dealing, whose choice must stay uniform over the block
    from .coalesced_fallbacks import is_copy_alternative
    return n.IfThenElse(full, stripped, body,
                        alternatives=not any_statement(body, is_copy_alternative))


class _Threads(Mutator):
    def visit_For(self, s):
        if _is_thread_loop(s) and not any_statement(s.body, _is_thread_loop):
            body = _version(s.body)
            return s if body is s.body else dataclasses.replace(s, body=body)
        return self.generic(s)


def full_thread_tiles(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass: version the work of each thread so interior threads run without guards."""
    if not any_statement(func.body, _is_thread_loop):
        return func
    body = _Threads().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
