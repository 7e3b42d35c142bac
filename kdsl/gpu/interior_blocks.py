"""interior_blocks: a guard-free copy of a block's tiled main loop for the blocks that lie inside
the arrays (an IR pass of the GPU table).

A tiled GPU kernel (a GEMM) runs a serial main loop with barriers in it: each turn, the
block's threads copy tiles into shared memory, then each thread multiply-adds its register
tile.  Wherever the tiles do not divide the arrays, every copy and every multiply-add sits
under guards (``row < N``, ``k < K``), evaluated per element and per turn: in an 8192^3
float32 GEMM they are most of the instructions.  ``full_thread_tiles`` cannot version such a
thread body (its two copies would split the barriers between them); this pass versions the
block's work instead, under a condition on the block index and the kernel's sizes only, the
same for every thread of the block:

    if <every strippable guard at its extreme point>:  the body without those guards
    else:                                               the body as it was

A guard conjunct (an integer comparison without loads, in an ``if`` or an ``AsyncCopy``
predicate) is strippable when ``kdsl.ir.bounds`` bounds it over the loops between the block
and the guard (thread loops, serial loops: their ranges may be symbolic, e.g.
``range(ceildiv(K, 8))``) to a condition free of their variables: ``r*8 + i < K`` for
``r < ceildiv(K, 8)``, ``i < 8`` needs ``ceildiv(K, 8)*8 - 1 < K``.  Within one conjunction,
a conjunct that bounds a loop variable from above (``r + 2 < ceildiv(K, 64)``: a pipeline's
test that the tile it prefetches exists) narrows that variable's range for the others and is
itself kept: where it fails the conjunction is false, whatever the others say.  The same
conjunct seen at several places goes only if it goes everywhere (all extremes are required).

Versioned: the body of the innermost block-bound loop (under its allocations), when it holds
a serial loop with a barrier inside (a tiled main loop) and at least ``MIN_SITES`` guard
conjuncts go.  Other kernels are left alone (their guards are few, or ``full_thread_tiles``
handles them) so that they do not pay twice the code.

Assumes: GPU-form loop IR after ``sync`` (barriers placed), before ``device_kernels``.
Guarantees: the same iterations run the same statements in the same order; the versioning
``if`` is marked ``alternatives`` (its ``else`` is the body as it was, right for every block,
so a backend may add conditions of its own: the cuda codegen adds the alignment tests of the
fast copy's vector accesses); its condition uses no variable bound inside the block's body
(no thread index), so every thread of a block takes the same copy and barriers stay uniform.
"""
from __future__ import annotations

import dataclasses

from ..ir import bounds
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify
from ..ir.visitor import Mutator, any_statement, collect, free_vars, substitute
from ..ir.conditions import conjuncts, guard_limit
from .gates import has_main_loop as _has_main_loop, has_tiled_blocks, is_block_loop as _is_block_loop

#: a block body is versioned when at least this many guard conjuncts (places in the code) go
MIN_SITES = 4
#: and when its condition has at most this many terms
MAX_TERMS = 24

_ORDERED = (n.CmpOp.LT, n.CmpOp.LE, n.CmpOp.GT, n.CmpOp.GE)


def _copies(x) -> bool:
    """A copy into shared memory (whose guards cost once per element copied, not per
    multiply-add)."""
    return type(x) is n.AsyncCopy or (type(x) is n.Store and x.buffer.scope is n.Scope.SHARED)


class _Sites:
    """The guard conjuncts of one block body and the conditions under which they hold."""

    def __init__(self):
        self.conds: dict = {}        # (id(site), k) -> [condition Exprs]
        self.failed: set = set()     # (id(site), k) seen where they cannot go
        self.compute: set = set()    # ids of the ifs around arithmetic (not shared copies)

    def walk(self, s, ranges: dict, inner: set, opaque: set) -> None:
        t = type(s)
        if t is n.Seq:
            for x in s.stmts:
                self.walk(x, ranges, inner, opaque)
        elif t is n.For:
            hi = simplify(mk.sub(mk.add(s.min, s.extent), 1))
            self.walk(s.body, {**ranges, s.var: (s.min, hi)}, inner | {s.var}, opaque)
        elif t is n.LetStmt:
            self.walk(s.body, ranges, inner | {s.var}, opaque | {s.var})
        elif t is n.Allocate:
            self.walk(s.body, ranges, inner, opaque)
        elif t is n.IfThenElse:
            self.site(s, s.cond, ranges, inner, opaque)
            self.walk(s.then, ranges, inner, opaque)
            if s.otherwise is not None:
                self.walk(s.otherwise, ranges, inner, opaque)
        elif t is n.AsyncCopy and s.predicate is not None:
            self.site(s, s.predicate, ranges, inner, opaque)

    def site(self, s, cond, ranges, inner, opaque) -> None:
        if type(s) is n.IfThenElse and not any_statement(s.then, _copies):
            self.compute.add(id(s))
        parts = conjuncts(cond)
        got = [None] * len(parts)
        # conjuncts of the form ``v + c < N`` (a loop variable capped) that fail on their own
        # stay, and narrow ``v`` for the others; only the capped forms are bounded first
        narrow, limiting = dict(ranges), set()
        for k, c in enumerate(parts):
            caps = [(v, lim) for v in inner & free_vars(c) if v in ranges
                    for lim in [guard_limit(c, v)] if lim is not None and not free_vars(lim) & inner]
            if not caps:
                continue
            got[k] = _holds(c, ranges, inner, opaque)
            if got[k] is None:
                limiting.add(k)
                for v, lim in caps:
                    lo, hi = narrow[v]
                    narrow[v] = (lo, simplify(mk.min_(hi, mk.sub(lim, 1))))
        for k, c in enumerate(parts):
            if k not in limiting and (got[k] is None or limiting):    # narrowed: tighter
                got[k] = _holds(c, narrow, inner, opaque)
            key = (id(s), k)
            if got[k] is None:
                self.failed.add(key)
            else:
                self.conds.setdefault(key, []).append(got[k])

    def strippable(self) -> list:
        """The keys that go everywhere they were seen, in the order of the code."""
        return [k for k in self.conds if k not in self.failed]


def _holds(c, ranges: dict, inner: set, opaque: set):
    """A condition free of the ``inner`` variables under which conjunct ``c`` holds over
    ``ranges`` (Var -> inclusive (lo, hi)), or None."""
    if type(c) is not n.Compare or c.op not in _ORDERED or not c.a.dtype.is_int:
        return None
    fv = free_vars(c)
    if not (fv & inner) or fv & opaque or collect(c, lambda x: isinstance(x, (n.Load, n.TensorRead))):
        return None
    diff = simplify(mk.sub(c.a, c.b))
    try:
        lo, hi = bounds.bound(diff, {v: r for v, r in ranges.items() if v in inner})
    except bounds.Unbounded:
        return None
    side = hi if c.op in (n.CmpOp.LT, n.CmpOp.LE) else lo     # a - b at its hardest point
    e = simplify(mk.compare(c.op, side, n.Const(diff.dtype, 0)))
    if free_vars(e) & inner or (type(e) is n.Const and not e.value):
        return None
    return e


#: the size that stands for every array dimension in ``_can_hold``: a multiple of every tile
_BIG = 1 << 20


def _can_hold(e, block_vars: set) -> bool:
    """Whether condition ``e`` holds for the first block of arrays of size ``_BIG`` in every
    dimension (a multiple of every tile): a condition false there (``ceildiv(K, 8)*8 + 7 < K``,
    the extreme of a guard that fails on the last turn of a loop) would make every block take
    the guarded copy, so its guard stays instead."""
    point = {v: n.Const(v.dtype, 0 if v in block_vars else _BIG) for v in free_vars(e) if v.dtype.is_int}
    got = simplify(substitute(e, point))
    return not (type(got) is n.Const and not got.value)


class _Strip(Mutator):
    """Remove the conjuncts ``(id(site), k)`` in ``keys`` from every site."""

    def __init__(self, keys: set):
        super().__init__()
        self.keys = keys

    def _rest(self, s, cond):
        parts = conjuncts(cond)
        return [c for k, c in enumerate(parts) if (id(s), k) not in self.keys]

    def visit_IfThenElse(self, s):
        rest = self._rest(s, s.cond)
        then = self.visit(s.then)
        other = self.visit(s.otherwise) if s.otherwise is not None else None
        if not rest:
            return then
        return n.IfThenElse(mk.all_of(rest), then, other)

    def visit_AsyncCopy(self, s):
        if s.predicate is None:
            return s
        rest = self._rest(s, s.predicate)
        return dataclasses.replace(s, predicate=mk.all_of(rest) if rest else None)


def _terms(g, keys) -> list:
    """The distinct non-constant conditions of the conjuncts ``keys``."""
    terms = []
    for k in keys:
        for e in g.conds[k]:
            if type(e) is not n.Const and not any(e == c for c in terms):   # structural
                terms.append(e)
    return terms


def _version(body, block_vars: set):
    """``body`` (a block's work, inside the block loops of ``block_vars``) versioned into a
    guard-free copy and itself (and a middle copy, see below), or ``body``.

    Conditions free of the block indices (``K % 8 == 0``: every block's k loop ends on a whole
    step) hold for all blocks or none; where some do not hold (a K of 1023), a middle copy
    strips only the guards whose conditions all depend on the block (rows and columns inside
    the arrays), so that such shapes still run their interior blocks nearly guard-free.  Only
    where some of those guards are around arithmetic (a register tile's multiply-adds): guards
    of the copies into shared memory cost little per element, and a third copy of a tensor-core
    kernel costs a second of NVRTC time."""
    if not _has_main_loop(body):
        return body
    g = _Sites()
    g.walk(body, {}, set(), set())
    keys = [k for k in g.strippable() if all(_can_hold(e, block_vars) for e in g.conds[k])]
    if len(keys) < MIN_SITES:
        return body
    terms = _terms(g, keys)
    if len(terms) > MAX_TERMS:
        return body
    stripped = _Strip(set(keys)).visit(body)
    if not terms:
        return stripped
    general = body
    per_block = [k for k in keys if all(type(e) is not n.Const and free_vars(e) & block_vars
                                        for e in g.conds[k])]
    if len(per_block) < len(keys) and any(k[0] in g.compute for k in per_block):
        middle = _Strip(set(per_block)).visit(body)
        general = n.IfThenElse(mk.all_of(_terms(g, per_block)), middle, body, alternatives=True)
    return n.IfThenElse(mk.all_of(terms), stripped, general, alternatives=True)


class _Blocks(Mutator):
    def __init__(self):
        super().__init__()
        self.block_vars: set = set()

    def visit_For(self, s):
        if not _is_block_loop(s):
            return self.generic(s)
        if any_statement(s.body, _is_block_loop):
            self.block_vars.add(s.var)
            try:
                return self.generic(s)
            finally:
                self.block_vars.discard(s.var)
        body, allocs = s.body, []
        while type(body) is n.Allocate:          # allocations stay around both copies
            allocs.append(body)
            body = body.body
        new = _version(body, self.block_vars | {s.var})
        if new is body:
            return s
        for a in reversed(allocs):
            new = dataclasses.replace(a, body=new)
        return dataclasses.replace(s, body=new)


class _Edge(Mutator):
    def visit_IfThenElse(self, s):
        if s.alternatives:
            return self.visit(s.otherwise)
        return self.generic(s)


def edge_copy(s: n.Stmt) -> n.Stmt:
    """``s`` with each block body this pass versioned replaced by its guarded copy (what the
    blocks at the arrays' edges run): the body as it was before the pass, for inspection."""
    return _Edge().visit(s)


def interior_blocks(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass: version each tiled block body so interior blocks run without guards."""
    if not has_tiled_blocks(func):      # (a block body without a main loop stays as it is)
        return func
    body = _Blocks().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
