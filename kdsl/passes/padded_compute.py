"""padded_compute: register-tile stages fed by padded caches compute their whole tile, without
the guards of the arrays' edges (a schedule-level pass, after ``bound_inference``).

A tiled GEMM reads its operands through padded caches (``cache_read(pad=True)``: every
element of the shared tile written, zero beyond the matrix).  Bound inference still guards
everything computed from those tiles by the matrices' edges: each thread's copies into
registers (``row < N``, ``k < K``) and each multiply-add of its register tile.  At the arrays'
edges (blocks of the last row and column, every block when K is not a multiple of the k
step) those guards are most of the instructions of the main loop.  This pass drops them
where the padding makes them useless:

* **copies of a padded tile** -- a non-reduction stage in registers (``local``) whose body
  reads a zero-padded tensor at its own coordinates (a ``cache_read`` of it, same domain),
  whose region lies inside that tensor's (so every read hits a written element of its
  allocation), and whose only guards are its domain bounds: it loses them and is itself
  zero-padded (it holds the source's zeros beyond the array);
* **sums of products of padded tiles** -- a ``sum`` stage in registers whose every read is of
  a zero-padded tensor inside its region: its domain bounds go (the elements beyond the
  array are never read: its consumer stores only the array's elements), and so do the split
  guards of its reduction axis when every factor of the product (casts allowed) is zero from
  the reduction's end on (``A[i, k]`` zero for ``k >= K`` where ``A``'s k dimension is at most
  the reduction's extent, sizes a call checks equal counted equal): the extra terms are
  ``0 * 0 = +0``, and adding +0 to an accumulation that starts at +0 changes nothing (it can
  never be -0), so the result is exact.

Assumes: ``state.domains`` (``bound_inference``), with ``Domain.domain_guards``.
Guarantees: ``state.domains`` with those guards removed from the stages above (a new dict; the
other Domains are the same objects); nothing else changes.  Stages in shared or global memory,
tensorized stages, stages with a store predicate, ``where=`` reductions and reductions over
several axes keep their guards.
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.bounds import Unbounded, bound
from ..ir.simplify import prove, simplify
from ..ir.visitor import collect, substitute
from .gates import has_padded_stages
from ..schedule.records import AttachKind


def _candidate(h, placement) -> bool:
    return (h.scope is n.Scope.LOCAL and h.attach is AttachKind.AT and not h.pad
            and h.tensorized is None and h.store_predicate is None
            and placement.kind.get(h) == "producer")


def _ranges(dom, h) -> dict:
    """Var -> Range of the loops around and of stage ``h`` (its region's iteration space)."""
    loops = list(dom.enclosing) + [(iv, dom.leaf_extent[iv]) for iv in h.leaf]
    return {iv.var: n.Range(mk.as_expr(0), ext) for iv, ext in loops}


def _inside(read, h, dom, src, sdom) -> bool:
    """Whether every element stage ``h`` reads through TensorRead ``read`` (over all its loops,
    guards ignored) lies in the region of the producer ``src`` (constant extents), which
    is written whole."""
    if sdom is None or len(read.indices) != len(src.stage.axes):
        return False
    ranges = _ranges(dom, h)
    value = {iv.var: v for iv, v in dom.root_value.items()}
    for idx, ax in zip(read.indices, src.stage.axes):
        ext = sdom.extents.get(ax)
        if type(ext) is not n.Const:
            return False
        diff = simplify(mk.sub(substitute(idx, value), sdom.mins[ax]))
        try:
            lo, hi = bound(diff, ranges)
        except Unbounded:
            return False
        if not (type(lo) is n.Const and type(hi) is n.Const and lo.value >= 0 and hi.value < ext.value):
            return False
    return True


def _factors(e) -> list | None:
    """The TensorReads whose product (under casts) ``e`` is, or None."""
    if type(e) is n.Cast:
        return _factors(e.a)
    if type(e) is n.TensorRead:
        return [e]
    if type(e) is n.Binary and e.op is n.BinOp.MUL:
        a, b = _factors(e.a), _factors(e.b)
        return None if a is None or b is None else a + b
    return None


class _Padded:
    """The zero-padded tensors of a lowering and the guards that they make useless."""

    def __init__(self, state):
        self.domains, placement = state.domains, state.placement
        self.producer = {t: h for h in state.handles for t in h.stage.values}
        self.zero = {h.stage.output for h in state.handles if h.pad and h in self.domains}
        self.equal = {}
        for c in state.sched.graph.constraints:
            if type(c.lhs) is n.Var and type(c.rhs) is n.Var:
                self.equal[c.rhs] = c.lhs
        self.todo = [h for h in state.handles if _candidate(h, placement) and h in self.domains]

    def _reads_inside(self, h, dom, reads) -> bool:
        for r in reads:
            src = self.producer.get(r.tensor)
            if r.tensor not in self.zero or src is None or not _inside(r, h, dom, src, self.domains.get(src)):
                return False
        return True

    def copy(self, h, dom):
        """A copy of a zero-padded tensor at its own coordinates: no guards, itself padded."""
        body = h.stage.body
        if (h.stage.is_reduction or type(body) is not n.TensorRead or body.tensor not in self.zero
                or body.indices != tuple(a.var for a in h.stage.axes)):
            return None
        src = self.producer[body.tensor].stage
        if [a.dom.extent for a in src.axes] != [a.dom.extent for a in h.stage.axes]:
            return None
        own = {id(g) for g in dom.domain_guards or ()}
        if any(id(g) not in own for g, _ in dom.guards) or not self._reads_inside(h, dom, [body]):
            return None
        self.zero.add(h.stage.output)
        return dataclasses.replace(dom, guards=[])

    def sum_of_products(self, h, dom):
        """A sum over one axis of reads of zero-padded tensors: its domain bounds go, and its
        reduction's split guards where every factor is zero beyond the reduction's end."""
        red = h.stage.body
        if (not h.stage.is_reduction or red.combiner.kind is not n.CombinerKind.SUM or red.condition is not None
                or len(red.sources) != 1 or len(h.stage.reduce_axes) != 1 or len(h.stage.values) != 1
                or not all(type(i) is n.Const and i.value == 0 for i in red.combiner.identity)):
            return None
        reads = collect(red.sources[0], lambda x: type(x) is n.TensorRead)
        if not self._reads_inside(h, dom, reads):
            return None
        drop = {id(g) for g in dom.domain_guards or ()}
        (r,) = h.stage.reduce_axes
        factors = _factors(red.sources[0])
        if factors is not None and all(self._zero_from(f, r) for f in factors):
            drop |= {id(g) for g, kind in dom.guards if kind is n.IterKind.REDUCE}
        kept = [(g, k) for g, k in dom.guards if id(g) not in drop]
        return None if len(kept) == len(dom.guards) else dataclasses.replace(dom, guards=kept)

    def _zero_from(self, read, r) -> bool:
        """Whether zero-padded ``read`` is zero wherever reduction axis ``r`` is at or past its
        extent: it indexes a dimension by ``r`` alone whose size is at most ``r``'s extent."""
        src = self.producer[read.tensor].stage
        for idx, ax in zip(read.indices, src.axes):
            if idx is r.var and type(r.dom.min) is n.Const and r.dom.min.value == 0:
                size = substitute(ax.dom.extent, self.equal)
                limit = substitute(r.dom.extent, self.equal)
                return size == limit or prove(mk.compare(n.CmpOp.LE, size, limit)) is True
        return False

    def run(self) -> dict:
        out = dict(self.domains)
        changed = True
        while changed:          # a copy of a padded copy is padded too: to a fixed point
            changed = False
            for h in list(self.todo):
                dom = out[h]
                new = self.copy(h, dom) or self.sum_of_products(h, dom)
                if new is not None:
                    out[h] = new
                    self.todo.remove(h)
                    changed = True
        return out


def padded_compute(state):
    """The pass (see the module docstring)."""
    if not has_padded_stages(state):
        return state
    return dataclasses.replace(state, domains=_Padded(state).run())
