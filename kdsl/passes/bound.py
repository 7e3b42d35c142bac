"""Bound inference: the region of each stage that its attach point needs.

For a stage computed at the root, the region is its whole domain.  For a
producer attached with ``compute_at(T, axis)``, the region is the hull of all
its readers' accesses during one iteration of ``axis``: loops enclosing the
attach point are fixed, loops inside it range over their extents.  For a
consumer attached to its producer P, the region is what P writes during one
iteration of ``axis``; the consumer must read P elementwise.

Results are ``Domain`` records keyed by stage handle.  Allocation extents are
upper bounds that do not depend on enclosing loop variables; the part of a
region that falls outside a stage's own domain is masked by guards at lowering.
A region never exceeds the stage's domain where it starts inside it (splits
that do not divide never make it grow), and where an index cannot be bounded
(a data-dependent index) the region is the whole axis: always correct.

As the ``bound_inference`` pass (``infer_bounds``):
Assumes: ``state.placement`` (placements that ``kdsl.schedule.legality``
accepted: readers inside the attach loop, consumers reading elementwise outside
reduction loops) and ``state.handles`` (inlined stages removed).
Guarantees: ``state.domains`` maps every handle to its ``Domain``; every extent
in it is invariant in the loops enclosing the attach point.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import InternalCompilerError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.bounds import RangeMap, Unbounded, bound, const_upper
from ..ir.simplify import simplify
from ..ir.visitor import collect, substitute
from ..schedule.legality import consumer_dims
from ..schedule.records import AttachKind, Split
from ..schedule.schedule import leaf_values
from .ragged import ragged_reduce_ranges
from .scopes import attr_table, relaxed_loops, stage_scope


@dataclass
class Domain:
    """Where a stage is computed and over which region of its spatial axes."""

    mins: dict         # spatial root IterVar -> Expr (in scope at the attach point)
    extents: dict      # spatial root IterVar -> Expr (allocation/loop extent, loop-invariant)
    enclosing: list    # [(IterVar, extent Expr)] loops around the attach point, outermost first
    leaf_extent: dict  # every IterVar of the stage (root, split, fused) -> extent Expr
    root_value: dict   # root IterVar -> absolute index Expr over leaf vars
    guards: list       # [(cond Expr, IterKind of the split parent or None)]
    restricted: bool   # True when the region may be smaller than the stage's own domain
    #: split/fused IterVars that are neither roots nor leaves -> value over leaf vars
    derived: dict = None
    #: the domain bounds of a padded cache (``cache_read(pad=True)``): where they fail the
    #: copy stores zero instead of skipping the element (they are not in ``guards``)
    pad_guards: list = None
    #: the conditions of ``guards`` that bound the region by the stage's own domain (the
    #: others: uneven splits, written-here tests); ``padded_compute`` may drop them
    domain_guards: list = None


#: a region that is the whole axis (an index that cannot be bounded)
_WHOLE = "whole"


def _floordiv_span(ext):
    """An upper bound of ``(x + c) // d - x // d + k`` for every x: ``c // d + 1 + k``.

    The extent of a region read through a fused-then-split loop has this form
    (``x`` the outer loop's offset, ``d`` the fused inner extent), which
    interval analysis alone cannot bound over ``x``.
    """
    from ..ir.simplify import linear
    lin = linear(ext)
    pos = [(t, k) for t, k in lin.terms.items() if k == 1]
    neg = [(t, k) for t, k in lin.terms.items() if k == -1]
    if len(pos) != 1 or len(neg) != 1 or len(lin.terms) != 2:
        return None
    hi, lo = pos[0][0], neg[0][0]
    fd = n.BinOp.FLOORDIV
    if not (type(hi) is n.Binary and hi.op is fd and type(lo) is n.Binary and lo.op is fd and hi.b == lo.b):
        return None
    diff = linear(hi.a).add(linear(lo.a).scale(-1))
    if diff.terms or diff.const < 0:
        return None
    d = hi.b
    if type(d) is n.Const:
        return mk.as_expr(diff.const // max(d.value, 1) + 1 + lin.const)
    # symbolic divisor d >= 1: c // d <= c
    return mk.as_expr(diff.const + 1 + lin.const)


def _inside(r, h) -> bool:
    """True when stage ``r`` is attached (directly or through others) inside ``h``'s loops."""
    while r.attach is AttachKind.AT:
        r = r.attach_stage
        if r is h:
            return True
    return False


def _ranges(loops) -> dict:
    return {iv.var: n.Range(mk.as_expr(0), ext) for iv, ext in loops}


class BoundInference:
    """Computes a ``Domain`` for every stage handle of a schedule (memoised, cycle-checked)."""

    def __init__(self, sched, handles, placement=None):
        from ..schedule.legality import Placement
        self.placement = placement or Placement(sched, "lowering")
        self.sched = sched
        self.handles = handles          # stage handles that are lowered (inline ones removed)
        self.attrs = attr_table(handles)
        self.result: dict = {}
        self._busy: set = set()
        self._loop_ext: dict = {}       # handle -> root axis -> per-iteration loop extent
        #: array extents are >= 0 (and stay symbolic above)
        # one RangeMap for every query (bound() would rebuild it from a dict each time)
        self.shapes = RangeMap.of({v: (0, None) for v in sched.graph.shape_vars()})

    def run(self) -> dict:
        # consumers first: a producer's region comes from its readers' domains, so the
        # memoised recursion stays shallow along a chain of thousands of attached stages
        for h in reversed(self.handles):
            self.domain(h)
        return self.result

    # ------------------------------------------------------------------
    def domain(self, h) -> Domain:
        if h in self.result:
            return self.result[h]
        if h in self._busy:
            raise InternalCompilerError(f"compute_at placements form a cycle through stage {h.name}")
        self._busy.add(h)
        if h.attach is AttachKind.AT:
            t = h.attach_stage
            td = self.domain(t)
            idx = t.leaf.index(h.attach_axis)
            enclosing = td.enclosing + [(iv, td.leaf_extent[iv]) for iv in t.leaf[:idx + 1]]
            relaxed = self._relaxed(h, enclosing)
            if self.placement.kind[h] == "producer":
                mins, exts = self._producer_region(h, enclosing, relaxed)
            else:
                mins, exts = self._consumer_region(h, t, idx, enclosing, relaxed)
            restricted = True
        else:
            enclosing = []
            mins = {a: a.dom.min for a in h.stage.axes}
            exts = {a: a.dom.extent for a in h.stage.axes}
            restricted = False
        root_ext = dict(exts)
        # a producer whose loops run over the region of this iteration of the enclosing loops
        # (``StageSchedule.loops_per_iteration``: a causal chain's scores end at the block's
        # diagonal); its buffer keeps the loop-invariant extent
        root_ext.update(self._loop_ext.get(h, {}))
        # a reduction whose bounds use other axes (``kd.reduce_axis((0, i + 1))``): its
        # range is over their values at this point of the nest (kdsl.passes.ragged)
        red_min = ragged_reduce_ranges(h, mins, root_ext)
        value, leaf_ext, split_guards = leaf_values(h, root_ext)
        root_value = {}
        for a in h.stage.axes:
            root_value[a] = mk.add(mins[a], value[a])
        for r in h.stage.reduce_axes:
            root_value[r] = mk.add(red_min.get(r, r.dom.min), value[r])
        guards = [(g, rel.parent.kind) for g, rel in split_guards]
        padded, own = [], []
        if restricted:
            outer = _ranges(enclosing)
            for a in h.stage.axes:
                v = root_value[a]
                if not self._at_least(mins[a], a.dom.min, outer):
                    own.append((mk.compare(n.CmpOp.GE, v, a.dom.min), n.IterKind.SPATIAL))
                own.append((mk.lt(v, mk.add(a.dom.min, a.dom.extent)), n.IterKind.SPATIAL))
            (padded if getattr(h, "pad", False) else guards).extend(own)
            if self.placement.kind[h] == "consumer":
                guards += [(g, n.IterKind.SPATIAL) for g in self._written_here(h, root_value)]
        roots = set(h.stage.axes) | set(h.stage.reduce_axes)
        derived = {iv: v for iv, v in value.items() if iv not in roots and iv not in h.leaf}
        d = Domain(mins, exts, enclosing, leaf_ext, root_value, guards, restricted, derived,
                   [g for g, _ in padded], [] if padded else [g for g, _ in own])
        self.result[h] = d
        self._busy.discard(h)
        return d

    def _relaxed(self, h, enclosing) -> dict:
        """Ranges of the enclosing loops whose iterations share ``h``'s buffer (its scope spans
        their thread tags): the region is the union over them (``kdsl.passes.scopes``)."""
        if h in self.placement.full_buffer or not any(self.attrs.get(iv) is not None
                                                       and self.attrs[iv].thread is not None
                                                       for iv, _ in enclosing):
            return {}
        scope = stage_scope(h, self.attrs, enclosing, False)
        return _ranges(relaxed_loops(scope, self.attrs, enclosing))

    def _written_here(self, h, root_value) -> list:
        """Guards that keep a consumer to the points its producer wrote in this iteration.

        Through a fused loop the region is a hull (a run of a fused row-major
        range covers parts of rows): a point of the hull that the producer
        writes in a later iteration is skipped now (it would read a value not
        yet computed, or race with that iteration when the loop is parallel).
        """
        t = h.attach_stage
        idx = t.leaf.index(h.attach_axis)
        fused = set()
        for rel in t.relations:
            if isinstance(rel, Split):
                if rel.parent in fused:
                    fused |= {rel.outer, rel.inner}
            else:
                fused.add(rel.fused)
        fixed = t.leaf[:idx + 1]
        if not any(iv in fused for iv in fixed):
            return []
        td = self.domain(t)
        reads = collect(h.stage.body, lambda x: isinstance(x, n.TensorRead) and x.tensor in t.stage.values)
        dims = consumer_dims(reads, h, t)
        vals = {pa: mk.sub(root_value[a], td.mins[pa]) for pa, a in zip(t.stage.axes, dims) if a is not None}
        for rel in t.relations:      # forward: the producer's loop values at this point
            if isinstance(rel, Split):
                if rel.parent in vals:
                    ie = td.leaf_extent[rel.inner]
                    vals[rel.outer] = mk.floordiv(vals[rel.parent], ie)
                    vals[rel.inner] = mk.mod(vals[rel.parent], ie)
            elif rel.outer in vals and rel.inner in vals:
                vals[rel.fused] = mk.add(mk.mul(vals[rel.outer], td.leaf_extent[rel.inner]), vals[rel.inner])
        return [mk.eq(vals[iv], iv.var) for iv in fixed if iv in vals]

    def _at_least(self, lo, floor, outer) -> bool:
        """``lo >= floor`` for every iteration of the enclosing loops (a constant ``floor``)."""
        if type(floor) is not n.Const:
            return False
        try:
            least, _ = bound(lo, outer, self.shapes)
        except Unbounded:
            return False
        return type(least) is n.Const and least.value >= floor.value

    def _loops_of(self, r) -> list:
        d = self.domain(r)
        return d.enclosing + [(iv, d.leaf_extent[iv]) for iv in r.leaf]

    def _producer_region(self, h, enclosing, relaxed):
        fixed = [iv for iv, _ in enclosing]
        lo_hi = {a: None for a in h.stage.axes}
        # readers computed inside h's own loops read what the current iteration wrote (legality
        # checked it): they need no region of their own
        readers = [r for r in self.placement.readers[h] if not _inside(r, h)]
        for r in readers:
            loops = self._loops_of(r)
            prefix = [iv for iv, _ in loops[:len(fixed)]]
            if len(loops) < len(fixed) or any(a is not b for a, b in zip(prefix, fixed)):
                raise InternalCompilerError(f"bound inference: stage {h.name} is computed inside loop "
                                            f"{fixed[-1].name}, but its reader {r.name} runs outside it")
            relax = RangeMap.of({**relaxed, **_ranges(loops[len(fixed):])})
            rd = self.domain(r)
            env = dict(rd.root_value)
            reads = collect(r.stage.body, lambda x: isinstance(x, n.TensorRead) and x.tensor in h.stage.values)
            # bound() is a function of the index (it starts a fresh budget): a reader reading
            # one index many times (a sorting network's stages) bounds it once
            done: dict = {}
            for rd_ in reads:
                for a, ie in zip(h.stage.axes, rd_.indices):
                    if lo_hi[a] == _WHOLE:
                        continue
                    e = substitute(ie, {iv.var: env[iv] for iv in env})
                    got = done.get(e)
                    if got is None:
                        try:
                            got = done[e] = bound(e, relax, self.shapes)
                        except Unbounded:
                            got = done[e] = _WHOLE
                    if got == _WHOLE:     # e.g. an index read from a tensor: the whole axis
                        lo_hi[a] = _WHOLE
                        continue
                    lo, hi = got
                    if lo_hi[a] is None:
                        lo_hi[a] = (lo, hi)
                    else:
                        plo, phi = lo_hi[a]
                        lo_hi[a] = (mk.min_(plo, lo), mk.max_(phi, hi))
        outer = _ranges(enclosing)
        whole = h.tensorized is not None or (
            getattr(h, "pad", False) and any(r.tensorized is not None for r in readers))
        mins, exts = {}, {}
        for a in h.stage.axes:
            if lo_hi[a] is None or lo_hi[a] == _WHOLE:
                mins[a], exts[a] = a.dom.min, a.dom.extent
                continue
            lo, hi = (simplify(x) for x in lo_hi[a])
            # a tensorized stage keeps its whole tile (the intrinsic's shape; the edges are
            # clipped by the tensor statements), even past a small constant dimension; so does a
            # padded cache a tensorized stage reads (its zeros fill the tile the intrinsic loads)
            mins[a], exts[a] = self._region(lo, hi, outer, a, widen=True, clamp=not whole)
            if h.loops_per_iteration:
                # this iteration's extent for the loops (the buffer keeps the invariant one)
                span = simplify(mk.add(mk.sub(hi, mins[a]), 1))
                self._loop_ext.setdefault(h, {})[a] = simplify(
                    mk.max_(mk.min_(exts[a], span), mk.as_expr(0)))
        return mins, exts

    def _region(self, lo, hi, outer, a, widen=False, clamp=True):
        """(min, loop-invariant extent) of the region [lo, hi] along root axis ``a``.

        Where ``lo`` never falls below the domain, the extent is at most the
        domain's; where no loop-invariant extent can be found, the whole axis.
        """
        inside = clamp and self._at_least(lo, a.dom.min, outer)
        span = simplify(mk.add(mk.sub(hi, lo), 1))
        ext = self._invariant_upper(span, outer, a, widen, inside)
        if ext is None:
            return a.dom.min, a.dom.extent
        if clamp and not inside and not self._covers(ext, span, outer):
            # an extent that moves with the enclosing loops is capped at the domain's, valid
            # only for a region that starts inside the domain: start it there (F34: the union
            # of columns [32xo, 32xo+32) and their mirror m-1-j starts at m-32xo-32 < 0; the
            # elements before the domain are never read, the guards skip them)
            lo = simplify(mk.max_(lo, a.dom.min))
            ext = self._invariant_upper(simplify(mk.add(mk.sub(hi, lo), 1)), outer, a, widen)
            if ext is None:
                return a.dom.min, a.dom.extent
        return lo, ext

    def _covers(self, ext, span, outer) -> bool:
        """``ext >= span`` for every iteration of the enclosing loops."""
        try:
            _, top = bound(simplify(mk.sub(span, ext)), outer, self.shapes)
        except Unbounded:
            return False
        return type(top) is n.Const and top.value <= 0

    def _invariant_upper(self, ext, outer_ranges, a, widen=False, inside=False):
        """An extent for the region that no enclosing loop changes: the largest one (None: none found).

        ``inside``: the region starts inside the domain, so it needs no more
        than the domain's extent.  ``widen`` (producers only: the extra elements
        land in the producer's own buffer, and the domain guards keep their reads
        in bounds): where that extent is at most a constant for every array size
        (a tile), the constant, which lets codegen keep the tile in registers.
        """
        loop_vars = set(outer_ranges)
        if any(v in loop_vars for v in collect(ext, lambda x: isinstance(x, n.Var))):
            span = _floordiv_span(ext)     # tighter than interval analysis where it applies
            if span is not None:
                ext = span
            else:
                try:
                    _, ext = bound(ext, outer_ranges, self.shapes)
                except Unbounded:
                    return None
            ext = simplify(mk.min_(ext, a.dom.extent))
        elif inside and type(a.dom.extent) is n.Const:     # (a symbolic min would hide a constant tile)
            ext = simplify(mk.min_(ext, a.dom.extent))
        top = const_upper(ext) if widen else None
        return ext if top is None else mk.as_expr(top)

    def _consumer_region(self, h, p, idx, enclosing, relaxed):
        inner = p.leaf[idx + 1:]
        if any(a.kind is n.IterKind.REDUCE for a in p.leaf[:idx + 1]) and p.stage.is_reduction:
            raise InternalCompilerError(f"bound inference: {h.name} is attached inside the reduction loops "
                                        f"of {p.name}")
        pd = self.domain(p)
        relax = {**relaxed, **{iv.var: n.Range(mk.as_expr(0), pd.leaf_extent[iv]) for iv in inner}}
        reads = collect(h.stage.body, lambda x: isinstance(x, n.TensorRead) and x.tensor in p.stage.values)
        dims = consumer_dims(reads, h, p)
        if dims is None:
            raise InternalCompilerError(f"bound inference: consumer {h.name} does not read {p.name} at its axes")
        outer = _ranges(enclosing)
        mins = {a: a.dom.min for a in h.stage.axes}       # axes that index no axis of p: whole
        exts = {a: a.dom.extent for a in h.stage.axes}
        for a, pa in ((a, pa) for pa, a in zip(p.stage.axes, dims) if a is not None):
            try:
                lo, hi = bound(pd.root_value[pa], relax, self.shapes)
            except Unbounded:
                mins[a], exts[a] = a.dom.min, a.dom.extent
                continue
            mins[a], exts[a] = self._region(simplify(lo), simplify(hi), outer, a)
        return mins, exts


def infer_bounds(state):
    """The ``bound_inference`` pass: ``state.domains`` (see the module docstring)."""
    placement, handles = state.need("placement", "handles", by="bound_inference")
    return dataclasses.replace(state, domains=BoundInference(state.sched, list(handles), placement).run())
