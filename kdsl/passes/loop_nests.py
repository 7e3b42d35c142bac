"""loop_nests: build the loop IR of a placed, bounded, stored schedule (a schedule-level pass).

Assumes: ``state.placement``, ``state.handles``, ``state.domains`` and
``state.storage`` (every tensor a stage reads has a buffer there).
Guarantees: ``state.func``, a ``LoweredFunc`` whose body holds only loop-IR
nodes (no TensorRead/Reduce), with ``bindings`` from storage and one
``TensorizeRequest`` per tensorized stage:
- root stages run in placement order; a stage attached at a loop runs inside
  it (producers before the attaching stage's body, consumers after), its
  buffers allocated where ``storage.allocs`` says;
- every guard (uneven splits, a region's domain bounds, a consumer's
  written-here test) sits right inside the innermost loop it depends on, except
  that a guard on a thread index never encloses a stage whose buffer the block's
  threads share (it moves onto the innermost statement: each thread does its
  part of a cooperative copy even where its own element is out of bounds);
  guards that load memory (a ``where=``, a data store predicate) are nested
  inside the index guards (``kdsl.passes.guards``);
- a padded cache (``cache_read(pad=True)``) has no guards for its domain's bounds: its
  store is ``if <in bounds>: X[i] = A[j] else: X[i] = 0`` (the form of a predicated
  ``AsyncCopy``), so every element of its region is written;
- reductions store their identity in an init nest outside their reduction
  loops (``kdsl.passes.reductions``); reduction loops bound to threadIdx
  make one ``CrossThreadReduce`` statement (``kdsl.passes.cross_thread``);
- a stage attached inside a block loop binds none of its own loops to a blockIdx tag
  (ScheduleError: ``check_block_bindings``).
"""
from __future__ import annotations

import dataclasses

from ..errors import InternalCompilerError, ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, collect, free_vars, substitute
from ..schedule.records import AttachKind, IterAttr, where
from .guards import guard, guard_all, guards_by_depth, seq
from .reductions import emit_reduction
from .state import LowerState


class _ToLoads(Mutator):
    """TensorRead -> Load through the buffer map, relative to each buffer's region minimum."""

    def __init__(self, nests):
        super().__init__()
        self.nests = nests

    def visit_TensorRead(self, r):
        r = self.generic(r)
        buf, offs = self.nests.buffer_of(r.tensor)
        idx = tuple(mk.sub(i, o) for i, o in zip(r.indices, offs))
        return n.Load(r.dtype, buf, idx)


class NestBuilder:
    """Emits the statements of one lowering from its state (used by ``build_loop_nests``)."""

    def __init__(self, state: LowerState):
        self.placement, self.handles, self.domains, self.storage = state.need(
            "placement", "handles", "domains", "storage", by="loop_nests")
        self.graph = state.sched.graph
        self.attached: dict = {}     # (handle, leaf) -> [attached handles]
        for h in self.handles:
            if h.attach is AttachKind.AT:
                self.attached.setdefault((h.attach_stage, h.attach_axis), []).append(h)
        self._coop: dict = {}
        self.thread_vars = {iv.var for h in self.handles for iv, a in h.attrs.items()
                            if a.thread is not None and a.thread.is_thread}

    def cooperative(self, h) -> bool:
        """True when a stage computed inside ``h``'s loops (``h`` included) keeps its values
        in a buffer that the threads of a block share (shared, or a global temporary): on a
        GPU every thread runs its part of it, so no per-thread guard may skip it."""
        got = self._coop.get(h)
        if got is None:
            scopes = {self.storage.buffers[t][0].scope for t in h.stage.values if t in self.storage.buffers}
            got = h.attach is AttachKind.AT and bool(scopes & {n.Scope.SHARED, n.Scope.GLOBAL}) and \
                not any(self.storage.buffers[t][0].param for t in h.stage.values if t in self.storage.buffers)
            got = got or any(self.cooperative(a) for iv in h.leaf for a in self.attached.get((h, iv), ()))
            self._coop[h] = got
        return got

    def _sink_thread_guards(self, h, leaves, at) -> dict:
        """Guards that depend on a thread index and would enclose a cooperative stage attached
        inside ``leaves`` move onto the innermost statement (the stage's own store): on a GPU
        the threads they turn off still do their part of the cooperative stage (whose own
        guards keep it in bounds).  Nothing moves without thread loops (CPU schedules)."""
        inner = len(leaves)
        coop = [any(self.cooperative(a) for a in self.attached.get((h, iv), ())) for iv in leaves]
        moved = []
        for k in range(inner):
            if not any(coop[k:]):
                break
            keep = []
            for g in at.get(k, []):
                uses = collect(g, lambda x: isinstance(x, n.Var))
                (moved if any(v in self.thread_vars for v in uses) else keep).append(g)
            at[k] = keep
        if moved:
            at[inner] = moved + at.get(inner, [])
        return at

    def buffer_of(self, t):
        try:
            return self.storage.buffers[t]
        except KeyError:
            raise InternalCompilerError(f"tensor {t.name} is read where it is not computed") from None

    def attr(self, h, iv) -> IterAttr:
        return h.attrs.get(iv, IterAttr())

    def wrap_loop(self, h, iv, ext, body) -> n.Stmt:
        """The loop for leaf ``iv`` around ``body``, with stages attached at ``iv`` inside it."""
        before, after = [], []
        for a in self.attached.get((h, iv), []):
            (before if self.placement.kind[a] == "producer" else after).append(self.emit(a))
        inner = seq(before + [body] + after)
        for b, stages in reversed(self.storage.allocs.get((h, iv), ())):
            inner = n.Allocate(b, inner, stages)
        attr = self.attr(h, iv)
        return n.For(iv.var, mk.as_expr(0), ext, attr.kind, inner, attr.thread)

    def nest(self, h, leaves, guards, innermost, attach=True) -> n.Stmt:
        """Loops over ``leaves`` around ``innermost``; each guard goes right inside the innermost
        loop it depends on.  ``attach=False`` makes loops without attached stages (the init
        nest of a reduction repeats spatial loops): they keep their kind and thread binding, so
        that on a GPU each thread initialises the elements it then updates."""
        dom = self.domains[h]
        at = guards_by_depth(leaves, guards)
        if attach and self.thread_vars:
            at = self._sink_thread_guards(h, leaves, at)
        stmt = guard_all(at.get(len(leaves), []), innermost)
        for k in range(len(leaves) - 1, -1, -1):
            iv = leaves[k]
            if attach:
                stmt = self.wrap_loop(h, iv, dom.leaf_extent[iv], stmt)
            else:
                a = self.attr(h, iv)
                stmt = n.For(iv.var, mk.as_expr(0), dom.leaf_extent[iv], a.kind, stmt, a.thread)
            stmt = guard_all(at.get(k, []), stmt)
        return stmt

    def index(self, h, t):
        dom = self.domains[h]
        _, offs = self.buffer_of(t)
        return tuple(mk.sub(dom.root_value[a], o) for a, o in zip(h.stage.axes, offs))

    def expr(self, h, e):
        dom = self.domains[h]
        e = substitute(e, {iv.var: v for iv, v in dom.root_value.items()})
        return _ToLoads(self).visit(e)

    def predicate(self, h):
        """The store predicate over this nest's loop variables (axes split after it was set included)."""
        pred, dom = h.store_predicate, self.domains[h]
        if pred is None:
            return None
        known = {iv.var for iv in dom.root_value} | {iv.var for iv in h.leaf} | {iv.var for iv in dom.derived}
        known |= set(self.graph.shape_vars()) | set(self.graph.scalars)
        known |= {iv.var for iv, _ in dom.enclosing}     # a loop it is computed inside (TVM's tx == 0)
        if not free_vars(pred) <= known:
            raise ScheduleError(f"stage {h.name}: its store predicate{where(h.store_predicate_loc)} uses an axis "
                                "that a later primitive removed", hint="set the store predicate last")
        pred = substitute(pred, {iv.var: v for iv, v in dom.derived.items()})
        return self.expr(h, pred)

    def emit(self, h) -> n.Stmt:
        st, dom = h.stage, self.domains[h]
        pred = self.predicate(h)
        if not st.is_reduction:
            buf, _ = self.buffer_of(st.output)
            idx = self.index(h, st.output)
            store = n.Store(buf, idx, self.expr(h, st.body))
            if dom.pad_guards:     # a padded cache: zeros where its tile leaves the array
                store = n.IfThenElse(mk.all_of(dom.pad_guards), store,
                                     n.Store(buf, idx, mk.as_expr(0, buf.dtype)))
            return self.nest(h, h.leaf, [g for g, _ in dom.guards], guard(pred, store))
        return emit_reduction(self, h, pred)


def check_block_bindings(handles) -> None:
    """A stage attached inside a block loop (of the stage it is attached to, or of one further
    out) runs in that block: binding one of its own loops to a blockIdx tag has no meaning
    (each block would compute a part of the tile and read all of it; issue 24).  ScheduleError
    at the user's bind line, with the binding that works."""
    for h in handles:
        blocks = [iv for iv in h.leaf if (a := h.attrs.get(iv)) is not None and a.thread is not None
                  and a.thread.is_block]
        if not blocks or h.attach is not AttachKind.AT:
            continue
        p, ax = h.attach_stage, h.attach_axis
        while p is not None:
            leaves = list(p.leaf)
            upto = leaves[:leaves.index(ax) + 1] if ax in leaves else leaves
            outer = next((iv for iv in upto if (a := p.attrs.get(iv)) is not None and a.thread is not None
                          and a.thread.is_block), None)
            if outer is not None:
                iv = blocks[0]
                tag = h.attrs[iv].thread.value
                raise ScheduleError(
                    f"stage {h.name}: its axis {iv.var.name} is bound to {tag}{where(h.bind_locs.get(iv))}, "
                    f"but the stage is attached{where(h.attach_loc)} inside the "
                    f"{p.attrs[outer].thread.value} loop {outer.var.name} of stage {p.name}: a stage "
                    f"computed inside a block runs in that block and cannot be spread over other blocks",
                    hint=f"bind {iv.var.name} to a thread index instead (the block's threads share the "
                         f"work), e.g. s[{h.name!r}].bind({iv.var.name}, 'threadIdx.y'), or leave it unbound",
                    loc=h.bind_locs.get(iv))
            if p.attach is not AttachKind.AT:
                break
            p, ax = p.attach_stage, p.attach_axis


def build_loop_nests(state: LowerState) -> LowerState:
    """The ``loop_nests`` pass: ``state.func`` (see the module docstring)."""
    b = NestBuilder(state)
    check_block_bindings(b.handles)
    st = b.storage
    body = seq([b.emit(h) for h in b.placement.order])
    for buf, stages in reversed(st.allocs.get(None, ())):
        body = n.Allocate(buf, body, stages)
    tens = tuple(n.TensorizeRequest(h.stage, h.tensorized.axis, h.tensorized.intrin, h.tensorized.loc)
                 for h in b.handles if h.tensorized)
    func = n.LoweredFunc(b.graph.name, st.inputs, st.outputs, st.scalars, body,
                         bindings=st.bindings, tensorize=tens,
                         padded=tuple(st.buffers[h.stage.output][0] for h in b.handles
                                      if h.pad and h.stage.output in st.buffers),
                         equal_sizes=tuple((c.lhs, c.rhs) for c in b.graph.constraints
                                           if type(c.lhs) is n.Var and type(c.rhs) is n.Var),
                         size_hints=tuple((v, lo, hi) for v, (lo, hi) in
                                          (getattr(state.sched, "size_hints", None) or {}).items()))
    return dataclasses.replace(state, func=func)
