"""scan_tiles: an associative scan's tiles scanned by a block's threads together (a
schedule-level pass of the GPU table, right after ``loop_nests``; issue 25).

The GPU default schedule (kdsl.backends.scan_schedules) marks a scan stage with a
``TileScan`` (``ScanInfo.tile``, kdsl.schedule.scan_tile): its scan axis is split into block
loops and an inner loop ``k`` over one *tile* (a segment of the blocked scan, or the whole
axis), the block loops bound to blockIdx, ``k`` serial.  This pass replaces the loop over
``k``.  A tile of at most ``per * T`` elements (``TileScan.most``; ``T`` threads) that fits
in ``STAGE_BYTES`` goes through shared memory (CUB's block scan with transposed loads):

    for lane: for r in range(per): if r*T + lane < m: tile[r*T + lane] = g(r*T + lane)   # coalesced
    for lane: run = tile[lane*per] (+) ... (+) tile[lane*per + per - 1]         # a thread's run
              totals[lane] = cross_thread_scan(run)                               # shuffles
    for lane: c = (tiles before) (+) totals[lane - 1]; tile[lane*per + e] = c (+)= tile[..]
    for lane: for r in range(per): out[r*T + lane] = tile[r*T + lane]                  # coalesced

(``m``: the tile's length, a partial last tile guarded; ``per`` odd: a run's elements fall
in distinct banks).  Other tiles (length unknown, or too long) are scanned row by row: each
row of ``T`` elements loaded, scanned across the block (``CrossThreadReduce(scan=True)``)
and offset by the element before the row, which the row's last thread stored before a
barrier.  The ``sync`` pass puts the barriers between the phases; sequential executors get
the cross-thread scan's phases from ``lower_cross_thread``.

Assumes: ``loop_nests`` ran; a marked stage's innermost leaf is the loop over its tile,
serial, without stages attached, and no loop of the stage is bound to a threadIdx tag.
Guarantees: no loop over a marked tile is left; its stores are those of the scan.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import InternalCompilerError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify as simplify_expr
from ..ir.visitor import Mutator, substitute
from ..passes.guards import seq
from ..passes.loop_nests import NestBuilder
from ..schedule.scan_tile import STAGE_BYTES, TileScan, itemsize
from .gates import scan_tile_handles


def _combine(comb: n.Combiner, a: n.Expr, b: n.Expr) -> n.Expr:
    return substitute(comb.result[0], {comb.lhs[0]: a, comb.rhs[0]: b})


def _tile(nb: NestBuilder, h, tile: TileScan) -> tuple:
    """(the tile loop's Var, the statement replacing that loop) for the marked stage ``h``."""
    st, dom = h.stage, nb.domains[h]
    if not h.leaf or nb.attached.get((h, h.leaf[-1])):
        raise InternalCompilerError(f"scan_tiles: stage {st.name}'s tile loop has stages attached")
    k = h.leaf[-1]
    t = st.axes[st.scan.axis]
    root_t = dom.root_value[t]
    step = simplify_expr(mk.sub(substitute(root_t, {k.var: mk.as_expr(1)}),
                                substitute(root_t, {k.var: mk.as_expr(0)})))
    if not mk.is_const(step, 1) or any(a.thread is not None and a.thread.is_thread for a in h.attrs.values()):
        raise InternalCompilerError(f"scan_tiles: stage {st.name} is not scheduled as tiles of its "
                                    "scan axis (the innermost loop over a tile, block loops outside)")
    T = tile.threads
    t0 = substitute(root_t, {k.var: mk.as_expr(0)})
    m = mk.min_(dom.leaf_extent[k], mk.sub(mk.add(t.dom.min, t.dom.extent), t0))
    lane = n.var(f"{t.name}.lane")
    buf, _ = nb.buffer_of(st.output)
    idx = nb.index(h, st.output)
    c = _Ctx(nb, h, tile, k, t, T, m, lane, buf, idx)
    per = -(-tile.most // T)            # a staged tile's elements per thread
    size = itemsize(buf.dtype)
    if per and per % 2 == 0 and (per + 1) * T * size <= STAGE_BYTES:
        per += 1                        # odd: a thread's run in distinct banks
    if 0 < per * T * size <= STAGE_BYTES:
        return k.var, _staged(c, per)
    return k.var, _rows(c)


@dataclass
class _Ctx:
    """What both forms of a tile read (``_tile``)."""
    nb: NestBuilder
    h: object
    tile: TileScan
    k: object               # the tile loop's IterVar
    t: object               # the scan axis
    T: int                  # threads
    m: n.Expr               # the tile's length
    lane: n.Var
    buf: n.Buffer           # the scan's output
    idx: tuple              # its indices, in the tile loop's variable

    def at(self, e, kk):
        """The stage-level expression ``e`` at step ``kk`` of the tile."""
        return substitute(self.nb.expr(self.h, e), {self.k.var: kk})

    def dst(self, kk):
        return tuple(substitute(i, {self.k.var: kk}) for i in self.idx)

    def carried(self, v):
        """``v`` (a combine inside the tile) with the tiles before it (a segmented scan)."""
        tile = self.tile
        if tile.carry is None:
            return v
        zero = mk.as_expr(0)
        return mk.select(self.at(tile.first, zero), v,
                         _combine(tile.combiner, self.at(tile.carry, zero), v))

    def threads(self, body):
        return n.For(self.lane, mk.as_expr(0), mk.as_expr(self.T), n.ForKind.BOUND, body,
                     n.ThreadTag.THREAD_X)


def _local(name, dtype):
    return n.Buffer(name, dtype, (mk.as_expr(1),), None, n.Scope.LOCAL)


def _staged(c: _Ctx, per: int) -> n.Stmt:
    """A tile of at most ``per * T`` elements through shared memory (module docstring)."""
    T, m, comb, name, dt = c.T, c.m, c.tile.combiner, c.h.stage.name, c.buf.dtype
    zero = (mk.as_expr(0),)
    sh = n.Buffer(f"{name}.tile", dt, (mk.as_expr(per * T),), None, n.Scope.SHARED)
    tot = n.Buffer(f"{name}.totals", dt, (mk.as_expr(T),), None, n.Scope.SHARED)
    # 1. the tile, row by row (coalesced), into shared memory
    r = n.var(f"{c.t.name}.row")
    pos = mk.add(mk.mul(r, T), c.lane)
    g = c.at(c.tile.g, pos)
    if g.dtype is not dt:
        g = mk.cast(g, dt)
    fill = c.threads(n.For(r, mk.as_expr(0), mk.as_expr(per), n.ForKind.UNROLLED,
                           n.IfThenElse(mk.lt(pos, m), n.Store(sh, (pos,), g))))
    # 2. each thread combines its run of ``per`` elements; a scan of the runs' totals
    base = mk.mul(c.lane, per)
    e = n.var(f"{c.t.name}.elem")
    at_e = mk.add(base, e)
    acc, res = _local(f"{name}.run", dt), _local(f"{name}.scan", dt)
    cur = n.Load(dt, acc, zero)
    own = seq([n.Store(acc, zero, n.Load(dt, sh, (mk.min_(base, mk.sub(m, 1)),))),
               n.For(e, mk.as_expr(1), mk.as_expr(per - 1), n.ForKind.UNROLLED,
                     n.IfThenElse(mk.lt(at_e, m), n.Store(acc, zero, _combine(comb, cur, n.Load(dt, sh, (at_e,))))))])
    ctr = n.CrossThreadReduce(comb, (cur,), (n.ThreadTag.THREAD_X,), (res,), scan=True)
    publish = n.Store(tot, (c.lane,), n.Load(dt, res, zero))
    runs = c.threads(n.Allocate(acc, seq([own, n.Allocate(res, seq([ctr, publish]))])))
    # 3. each run again, from the runs before it (and the tiles before), results in place
    run = _local(f"{name}.carry", dt)
    rv = n.Load(dt, run, zero)
    x0 = n.Load(dt, sh, (base,))
    before = n.Load(dt, tot, (mk.max_(mk.sub(c.lane, 1), 0),))
    start = n.IfThenElse(mk.eq(c.lane, 0), n.Store(run, zero, c.carried(x0)),
                         n.Store(run, zero, _combine(comb, c.carried(before), x0)))
    step = n.IfThenElse(mk.lt(at_e, m), seq([
        n.Store(run, zero, _combine(comb, rv, n.Load(dt, sh, (at_e,)))), n.Store(sh, (at_e,), rv)]))
    rescan = c.threads(n.IfThenElse(mk.lt(base, m), n.Allocate(run, seq([
        start, n.Store(sh, (base,), rv),
        n.For(e, mk.as_expr(1), mk.as_expr(per - 1), n.ForKind.UNROLLED, step)]))))
    # 4. the results out, row by row (coalesced); the sync pass puts the barriers between
    out = c.threads(n.For(r, mk.as_expr(0), mk.as_expr(per), n.ForKind.UNROLLED,
                          n.IfThenElse(mk.lt(pos, m), n.Store(c.buf, c.dst(pos), n.Load(dt, sh, (pos,))))))
    return n.Allocate(sh, n.Allocate(tot, seq([fill, runs, rescan, out])))


def _rows(c: _Ctx) -> n.Stmt:
    """A tile of any length, row by row: each row of ``T`` elements scanned across the
    block, offset by the element before it (module docstring)."""
    T, m, comb, dt = c.T, c.m, c.tile.combiner, c.buf.dtype
    row = n.var(f"{c.t.name}.row")
    here = mk.add(mk.mul(row, T), c.lane)
    res = _local(f"{c.h.stage.name}.scan", dt)
    zero = (mk.as_expr(0),)
    y = n.Load(dt, res, zero)
    ctr = n.CrossThreadReduce(comb, (c.at(c.tile.g, mk.min_(here, mk.sub(m, 1))),),
                              (n.ThreadTag.THREAD_X,), (res,), scan=True)
    prev = n.Load(dt, c.buf, c.dst(mk.max_(mk.sub(mk.mul(row, T), 1), 0)))
    # an if, not a select: row 0 must not load (another lane of the row writes it)
    out = n.IfThenElse(mk.eq(row, 0), n.Store(res, zero, c.carried(y)),
                       n.Store(res, zero, _combine(comb, prev, y)))
    store = seq([out, n.IfThenElse(mk.lt(here, m), n.Store(c.buf, c.dst(here), y))])
    # the next row reads the element this row's last lane stored (a cross-thread scan
    # orders no memory by itself)
    body = n.Allocate(res, seq([ctr, store, n.Barrier()]))
    return c.threads(n.For(row, mk.as_expr(0), mk.ceildiv(m, T), n.ForKind.SERIAL, body))


class _Replace(Mutator):
    def __init__(self, by: dict):
        super().__init__()
        self.by, self.done = by, set()

    def visit_For(self, s: n.For):
        new = self.by.get(s.var)
        if new is not None:
            self.done.add(s.var)
            return new
        return self.generic(s)


def scan_tiles(state):
    """The ``scan_tiles`` pass (see the module docstring); ``state`` itself without marked
    stages."""
    handles = scan_tile_handles(state)
    if not handles:
        return state
    nb = NestBuilder(state)
    by = dict(_tile(nb, h, h.stage.scan.tile) for h in handles)
    r = _Replace(by)
    body = r.visit(state.func.body)
    if set(by) - r.done:
        raise InternalCompilerError("scan_tiles: the loop over a marked scan tile was not found")
    return dataclasses.replace(state, func=dataclasses.replace(state.func, body=body))
