"""blocked_sums: float sums in blocks of at most ``BLOCK`` terms, flushed with compensation.

A lowered float sum is one accumulator updated once per term,
``B[I] = B[I] + x``; after 2**24 terms a float32 accumulator stops growing
(1 + 2**24 rounds back to 2**24), and long before that every term loses the
low bits the accumulator cannot hold.  numpy avoids this with pairwise
summation.  This pass bounds the terms any accumulator adds instead: the
innermost long reduction loop ``L`` of each sum (extent ``E``) is cut into
blocks of ``K`` iterations (``K * terms-per-iteration ~ BLOCK``) that add into
a fresh local accumulator, and each block's partial sum is added to ``B`` with
Neumaier's compensation (the rounding error of each flush is summed apart in
``c`` and added once the sum is complete):

    if E <= K:                              # one block: L as it was
      for r in range(min, E): B[I] = B[I] + x
    else:
      c = 0
      for L.blk in range(ceildiv(E, K)):
        acc = 0
        for r in range(min + L.blk*K, min(K, E - L.blk*K)):  body, with B[I] -> acc
        t = B[I] + acc; c += (B[I] - t) + acc  (or (acc - t) + B[I] if |acc| > |B[I]|)
        B[I] = t
      B[I] = B[I] + c

The error is then that of a ``BLOCK``-term sum (vectorised inner loops split
it further across lanes) plus about two roundings: O(1) eps for any length,
like numpy's pairwise sum.  The inner loop is the original one with a shorter
range (its kind is kept, so LLVM still vectorises it with reassociation); a
flush runs once per block and carries only ``B`` from one flush to the next.
The ``E <= K`` copy keeps short sums (softmax rows) as fast as before: a loop
nested one level deeper changes LLVM's register allocation of the loops around
it (measured: softmax +20% without the copy).

When reduction loops enclose ``L`` (a 2-D full sum), ``c`` spans them; if ``L``
is short and its extent does not change in the outermost one (the root),
blocks of the root's iterations share one accumulator (an (n, 2) array: a flush
per ~BLOCK terms, not per row); else ``L`` is blocked as above.  When the sum's
index ``I`` uses loops inside ``L`` (a column sum: ``for r: for j: B[j] +=
A[r, j]``), ``acc`` and ``c`` are tiles over those loops (at most ``MAX_TILE``
elements of constant size), and the flush and the fold walk the same loops
under the same guards.  A compensation that becomes inf or NaN is not kept, so
infinities and NaNs in the data give numpy's result.  Products need nothing:
every multiplication rounds once whatever the order.

Assumes: simplified index expressions; an accumulator update is a Store of
``B[I] + x`` (or ``x + B[I]``) to the element it loads, float dtype; a loop's
extent does not change while it runs.
Guarantees: the same sums up to float rounding (fewer roundings); integer
sums, products, min/max and every other store are untouched; a sum is only
rewritten when every access to ``B`` inside its outermost reduction loop is
such an update with one index ``I``; parallel and thread-bound loops are never
split; buffers are only read and written at indices the original program used.
"""
from __future__ import annotations

import dataclasses
import math

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.bounds import Unbounded, bound, const_upper
from ..ir.simplify import prove
from ..ir.visitor import Mutator, collect, free_vars

#: terms an accumulator adds before it is flushed (numpy: 128 per pairwise leaf)
BLOCK = 1024
#: largest tile accumulator (elements) for sums indexed by loops inside the reduction loop
MAX_TILE = 4096
_BLOCKABLE = (n.ForKind.SERIAL, n.ForKind.VECTORIZED)
_NO_SPLIT = (n.ForKind.PARALLEL, n.ForKind.BOUND)


def blocked_sums(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass (see the module docstring)."""
    body = _Pass().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


# ----------------------------------------------------------------- analysis
def _self_load(st: n.Store):
    """The operand ``x`` of an accumulator update ``B[I] = B[I] + x`` (float), else None."""
    v = st.value
    if type(v) is not n.Binary or v.op is not n.BinOp.ADD or not v.dtype.is_float:
        return None
    for mine, other in ((v.a, v.b), (v.b, v.a)):
        if type(mine) is n.Load and mine.buffer is st.buffer and mine.indices == st.indices:
            return other
    return None


@dataclasses.dataclass
class _Path:
    """An update store and the statements enclosing it, outermost first, below the root loop.

    ``frames`` holds (node, branch): branch is "then"/"else" for an IfThenElse, None otherwise.
    """

    store: n.Store
    frames: list


def _paths(s, frames, out):
    """Every store below ``s`` with its enclosing frames (an Intrinsic poisons the walk)."""
    t = type(s)
    if t is n.Store:
        out.append(_Path(s, list(frames)))
    elif t is n.Seq:
        for x in s.stmts:
            _paths(x, frames, out)
    elif t is n.IfThenElse:
        _paths(s.then, frames + [(s, "then")], out)
        if s.otherwise is not None:
            _paths(s.otherwise, frames + [(s, "else")], out)
    elif t in (n.For, n.LetStmt, n.Allocate):
        _paths(s.body, frames + [(s, None)], out)
    elif t is n.Intrinsic or t in n.WMMA_STMTS:
        raise _Skip


class _Skip(Exception):
    """This loop holds something the pass does not reason about."""


@dataclasses.dataclass
class _Plan:
    """How one sum ``B[I]`` is blocked at its reduction loop ``L``."""

    buffer: n.Buffer
    index: tuple
    loop: n.For                # L
    tile: list                 # For loops inside L whose vars index B (outermost first)
    guards: list               # conditions under L that the flush keeps (free of L's inner vars)
    folds: list                # conditions under the root that the final fold keeps
    terms: int                 # constant bound of the terms one iteration of L adds
    stores: set                # ids of the update Stores under L
    root: n.For = None         # the outermost reduction loop of B (L or a loop around it)
    outer: set = None          # the vars bound at or inside the root, above L
    acc: n.Buffer = None
    comp: n.Buffer = None


def _cond(frame):
    node, branch = frame
    return node.cond if branch == "then" else n.Unary(node.cond.dtype, n.UnOp.NOT, node.cond)


def _conjuncts(c):
    if type(c) is n.Binary and c.op is n.BinOp.AND and c.dtype.is_bool:
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _plan_path(root: n.For, p: _Path, ivars: set, ranges: dict):
    """(L, tile loops, flush guards, fold guards, terms per L iteration, vars bound between
    the root and L) for one update, or None: leave it."""
    chain = [(root, None)] + p.frames
    loops = [f for f, _ in chain if type(f) is n.For]
    lets = {f.var for f, _ in chain if type(f) is n.LetStmt}
    if lets & ivars:
        return None
    # L: walking outwards, the first reduction loop whose trip count (times the constant trip
    # counts of the reduction loops below it) may exceed BLOCK
    terms, L = 1, None
    for f in reversed(loops):
        if f.var in ivars:
            continue
        hi = const_upper(f.extent)
        if hi is None or terms * hi > BLOCK:
            L = f
            break
        terms *= max(hi, 1)
    if L is None or L.kind not in _BLOCKABLE:
        return None
    pos = next(k for k, (f, _) in enumerate(chain) if f is L)
    if any(f.var in ivars for f in loops[:loops.index(L)]):
        return None               # a tile loop outside L: a deeper root may take this sum
    inner = [f for f, _ in chain[pos + 1:]]
    tile = [f for f in inner if type(f) is n.For and f.var in ivars]
    red_vars = {L.var} | {f.var for f in inner if type(f) in (n.For, n.LetStmt)} - {f.var for f in tile}
    outer_bound = {f.var for f, _ in chain[:pos] if type(f) in (n.For, n.LetStmt)}
    size = 1
    for k, f in enumerate(tile):
        if f.kind in _NO_SPLIT:
            return None
        used = free_vars(f.min) | free_vars(f.extent)
        if used & (red_vars | outer_bound) - {g.var for g in tile[:k]}:
            return None           # the tile would move while the sum runs
        hi = const_upper(f.extent)
        if hi is None:
            return None
        size *= max(hi, 1)
    if size > MAX_TILE:
        return None
    # a guard that mixes the term's vars with the tile's (the ragged end of a split lane loop)
    # is dropped when every slot of the tile indexes B in bounds: untouched slots add zeros
    tvars = set() if _inside(p.store, tile, ranges) else {t.var for t in tile}
    guards = _kept(chain[pos + 1:], red_vars, tvars)
    folds = _kept(chain[1:], red_vars | outer_bound, tvars)
    if guards is None or folds is None:
        return None
    return L, tile, guards, folds, terms, outer_bound


def _inside(store: n.Store, tile: list, outer: dict) -> bool:
    """Does ``store`` index its buffer in bounds for every point of the tile loops (and of the
    loops ``outer`` around the root: var -> Range)?"""
    if not tile:
        return False
    ranges = dict(outer)
    ranges.update({f.var: n.Range(f.min, f.extent) for f in tile})
    for i, ext in zip(store.indices, store.buffer.shape):
        try:
            lo, hi = bound(i, ranges)
        except Unbounded:
            return False
        if prove(mk.compare(n.CmpOp.GE, lo, mk.as_expr(0, lo.dtype)), ranges) is not True or \
                prove(mk.compare(n.CmpOp.LT, hi, ext), ranges) is not True:
            return False
    return True


def _kept(frames, drop: set, tile: set):
    """The conjuncts of the conditions in ``frames`` that use no var of ``drop`` (a term's
    guard: the flush or fold runs whether or not it held); None when one mixes both kinds."""
    out = []
    for f in frames:
        if type(f[0]) is not n.IfThenElse:
            continue
        for c in _conjuncts(_cond(f)):
            used = free_vars(c)
            if used & drop:
                if used & tile:
                    return None
                continue
            out.append(c)
    return out


def _plans(root: n.For, ranges: dict) -> list:
    """The sums whose outermost reduction loop is ``root``, as plans per (buffer, L)."""
    try:
        paths = []
        _paths(root.body, [], paths)
    except _Skip:
        return []
    by_buf: dict = {}
    for p in paths:
        by_buf.setdefault(p.store.buffer, []).append(p)
    plans = []
    for buf, ps in by_buf.items():
        if not buf.dtype.is_float or any(_self_load(p.store) is None for p in ps):
            continue
        index = ps[0].store.indices
        if any(p.store.indices != index for p in ps):
            continue
        ivars = set()
        for i in index:
            ivars |= free_vars(i)
        if root.var in ivars:
            continue
        # every load of B below root is the self-load of one of these updates
        loads = collect(root.body, lambda x, b=buf: type(x) is n.Load and x.buffer is b)
        if len(loads) != len(ps) or any(_uses_buffer(_self_load(p.store), buf) for p in ps):
            continue
        plans += _group(buf, index, root, ps, ivars, ranges)
    return plans


def _uses_buffer(e, buf) -> bool:
    return bool(collect(e, lambda x: type(x) is n.Load and x.buffer is buf))


def _group(buf, index, root, paths, ivars, ranges) -> list:
    """One plan per L for ``buf``; [] when the updates under one L disagree on tile or guards."""
    by_loop: dict = {}
    for p in paths:
        got = _plan_path(root, p, ivars, ranges)
        if got is None:
            continue
        L, tile, guards, folds, terms, outer = got
        prev = by_loop.get(id(L))
        if prev is None:
            by_loop[id(L)] = _Plan(buf, index, L, tile, guards, folds, terms, {id(p.store)}, root,
                                   outer)
            continue
        if ([id(f) for f in prev.tile] != [id(f) for f in tile] or prev.guards != guards
                or prev.folds != folds):
            return []
        prev.terms = max(prev.terms, terms)
        prev.stores.add(id(p.store))
    return list(by_loop.values())


# ----------------------------------------------------------------- rewriting
def _local(name, dtype, shape) -> n.Buffer:
    return n.Buffer(name, dtype, tuple(mk.as_expr(x) for x in shape), None, n.Scope.LOCAL)


def _shape(plan) -> list:
    return [max(const_upper(f.extent), 1) for f in plan.tile]


def _slot(plan) -> tuple:
    return tuple(mk.sub(f.var, f.min) for f in plan.tile)


def _zero(buf: n.Buffer) -> n.Stmt:
    """``buf[...] = 0`` over the whole (constant-shape) buffer."""
    zero = n.const(0.0, buf.dtype)
    ivs = [n.var(f"{buf.name}.z{k}") for k in range(len(buf.shape))]
    body: n.Stmt = n.Store(buf, tuple(ivs), zero)
    for v, ext in reversed(list(zip(ivs, buf.shape))):
        body = n.For(v, mk.as_expr(0), ext, n.ForKind.SERIAL, body)
    return body


def _neumaier(plan) -> n.Stmt:
    """``B[I] += acc[s]``, its rounding error added to ``c[s]`` (Neumaier's variant of Kahan's
    sum: only ``B`` is carried from one flush to the next, one add long, so short blocks cost
    no more than the plain sum did).  An error that is inf or NaN (the sum overflowed, or the
    data holds inf/NaN, which ``B`` then carries) is not kept."""
    d, slot, buf = plan.buffer.dtype, _slot(plan), plan.buffer
    cur, acc, comp = n.Load(d, buf, plan.index), n.Load(d, plan.acc, slot), n.Load(d, plan.comp, slot)
    t, e = n.var(f"{buf.name}.t", d), n.var(f"{buf.name}.e", d)

    def add(a, b):
        return n.Binary(d, n.BinOp.ADD, a, b)

    def sub(a, b):
        return n.Binary(d, n.BinOp.SUB, a, b)

    def mag(x):
        return n.Unary(d, n.UnOp.ABS, x)

    big = mk.compare(n.CmpOp.GE, mag(cur), mag(acc))
    err = mk.select(big, add(sub(cur, t), acc), add(sub(acc, t), cur))
    finite = mk.compare(n.CmpOp.LT, mag(e), n.const(math.inf, d))
    keep = n.Seq((n.Store(plan.comp, slot, mk.select(finite, add(comp, e), comp)),
                  n.Store(buf, plan.index, t)))
    return n.LetStmt(t, add(cur, acc), n.LetStmt(e, err, keep))


def _tiled(plan, body: n.Stmt, guards: list) -> n.Stmt:
    """``body`` inside copies of the plan's tile loops, each guard right inside the deepest
    loop whose var it uses (as the lowering placed it: later passes recognise tile guards)."""
    depth = {id(f.var): k for k, f in enumerate(plan.tile)}
    at: dict = {}
    for g in guards:
        k = max((depth[id(v)] for v in free_vars(g) if id(v) in depth), default=-1)
        at.setdefault(k, []).append(g)
    for k in range(len(plan.tile) - 1, -2, -1):
        cond = mk.all_of(at.get(k, []))
        if cond is not None:
            body = n.IfThenElse(cond, body)
        if k >= 0:
            f = plan.tile[k]
            body = n.For(f.var, f.min, f.extent, f.kind, body, f.thread)
    return body


def _flush(plan) -> n.Stmt:
    return _tiled(plan, _neumaier(plan), plan.guards)


def _fold(plan) -> n.Stmt:
    """``B[I] += c[s]``: the compensation, once the sum is complete."""
    d, slot = plan.buffer.dtype, _slot(plan)
    total = n.Binary(d, n.BinOp.ADD, n.Load(d, plan.buffer, plan.index), n.Load(d, plan.comp, slot))
    return _tiled(plan, n.Store(plan.buffer, plan.index, total), plan.folds)


def _retarget(s: n.Store, p) -> n.Store:
    """The update ``B[I] = B[I] + x`` as ``acc[slot] = acc[slot] + x``."""
    slot = _slot(p)
    acc = n.Load(s.value.dtype, p.acc, slot)
    v = s.value
    mine_a = type(v.a) is n.Load and v.a.buffer is s.buffer and v.a.indices == s.indices
    return n.Store(p.acc, slot, dataclasses.replace(v, a=acc) if mine_a else
                   dataclasses.replace(v, b=acc))


class _Rewrite(Mutator):
    """Each planned loop L (by identity) in blocked form, the planned updates retargeted."""

    def __init__(self, plans: list, made: dict):
        super().__init__()
        self.made = made           # the loops this pass builds, by id (never split again)
        self.versioned = True      # False: the caller already knows each L is long
        self.keep: set = set()     # ids of planned loops to leave whole (their root is blocked)
        self.by_store = {sid: p for p in plans for sid in p.stores}
        self.by_loop: dict = {}
        for p in plans:
            self.by_loop.setdefault(id(p.loop), []).append(p)

    def visit_Store(self, s):
        p = self.by_store.get(id(s))
        return self.generic(s) if p is None else _retarget(s, p)

    def visit_For(self, s):
        plans = self.by_loop.get(id(s))
        if plans and id(s) in self.keep:
            out = self.generic(s)
            self.made[id(out)] = out
            return out
        return self.generic(s) if not plans else self._block(s, plans)

    def _block(self, L: n.For, plans: list) -> n.Stmt:
        """``if E <= K:`` L in one piece, ``else:`` L cut into blocks of K iterations."""
        k = max(1, BLOCK // max(p.terms for p in plans))
        if not self.versioned:
            return self._blocks(L, plans, k)
        short = mk.compare(n.CmpOp.LE, L.extent, mk.as_expr(k, L.extent.dtype))
        return n.IfThenElse(short, self._whole(L, plans), self._blocks(L, plans, k))

    def _whole(self, L: n.For, plans: list) -> n.Stmt:
        """``L`` run once through: a sum with no reduction loop around L adds into its buffer
        directly (at most BLOCK terms, as one block would); the others into their accumulator,
        flushed once."""
        direct = {sid for p in plans if p.root is L for sid in p.stores}
        via = [p for p in plans if p.root is not L]
        saved = self.by_store
        self.by_store = {sid: p for sid, p in saved.items() if sid not in direct}
        try:
            inner = n.For(L.var, L.min, L.extent, L.kind, self.visit(L.body), L.thread)
        finally:
            self.by_store = saved
        self.made[id(inner)] = inner
        out: n.Stmt = n.Seq(tuple(_zero(p.acc) for p in via) + (inner,)
                            + tuple(_flush(p) for p in via))
        for p in via:
            out = n.Allocate(p.acc, out)
        return out

    def _blocks(self, L: n.For, plans: list, k: int) -> n.Stmt:
        """``L`` cut into blocks whose partial sums flush into each plan's buffer."""
        blk = n.var(f"{L.var.name}.blk")
        start = mk.add(L.min, mk.mul(blk, k))
        extent = mk.min_(mk.as_expr(k), mk.sub(L.extent, mk.mul(blk, k)))
        inner = n.For(L.var, start, extent, L.kind, self.visit(L.body), L.thread)
        body = n.Seq(tuple(_zero(p.acc) for p in plans) + (inner,)
                     + tuple(_flush(p) for p in plans))
        out: n.Stmt = n.For(blk, mk.as_expr(0), mk.ceildiv(L.extent, k), n.ForKind.SERIAL, body)
        self.made.update({id(inner): inner, id(out): out})
        own = [p for p in plans if p.root is L]      # their compensation lives here
        if own:
            out = n.Seq(tuple(_zero(p.comp) for p in own) + (out,) + tuple(_fold(p) for p in own))
        for p in plans:
            out = n.Allocate(p.acc, out)
        for p in own:
            out = n.Allocate(p.comp, out)
        return out


class _Pass(Mutator):
    def __init__(self):
        super().__init__()
        self.made: dict = {}   # id -> loop (kept alive, so that ids stay unique)
        self.ranges: dict = {}  # var -> Range of the loops around the statement visited

    def visit_For(self, s):
        plans = (_plans(s, self.ranges) if s.kind not in _NO_SPLIT and id(s) not in self.made
                 else [])
        # for the loops inside s (copies of s inside its rewrite bind s.var again)
        prev = self.ranges.get(s.var)
        self.ranges[s.var] = n.Range(s.min, s.extent)
        try:
            return self._rewrite(s, plans) if plans else self.generic(s)
        finally:
            if prev is None:
                del self.ranges[s.var]
            else:
                self.ranges[s.var] = prev

    def _rewrite(self, s: n.For, plans: list) -> n.Stmt:
        for p in plans:
            p.acc = _local(f"{p.buffer.name}.acc", p.buffer.dtype, _shape(p))
            p.comp = _local(f"{p.buffer.name}.comp", p.buffer.dtype, _shape(p))
        rewrite = _Rewrite(plans, self.made)
        around = [p for p in plans if p.loop is not s]   # compensated across loops around L
        L = around[0].loop if around else None
        if (len(around) == len(plans) and all(p.loop is L for p in plans)
                and s.kind in _BLOCKABLE and not free_vars(L.extent) & plans[0].outer):
            out = self._by_root(s, L, plans, rewrite)
        else:
            out = rewrite.visit(s)
        # then the sums whose outermost reduction loop lies deeper (the new loops hold none)
        out = self.generic(out)
        if around:
            out = n.Seq(tuple(_zero(p.comp) for p in around) + (out,)
                        + tuple(_fold(p) for p in around))
        for p in around:
            out = n.Allocate(p.comp, out)
        return out

    def _by_root(self, s: n.For, L: n.For, plans: list, rewrite: _Rewrite) -> n.Stmt:
        """A sum over ``s`` (the root) and an inner loop ``L`` whose extent ``s`` does not
        change: when L is short (a 2-D sum of an (n, 2) array), blocks of the root's iterations
        share one accumulator, so a flush serves ~BLOCK terms, not a few; else L is blocked."""
        d = L.extent.dtype
        per = mk.mul(mk.max_(L.extent, mk.as_expr(1, d)), mk.as_expr(max(p.terms for p in plans), d))
        short = mk.compare(n.CmpOp.LE, per, mk.as_expr(BLOCK, d))
        k = mk.max_(mk.floordiv(mk.as_expr(BLOCK, d), per), mk.as_expr(1, d))
        rewrite.keep = {id(L)}
        try:
            body = rewrite.visit(s.body)
        finally:
            rewrite.keep = set()
        # the flush runs outside the root's iterations: under the fold's guards, not L's
        blk = n.var(f"{s.var.name}.blk")
        inner = n.For(s.var, mk.add(s.min, mk.mul(blk, k)),
                      mk.min_(k, mk.sub(s.extent, mk.mul(blk, k))), s.kind, body, s.thread)
        loop = n.For(blk, mk.as_expr(0), mk.ceildiv(s.extent, k), n.ForKind.SERIAL,
                     n.Seq(tuple(_zero(p.acc) for p in plans) + (inner,)
                           + tuple(_tiled(p, _neumaier(p), p.folds) for p in plans)))
        rewrite.versioned = False
        try:
            long = rewrite.visit(s)
        finally:
            rewrite.versioned = True
        self.made.update({id(inner): inner, id(loop): loop, id(long): long})
        out: n.Stmt = loop
        for p in plans:
            out = n.Allocate(p.acc, out)
        return n.IfThenElse(short, out, long)
