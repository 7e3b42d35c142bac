"""schedule_ops: turn a Schedule into loop IR (the first lowering pass).

Assumes: a Schedule whose primitives were validated at call time
(``kdsl.schedule.legality``; its ``Placement`` is rebuilt here and gives the
root order, producer/consumer attachments and the whole-buffer consumers).
Guarantees: a ``LoweredFunc`` whose body holds only loop-IR nodes (no
TensorRead/Reduce); every uneven split is guarded; every reduction's
initialisation sits outside its reduction loops; attached stages are
computed (and allocated) inside their attach loop over the inferred region
(an attached consumer also read outside that loop keeps a whole buffer at
the root);
a reduction loop bound to threadIdx becomes two barrier-separated phases
(per-thread partials into a shared buffer, then a combine by thread 0), which
keeps sequential semantics exact and lets GPU backends swap in shuffles.
"""
from __future__ import annotations

from ..errors import InternalCompilerError, ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, collect, free_vars, substitute
from ..schedule.legality import Placement
from ..schedule.records import AttachKind, IterAttr, where
from .bound import BoundInference
from .inline import inline_stages
from .tighten_loops import conjuncts


class _ToLoads(Mutator):
    """TensorRead -> Load through the buffer map, relative to each buffer's region minimum."""

    def __init__(self, lowering):
        super().__init__()
        self.lw = lowering

    def visit_TensorRead(self, r):
        r = self.generic(r)
        buf, offs = self.lw.buffer_of(r.tensor)
        idx = tuple(mk.sub(i, o) for i, o in zip(r.indices, offs))
        return n.Load(r.dtype, buf, idx)


def _seq(stmts) -> n.Stmt:
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, n.Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else n.Seq(tuple(flat))


def _guard(cond, stmt):
    return stmt if cond is None else n.IfThenElse(cond, stmt)


def _guard_all(conds, stmt):
    """``stmt`` under every condition of ``conds``; those that load memory (a reduction's
    ``where=``, a store predicate reading data) go in an inner ``if``, so that they run only
    where the index guards hold (IR ``and`` does not short-circuit)."""
    loads = [c for c in conds if collect(c, lambda x: isinstance(x, n.Load))]
    pure = [c for c in conds if not any(c is d for d in loads)]
    return _guard(mk.all_of(pure), _guard(mk.all_of(loads), stmt))


class Lowering:
    """State of one schedule -> IR conversion; use ``schedule_to_ir``."""

    def __init__(self, sched, out_contiguous=()):
        self.sched = sched
        self.graph = sched.graph
        self.out_contiguous = tuple(out_contiguous)
        self.buffers: dict = {}      # Tensor -> (Buffer, offsets)
        # where each stage runs and which reads are legal: the primitives checked it at each
        # call; checking again here names the calls involved if a schedule got past them
        self.placement = Placement(sched, "lowering")
        self.handles = inline_stages(sched)
        self.domains = BoundInference(sched, self.handles, self.placement).run()
        self.attached: dict = {}     # (handle, leaf) -> [attached handles]
        for h in self.handles:
            if h.attach is AttachKind.AT:
                self.attached.setdefault((h.attach_stage, h.attach_axis), []).append(h)

    # ------------------------------------------------------------ buffers
    def buffer_of(self, t):
        try:
            return self.buffers[t]
        except KeyError:
            raise InternalCompilerError(f"tensor {t.name} is read where it is not computed") from None

    def _param_buffers(self):
        inputs, outputs, strides, bindings = [], [], [], []
        for t in self.graph.inputs:
            st = None
            if not t.op.contiguous:
                st = tuple(n.var(f"{t.name}_s{d}") for d in range(t.ndim))
            b = n.Buffer(t.name, t.dtype, tuple(t.shape), st, n.Scope.GLOBAL, param=True)
            self.buffers[t] = (b, (mk.as_expr(0),) * t.ndim)
            inputs.append(b)
        for k, t in enumerate(self.graph.outputs):
            contiguous = self.out_contiguous[k] if k < len(self.out_contiguous) else True
            st = None if contiguous else tuple(n.var(f"{t.name}_s{d}") for d in range(t.ndim))
            b = n.Buffer(t.name, t.dtype, tuple(t.shape), st, n.Scope.GLOBAL, param=True)
            self.buffers[t] = (b, (mk.as_expr(0),) * t.ndim)
            outputs.append(b)
        all_bufs = inputs + outputs
        shape_vars = []
        for v in self.graph.shape_vars():
            for bi, b in enumerate(inputs):
                dims = [d for d, e in enumerate(b.shape) if e is v]
                if dims:
                    shape_vars.append(v)
                    bindings.append(("shape", bi, dims[0]))
                    break
        for bi, b in enumerate(all_bufs):
            if b.strides is not None:
                for d, s in enumerate(b.strides):
                    strides.append(s)
                    bindings.append(("stride", bi, d))
        for i, v in enumerate(self.graph.scalars):
            bindings.append(("scalar", i, None))
        scalars = tuple(shape_vars) + tuple(strides) + tuple(self.graph.scalars)
        return tuple(inputs), tuple(outputs), scalars, tuple(bindings)

    def _temp_buffers(self, h, dom, scope, whole=False):
        """The buffers of ``h``'s values: its region, or (``whole``) its whole domain."""
        bufs = []
        if whole:
            shape = tuple(a.dom.extent for a in h.stage.axes)
            offs = tuple(a.dom.min for a in h.stage.axes)
        else:
            shape = tuple(dom.extents[a] for a in h.stage.axes)
            offs = tuple(dom.mins[a] for a in h.stage.axes) if dom.restricted else (mk.as_expr(0),) * len(shape)
        for t in h.stage.values:
            if t in self.buffers:       # an output value: a param buffer
                continue
            b = n.Buffer(t.name, t.dtype, shape, None, scope)
            self.buffers[t] = (b, offs)
            bufs.append(b)
        return bufs

    def _default_scope(self, enclosing_attrs) -> n.Scope:
        tags = [a.thread for a in enclosing_attrs if a.thread is not None]
        if any(t.is_thread for t in tags):
            return n.Scope.LOCAL
        if any(t.is_block for t in tags):
            return n.Scope.SHARED
        return n.Scope.LOCAL if enclosing_attrs else n.Scope.GLOBAL

    # ------------------------------------------------------------ top level
    def run(self) -> n.LoweredFunc:
        inputs, outputs, scalars, bindings = self._param_buffers()
        roots = self.placement.order
        whole = self.placement.full_buffer     # attached consumers also read outside their loop
        self.temps = {}
        for h in self.handles:
            dom = self.domains[h]
            if h.attach is AttachKind.ROOT or h in whole:
                scope = h.scope or n.Scope.GLOBAL
            else:
                scope = h.scope or self._default_scope([self._attr(o, x) for o, x in self._owners(dom.enclosing)])
            self.temps[h] = self._temp_buffers(h, dom, scope, h in whole)
        root_temps = [b for h in self.handles if h.attach is AttachKind.ROOT or h in whole
                      for b in self.temps[h]]
        body = _seq([self.emit(h) for h in roots])
        for b in reversed(root_temps):
            body = n.Allocate(b, body)
        tens = [(h.name, h.tensorized.axis.var, h.tensorized.intrin) for h in self.handles if h.tensorized]
        attrs = {"bindings": bindings, "tensorize": tens}
        return n.LoweredFunc(self.graph.name, inputs, outputs, scalars, body, attrs)

    # ------------------------------------------------------------ one stage
    def _attr(self, h, iv) -> IterAttr:
        return h.attrs.get(iv, IterAttr())

    def _wrap_loop(self, h, iv, ext, body) -> n.Stmt:
        """The loop for leaf ``iv`` around ``body``, with stages attached at ``iv`` inside it."""
        before, after, temps = [], [], []
        for a in self.attached.get((h, iv), []):
            if a not in self.placement.full_buffer:
                temps += [(b, a.buffer_stages) for b in self.temps[a]]
            (before if self.placement.kind[a] == "producer" else after).append(self.emit(a))
        inner = _seq(before + [body] + after)
        for b, stages in reversed(temps):
            inner = n.Allocate(b, inner, stages)
        attr = self._attr(h, iv)
        return n.For(iv.var, mk.as_expr(0), ext, attr.kind, inner, attr.thread)

    def _owners(self, loops):
        out = []
        for iv, _ in loops:
            for h in self.handles:
                if iv in h.leaf:
                    out.append((h, iv))
                    break
        return out

    def _nest(self, h, leaves, guards, innermost, attach=True) -> n.Stmt:
        """Loops over ``leaves`` around ``innermost``; each guard goes right inside the innermost
        loop it depends on.  ``attach=False`` makes plain loops without attached stages (the
        init nest of a reduction repeats spatial loops; GPU bindings stay with the update)."""
        dom = self.domains[h]
        pos = {iv.var: k for k, iv in enumerate(leaves)}
        at = {}
        for g in guards:
            used = [pos[v] + 1 for v in collect(g, lambda x: isinstance(x, n.Var)) if v in pos]
            at.setdefault(max(used, default=0), []).append(g)
        stmt = _guard_all(at.get(len(leaves), []), innermost)
        for k in range(len(leaves) - 1, -1, -1):
            iv = leaves[k]
            if attach:
                stmt = self._wrap_loop(h, iv, dom.leaf_extent[iv], stmt)
            else:
                a = self._attr(h, iv)
                kind = a.kind if a.kind is not n.ForKind.BOUND else n.ForKind.SERIAL
                stmt = n.For(iv.var, mk.as_expr(0), dom.leaf_extent[iv], kind, stmt, None)
            stmt = _guard_all(at.get(k, []), stmt)
        return stmt

    def _index(self, h, t):
        dom = self.domains[h]
        _, offs = self.buffer_of(t)
        return tuple(mk.sub(dom.root_value[a], o) for a, o in zip(h.stage.axes, offs))

    def _expr(self, h, e):
        dom = self.domains[h]
        e = substitute(e, {iv.var: v for iv, v in dom.root_value.items()})
        return _ToLoads(self).visit(e)

    def _predicate(self, h):
        """The store predicate over this nest's loop variables (axes split after it was set included)."""
        pred, dom = h.store_predicate, self.domains[h]
        if pred is None:
            return None
        known = {iv.var for iv in dom.root_value} | {iv.var for iv in h.leaf} | {iv.var for iv in dom.derived}
        known |= set(self.graph.shape_vars()) | set(self.graph.scalars)
        if not free_vars(pred) <= known:
            raise ScheduleError(f"stage {h.name}: its store predicate{where(h.store_predicate_loc)} uses an axis "
                                "that a later primitive removed", hint="set the store predicate last")
        pred = substitute(pred, {iv.var: v for iv, v in dom.derived.items()})
        return self._expr(h, pred)

    def emit(self, h) -> n.Stmt:
        st, dom = h.stage, self.domains[h]
        pred = self._predicate(h)
        if not st.is_reduction:
            buf, _ = self.buffer_of(st.output)
            store = n.Store(buf, self._index(h, st.output), self._expr(h, st.body))
            return self._nest(h, h.leaf, [g for g, _ in dom.guards], _guard(pred, store))
        return self._emit_reduction(h, pred)

    def _emit_reduction(self, h, pred) -> n.Stmt:
        st, dom = h.stage, self.domains[h]
        red: n.Reduce = st.body
        comb = red.combiner
        leaves = h.leaf
        p = next((k for k, iv in enumerate(leaves) if iv.kind is n.IterKind.REDUCE), len(leaves))
        bufs = [self.buffer_of(t)[0] for t in st.values]
        idx = self._index(h, st.output)
        sp_guards = [g for g, kind in dom.guards if kind is not n.IterKind.REDUCE]
        rd_guards = [g for g, kind in dom.guards if kind is n.IterKind.REDUCE]
        if red.condition is not None:
            # one guard per conjunct: rfactor ands its split guards into the where= condition,
            # and each must sit where _guard_all can put the loads inside the index guards
            rd_guards.extend(conjuncts(self._expr(h, red.condition)))
        sources = [self._expr(h, s_) for s_ in red.sources]
        # a reduction axis bound to threadIdx makes a cross-thread reduction; a spatial axis bound
        # inside the reduction loops (a column sum's threads) stays an ordinary bound loop
        bound_red = [iv for iv in leaves[p:] if iv.kind is n.IterKind.REDUCE and self._attr(h, iv).thread is not None]
        if bound_red:
            return self._emit_cross_thread(h, p, bound_red, bufs, idx, sources, sp_guards, rd_guards, pred)
        init = _seq([n.Store(b, idx, ident) for b, ident in zip(bufs, comb.identity)])
        init_leaves = [iv for iv in leaves[p:] if iv.kind is n.IterKind.SPATIAL]
        cur = [n.Load(b.dtype, b, idx) for b in bufs]
        update = _guard(pred, self._combine_store(comb, cur, sources, lambda j, v: n.Store(bufs[j], idx, v)))
        init_nest = self._nest(h, init_leaves, sp_guards, _guard(pred, init), attach=False)
        upd_nest = self._nest(h, leaves[p:], sp_guards + rd_guards, update)
        return self._nest(h, leaves[:p], [], _seq([init_nest, upd_nest])) if p else _seq([init_nest, upd_nest])

    @staticmethod
    def _combine_store(comb, lhs, rhs, store):
        mapping = {v: e for v, e in zip(comb.lhs, lhs)}
        mapping.update({v: e for v, e in zip(comb.rhs, rhs)})
        results = [substitute(r, mapping) for r in comb.result]
        if len(results) == 1:
            return store(0, results[0])
        temps = [n.var(f"{comb.name}_{j}", r.dtype) for j, r in enumerate(results)]
        stmt = _seq([store(j, t) for j, t in enumerate(temps)])
        for t, r in reversed(list(zip(temps, results))):
            stmt = n.LetStmt(t, r, stmt)
        return stmt

    def _emit_cross_thread(self, h, p, bound_red, bufs, idx, sources, sp_guards, rd_guards, pred):
        st, dom = h.stage, self.domains[h]
        comb = st.body.combiner
        leaves = h.leaf
        tl = bound_red[0]
        if len(bound_red) > 1 or leaves[p] is not tl or not self._attr(h, tl).thread.is_thread:
            raise ScheduleError(f"stage {st.name}: a cross-thread reduction needs exactly one reduction axis "
                                "bound to threadIdx, and it must be the outermost reduction loop",
                                hint="reorder the reduction axes so the bound one comes first")
        if any(iv.kind is n.IterKind.SPATIAL for iv in leaves[p:]):
            raise ScheduleError(f"stage {st.name}: spatial loops must be outside the cross-thread reduction "
                                f"axis {tl.name}")
        ext = dom.leaf_extent[tl]
        if not isinstance(ext, n.Const):
            raise ScheduleError(f"stage {st.name}: the thread-bound reduction axis {tl.name} needs a constant "
                                "extent (split it by a constant factor first)")
        attr = self._attr(h, tl)
        reds = [n.Buffer(f"{st.name}.red{j}" if len(bufs) > 1 else f"{st.name}.red", b.dtype, (ext,), None,
                         n.Scope.SHARED) for j, b in enumerate(bufs)]
        accs = [n.Buffer(f"{st.name}.acc{j}" if len(bufs) > 1 else f"{st.name}.acc", b.dtype, (mk.as_expr(1),),
                         None, n.Scope.LOCAL) for j, b in enumerate(bufs)]
        zero = (mk.as_expr(0),)
        init = _seq([n.Store(a, zero, ident) for a, ident in zip(accs, comb.identity)])
        cur = [n.Load(a.dtype, a, zero) for a in accs]
        upd = self._combine_store(comb, cur, sources, lambda j, v: n.Store(accs[j], zero, v))
        inner = self._nest(h, leaves[p + 1:], sp_guards + rd_guards, upd)
        publish = _seq([n.Store(r, (tl.var,), n.Load(a.dtype, a, zero)) for r, a in zip(reds, accs)])
        phase1_body = _seq([init, inner, publish])
        for a in reversed(accs):
            phase1_body = n.Allocate(a, phase1_body)
        phase1 = self._wrap_loop(h, tl, ext, phase1_body)
        # phase 2: one thread combines the partials and stores the result
        t = n.var(tl.name + ".t")
        fins = [n.Buffer(b.name.replace(".acc", ".fin"), b.dtype, b.shape, None, n.Scope.LOCAL) for b in accs]
        fcur = [n.Load(f.dtype, f, zero) for f in fins]
        parts = [n.Load(r.dtype, r, (t,)) for r in reds]
        fold = n.For(t, mk.as_expr(0), ext, n.ForKind.SERIAL,
                     self._combine_store(comb, fcur, parts, lambda j, v: n.Store(fins[j], zero, v)))
        out = _seq([n.Store(b, idx, n.Load(f.dtype, f, zero)) for b, f in zip(bufs, fins)])
        finish = _seq([_seq([n.Store(f, zero, ident) for f, ident in zip(fins, comb.identity)]), fold, out])
        for f in reversed(fins):
            finish = n.Allocate(f, finish)
        conds = [pred if pred is not None else mk.eq(tl.var, 0)] + sp_guards
        # at least one thread combines: an empty reduction still stores the identity
        ext2 = mk.as_expr(max(ext.value, 1))
        phase2 = n.For(tl.var, mk.as_expr(0), ext2, n.ForKind.BOUND, _guard_all(conds, finish), attr.thread)
        body = _seq([phase1, n.Barrier(), phase2])
        for r in reversed(reds):
            body = n.Allocate(r, body)
        return self._nest(h, leaves[:p], [], body) if p else body


def schedule_to_ir(sched, out_contiguous=()) -> n.LoweredFunc:
    """Lower a Schedule to a LoweredFunc (see the module docstring)."""
    return Lowering(sched, out_contiguous).run()
