"""scan_tiles: an associative scan's tiles scanned by a block's threads together (a
schedule-level pass of the GPU table, right after ``loop_nests``; issue 25).

The GPU default schedule (kdsl.backends.scan_schedules) marks a scan stage with a
``TileScan`` (``ScanInfo.tile``): its scan axis is split into a block loop and an inner
loop ``k`` over one *tile* (a segment of the blocked scan, or the whole axis), the block
loops bound to blockIdx, ``k`` serial.  This pass replaces the loop over ``k`` by

    for lane in range(threads):              # bound threadIdx.x
      for row in range(ceildiv(m, threads)):  # m: the tile's elements (a partial last tile)
        allocate S.scan: T[1] local
          S.scan[0] = cross_thread_scan(g(row * threads + lane clamped into the tile))
          if row * threads + lane < m:
            if row == 0: S[t] = first tile ? S.scan[0] : carry (+) S.scan[0]
            else:        S[t] = S[t0 + row * threads - 1] (+) S.scan[0]

Each row of ``threads`` consecutive elements is loaded coalesced, scanned across the block
(``CrossThreadReduce(scan=True)``: warp shuffles, warp totals through shared memory) and
offset by the element before the row, which the row's last thread stored before the scan's
barrier.  Rows past the tile's end run no iteration; lanes past it load a clamped element
and store nothing (an inclusive scan's later lanes never change earlier ones).  Sequential
executors get the scan's phases from ``lower_cross_thread`` like any cross-thread reduction.

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
from ..passes.loop_nests import NestBuilder


@dataclass(frozen=True)
class TileScan:
    """How ``scan_tiles`` runs one scan stage's tiles (stage-level expressions, in the
    stage's axis variables): ``combiner`` (the scan's ``(+)``), ``threads`` per block (a
    multiple of 32), ``g`` the element at the stage's own position, and for a segmented scan
    ``first`` (true on the first tile) and ``carry`` (the combine of every tile before it,
    read only where ``first`` is false); both None for a scan of one tile.  ``most``: see
    the field."""

    combiner: n.Combiner
    threads: int
    g: n.Expr
    first: n.Expr | None = None
    carry: n.Expr | None = None
    #: an upper bound of a tile's length (0: unknown): a tile that short is staged in
    #: shared memory first
    most: int = 0


#: the largest tile (elements) staged in shared memory before its scan
STAGE_MAX = 8192


def _combine(comb: n.Combiner, a: n.Expr, b: n.Expr) -> n.Expr:
    return substitute(comb.result[0], {comb.lhs[0]: a, comb.rhs[0]: b})


def _tile(nb: NestBuilder, h, tile: TileScan) -> tuple:
    """(the tile loop's Var, the statement replacing that loop) for the marked stage ``h``."""
    st, dom = h.stage, nb.domains[h]
    if not h.leaf or nb.attached.get((h, h.leaf[-1])):
        raise InternalCompilerError(f"scan_tiles: stage {st.name}'s tile loop has stages attached")
    k = h.leaf[-1]
    t = st.axes[st.scan.axis]
    at0 = dict(dom.root_value)
    root_t = at0[t]
    step = simplify_expr(mk.sub(substitute(root_t, {k.var: mk.as_expr(1)}),
                                substitute(root_t, {k.var: mk.as_expr(0)})))
    if not mk.is_const(step, 1) or any(a.thread is not None for a in h.attrs.values()
                                       if a.thread is not None and a.thread.is_thread):
        raise InternalCompilerError(f"scan_tiles: stage {st.name} is not scheduled as tiles of its "
                                    "scan axis (the innermost loop over a tile, block loops outside)")
    T = tile.threads
    t0 = substitute(root_t, {k.var: mk.as_expr(0)})
    m = mk.min_(nb.domains[h].leaf_extent[k], mk.sub(mk.add(t.dom.min, t.dom.extent), t0))
    lane = n.var(f"{t.name}.lane")
    row = n.var(f"{t.name}.row")
    here = mk.add(mk.mul(row, T), lane)

    def at(e, kk):
        return substitute(nb.expr(h, e), {k.var: kk})
    buf, _ = nb.buffer_of(st.output)
    idx = nb.index(h, st.output)
    res = n.Buffer(f"{st.name}.scan", buf.dtype, (mk.as_expr(1),), None, n.Scope.LOCAL)
    zero = (mk.as_expr(0),)
    y = n.Load(buf.dtype, res, zero)
    x = at(tile.g, mk.min_(here, mk.sub(m, 1)))
    rows_most = -(-tile.most // T)
    staged = 0 < rows_most * T <= STAGE_MAX
    if staged:      # the tile first, into shared memory: every row's load in flight at once
        sh = n.Buffer(f"{st.name}.tile", x.dtype, (mk.as_expr(rows_most * T),), None, n.Scope.SHARED)
        r = n.var(f"{t.name}.ld")
        pos = mk.add(mk.mul(r, T), lane)
        fill = n.For(r, mk.as_expr(0), mk.as_expr(rows_most), n.ForKind.UNROLLED,
                     n.IfThenElse(mk.lt(pos, m), n.Store(sh, (pos,), at(tile.g, pos))))
        load = n.For(lane, mk.as_expr(0), mk.as_expr(T), n.ForKind.BOUND, fill, n.ThreadTag.THREAD_X)
        x = n.Load(x.dtype, sh, (mk.min_(here, mk.sub(m, 1)),))
    ctr = n.CrossThreadReduce(tile.combiner, (x,), (n.ThreadTag.THREAD_X,), (res,), scan=True)
    first = y
    if tile.carry is not None:
        first = mk.select(at(tile.first, mk.as_expr(0)),
                          y, _combine(tile.combiner, at(tile.carry, mk.as_expr(0)), y))
    dst = tuple(substitute(i, {k.var: here}) for i in idx)
    last = mk.max_(mk.sub(mk.mul(row, T), 1), 0)
    # the element before the row, as the row's last lane stored it: in the shared tile
    # (the results replace the elements there) or else in the output
    inplace = staged and sh.dtype is buf.dtype
    if inplace:
        prev = n.Load(buf.dtype, sh, (last,))
    else:
        prev = n.Load(buf.dtype, buf, tuple(substitute(i, {k.var: last}) for i in idx))
    # an if, not a select: row 0 must not load (another lane of the row writes it)
    out = n.IfThenElse(mk.eq(row, 0), n.Store(res, zero, first),
                       n.Store(res, zero, _combine(tile.combiner, prev, y)))
    put = [n.Store(buf, dst, y)] + ([n.Store(sh, (here,), y)] if inplace else [])
    store = n.Seq((out, n.IfThenElse(mk.lt(here, m), n.Seq(tuple(put)))))
    # the next row reads the element this row's last lane stored (a cross-thread scan
    # orders no memory by itself)
    body = [ctr, store, n.Barrier()]
    body = n.Allocate(res, n.Seq(tuple(body)))
    rows = n.For(row, mk.as_expr(0), mk.ceildiv(m, T), n.ForKind.SERIAL, body)
    scan = n.For(lane, mk.as_expr(0), mk.as_expr(T), n.ForKind.BOUND, rows, n.ThreadTag.THREAD_X)
    if staged:
        return k.var, n.Allocate(sh, n.Seq((load, scan)))     # the sync pass puts the barrier
    return k.var, scan


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
    handles = [h for h in state.need("handles", by="scan_tiles")
               if getattr(getattr(h.stage, "scan", None), "tile", None) is not None]
    if not handles:
        return state
    nb = NestBuilder(state)
    by = dict(_tile(nb, h, h.stage.scan.tile) for h in handles)
    r = _Replace(by)
    body = r.visit(state.func.body)
    if set(by) - r.done:
        raise InternalCompilerError("scan_tiles: the loop over a marked scan tile was not found")
    return dataclasses.replace(state, func=dataclasses.replace(state.func, body=body))
