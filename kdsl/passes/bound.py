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
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.bounds import Unbounded, bound
from ..ir.simplify import simplify
from ..ir.visitor import collect, substitute
from ..schedule.records import AttachKind
from ..schedule.schedule import leaf_values


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


def _ranges(loops) -> dict:
    return {iv.var: n.Range(mk.as_expr(0), ext) for iv, ext in loops}


def _const_upper(e):
    """A constant that ``e`` never exceeds, read off min/+ structure (None if none shows)."""
    if type(e) is n.Const:
        return e.value
    if type(e) is not n.Binary:
        return None
    a, b = _const_upper(e.a), _const_upper(e.b)
    if e.op is n.BinOp.MIN:
        sides = [x for x in (a, b) if x is not None]
        return min(sides) if sides else None
    if e.op is n.BinOp.MAX:
        return None if a is None or b is None else max(a, b)
    if e.op is n.BinOp.ADD:
        return None if a is None or b is None else a + b
    if e.op is n.BinOp.SUB and type(e.b) is n.Const:
        return None if a is None else a - e.b.value
    return None


class BoundInference:
    """Computes a ``Domain`` for every stage handle of a schedule (memoised, cycle-checked)."""

    def __init__(self, sched, handles):
        self.sched = sched
        self.handles = handles          # stage handles that are lowered (inline ones removed)
        self.result: dict = {}
        self._busy: set = set()
        self._reader_map = None
        self._order = {h: k for k, h in enumerate(handles)}
        #: array extents are >= 0 (and stay symbolic above)
        self.shapes = {v: (0, None) for v in sched.graph.shape_vars()}

    def run(self) -> dict:
        # consumers first: a producer's region comes from its readers' domains, so the
        # memoised recursion stays shallow along a chain of thousands of attached stages
        for h in reversed(self.handles):
            self.domain(h)
        return self.result

    def _readers(self, h) -> list:
        """The lowered handles that read a value of ``h``, in order (one map for all stages)."""
        if self._reader_map is None:
            self._reader_map = {}
            for r in self.handles:
                for t in r.stage.reads():
                    self._reader_map.setdefault(t, []).append(r)
        out = []
        for t in h.stage.values:
            for r in self._reader_map.get(t, ()):
                if r is not h and r not in out:
                    out.append(r)
        return sorted(out, key=self._order.__getitem__) if len(h.stage.values) > 1 else out

    # ------------------------------------------------------------------
    def domain(self, h) -> Domain:
        if h in self.result:
            return self.result[h]
        if h in self._busy:
            raise ScheduleError(f"compute_at placements form a cycle through stage {h.name}")
        self._busy.add(h)
        if h.attach is AttachKind.AT:
            t = h.attach_stage
            td = self.domain(t)
            idx = t.leaf.index(h.attach_axis)
            enclosing = td.enclosing + [(iv, td.leaf_extent[iv]) for iv in t.leaf[:idx + 1]]
            if self.sched.depends(t, h):
                mins, exts = self._producer_region(h, enclosing)
            else:
                mins, exts = self._consumer_region(h, t, idx, enclosing)
            restricted = True
        else:
            enclosing = []
            mins = {a: a.dom.min for a in h.stage.axes}
            exts = {a: a.dom.extent for a in h.stage.axes}
            restricted = False
        root_ext = dict(exts)
        value, leaf_ext, split_guards = leaf_values(h, root_ext)
        root_value = {}
        for a in h.stage.axes:
            root_value[a] = mk.add(mins[a], value[a])
        for r in h.stage.reduce_axes:
            root_value[r] = mk.add(r.dom.min, value[r])
        guards = [(g, rel.parent.kind) for g, rel in split_guards]
        if restricted:
            outer = _ranges(enclosing)
            for a in h.stage.axes:
                v = root_value[a]
                if not self._at_least(mins[a], a.dom.min, outer):
                    guards.append((mk.compare(n.CmpOp.GE, v, a.dom.min), n.IterKind.SPATIAL))
                guards.append((mk.lt(v, mk.add(a.dom.min, a.dom.extent)), n.IterKind.SPATIAL))
        d = Domain(mins, exts, enclosing, leaf_ext, root_value, guards, restricted)
        self.result[h] = d
        self._busy.discard(h)
        return d

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

    def _producer_region(self, h, enclosing):
        fixed = [iv for iv, _ in enclosing]
        lo_hi = {a: None for a in h.stage.axes}
        readers = self._readers(h)
        for r in readers:
            loops = self._loops_of(r)
            prefix = [iv for iv, _ in loops[:len(fixed)]]
            if len(loops) < len(fixed) or any(a is not b for a, b in zip(prefix, fixed)):
                raise ScheduleError(
                    f"compute_at: stage {h.name} is computed inside loop {fixed[-1].name}, but its reader "
                    f"{r.name} runs outside that loop",
                    hint=f"attach {h.name} to a loop that encloses every reader, or attach {r.name} there too")
            relax = _ranges(loops[len(fixed):])
            rd = self.domain(r)
            env = dict(rd.root_value)
            reads = collect(r.stage.body, lambda x: isinstance(x, n.TensorRead) and x.tensor in h.stage.values)
            for rd_ in reads:
                for a, ie in zip(h.stage.axes, rd_.indices):
                    e = substitute(ie, {iv.var: env[iv] for iv in env})
                    try:
                        lo, hi = bound(e, relax, self.shapes)
                    except Unbounded:
                        raise ScheduleError(f"compute_at: cannot bound the region of {h.name} that "
                                            f"{r.name} reads (index {e!r} is not affine)") from None
                    if lo_hi[a] is None:
                        lo_hi[a] = (lo, hi)
                    else:
                        plo, phi = lo_hi[a]
                        lo_hi[a] = (mk.min_(plo, lo), mk.max_(phi, hi))
        outer = _ranges(enclosing)
        mins, exts = {}, {}
        for a in h.stage.axes:
            if lo_hi[a] is None:
                mins[a], exts[a] = a.dom.min, a.dom.extent
                continue
            lo, hi = (simplify(x) for x in lo_hi[a])
            ext = simplify(mk.add(mk.sub(hi, lo), 1))
            mins[a], exts[a] = lo, self._invariant_upper(ext, outer, h, a, widen=True)
        return mins, exts

    def _invariant_upper(self, ext, outer_ranges, h, a, widen=False):
        """An extent for the region that no enclosing loop changes: the largest one.

        ``widen`` (producers only: the extra elements land in the producer's own
        buffer, and the domain guards keep their reads in bounds): where that
        extent is at most a constant for every array size (a tile), the
        constant, which lets codegen keep the tile in registers.
        """
        loop_vars = set(outer_ranges)
        if any(v in loop_vars for v in collect(ext, lambda x: isinstance(x, n.Var))):
            try:
                _, hi = bound(ext, outer_ranges, self.shapes)
            except Unbounded:
                raise ScheduleError(f"compute_at: the region of {h.name} along {a.name} has no fixed size") from None
            ext = simplify(mk.min_(hi, a.dom.extent))
        top = _const_upper(ext) if widen else None
        return ext if top is None else mk.as_expr(top)

    def _consumer_region(self, h, p, idx, enclosing):
        inner = p.leaf[idx + 1:]
        if any(a.kind is n.IterKind.REDUCE for a in p.leaf[:idx + 1]) and p.stage.is_reduction:
            raise ScheduleError(f"compute_at: {h.name} reads the finished result of {p.name}, so it must be "
                                f"attached outside {p.name}'s reduction loops",
                                hint=f"pick a spatial axis of {p.name} that encloses its reduction loops")
        pd = self.domain(p)
        relax = {iv.var: n.Range(mk.as_expr(0), pd.leaf_extent[iv]) for iv in inner}
        reads = collect(h.stage.body, lambda x: isinstance(x, n.TensorRead) and x.tensor in p.stage.values)
        for rd_ in reads:
            if len(rd_.indices) != len(h.stage.axes) or any(
                    not (i is a.var) for i, a in zip(rd_.indices, h.stage.axes)):
                raise ScheduleError(f"compute_at: consumer {h.name} must read {p.name} elementwise "
                                    f"({p.name}[{', '.join(a.name for a in h.stage.axes)}]) to be computed "
                                    "inside its loops")
        outer = _ranges(enclosing)
        mins, exts = {}, {}
        for a, pa in zip(h.stage.axes, p.stage.axes):
            lo, hi = bound(pd.root_value[pa], relax, self.shapes)
            mins[a] = simplify(lo)
            exts[a] = self._invariant_upper(simplify(mk.add(mk.sub(hi, lo), 1)), outer, h, a)
        return mins, exts
