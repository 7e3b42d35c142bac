"""The schedule of a whole kernel: stage handles plus graph-rewriting primitives.

``Schedule(graph)`` copies the graph's stages so that rewriting primitives
(``rfactor``, ``cache_read``, ``cache_write``) never touch the traced graph,
which is shared between backends.
"""
from __future__ import annotations

from ..errors import ScheduleError, user_location
from ..graph import Graph, Stage, Tensor
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, free_vars, substitute
from .records import AttachKind, Fuse, Split, where
from .stage import StageSchedule, _new_iv, as_scope, primitive, split_extents, threaded_splits


class _RetargetReads(Mutator):
    """Point TensorReads at other tensors (old Tensor -> new Tensor), optionally re-indexed."""

    def __init__(self, mapping: dict, reindex=None):
        super().__init__()
        self.mapping = mapping
        self.reindex = reindex      # indices -> indices of the new tensor, or None

    def visit_TensorRead(self, r):
        r2 = self.generic(r)
        t = self.mapping.get(r2.tensor)
        if t is None:
            return r2
        idx = r2.indices if self.reindex is None else self.reindex(r2.indices)
        return n.TensorRead(r2.dtype, t, idx)


def retarget(expr, mapping: dict):
    return _RetargetReads(mapping).visit(expr) if mapping else expr


def _copy_stage(st: Stage) -> Stage:
    new = Stage(st.name, st.axes, st.reduce_axes, st.body, st.dtype, st.loc, origin=st.origin,
                scan=st.scan)
    return new


class Schedule:
    """Stage handles by name (``s["B"]``), ``s.stages``, ``s.outputs`` and graph primitives."""

    def __init__(self, graph: Graph):
        mapping, stages = {}, []
        for st in graph.stages:
            new = _copy_stage(st)
            for old_t, new_t in zip(st.values, new.values):
                mapping[old_t] = new_t
                new_t.empty_reads = old_t.empty_reads     # (kdsl.frontend.access's mark)
            stages.append(new)
        for st in stages:
            st.body = retarget(st.body, mapping)
        self.graph = Graph(graph.name, graph.params, stages, tuple(mapping.get(t, t) for t in graph.outputs),
                           list(graph.constraints), graph.loc)
        self._checking = False      # a primitive is running (nested ones do not re-validate)
        self._n_attached = 0        # stages attached with compute_at (legality checks run when > 0)
        #: (call, user line, message) of the placement conflict since the last legal state, reported
        #: by ``finish`` unless a later primitive resolves it (checking.py)
        self._pending = None
        self._handles = {st: StageSchedule(self, st) for st in stages}
        #: hints that only backends interpret (threads, cache, stages, tensor_cores), per stage name
        self.backend_hints: dict = {}
        #: {shape Var: (lo, hi)}: the sizes a symbolic dim of the parameters can have in the
        #: specialisation being compiled (set by dispatch for size-classed backends, e.g. cuda,
        #: whose default schedules choose by size); empty when unknown
        self.size_hints: dict = {}

    def finish(self) -> None:
        """Check the finished schedule: a placement that is still illegal is a ScheduleError at
        the line of the primitive that made it so (primitives may come in any order that ends
        legal, as in TVM).  Dispatch calls it when the schedule functions return."""
        from .checking import finish
        finish(self)

    # ------------------------------------------------------------ lookup
    def __getitem__(self, key) -> StageSchedule:
        if isinstance(key, StageSchedule):
            return key
        if isinstance(key, Tensor) and key.stage is not None:
            key = key.stage
        if isinstance(key, Stage):
            if key in self._handles:
                return self._handles[key]
            key = key.name
        for st, h in self._handles.items():
            if st.name == key:
                return h
        names = ", ".join(st.name for st in self.graph.stages)
        inputs = ", ".join(t.name for t in self.graph.inputs)
        raise ScheduleError(f"there is no stage {key!r}; stages: {names}"
                            + (f" (inputs, which have no stage: {inputs})" if inputs else ""),
                            hint="use one of the stage names listed (as in print(kernel.lower(...)))")

    @property
    def stages(self) -> list:
        return [self._handles[st] for st in self.graph.stages]

    @property
    def outputs(self) -> list:
        return [self._handles[t.stage] for t in self.graph.outputs]

    def output_tensors(self) -> tuple:
        return self.graph.outputs

    def reads(self, reader: StageSchedule, producer: StageSchedule) -> bool:
        """True when ``reader`` reads a value of ``producer`` directly."""
        return any(t in reader.stage.reads() for t in producer.stage.values)

    def depends(self, consumer: StageSchedule, producer: StageSchedule) -> bool:
        """True when ``consumer`` reads ``producer`` directly or through other stages."""
        seen, todo = set(), [consumer.stage]
        while todo:
            st = todo.pop()
            for t in st.reads():
                src = getattr(t, "stage", None)
                if src is None or src in seen:
                    continue
                if src is producer.stage:
                    return True
                seen.add(src)
                todo.append(src)
        return False

    def _insert_before(self, new: Stage, anchor):
        """Insert ``new`` right before the earliest of ``anchor`` (a stage or a list of them):
        ``new`` reads only what the anchors' inputs are made of and only anchors read it, so
        the order stays topological without re-sorting every stage (thousands of them)."""
        anchors = anchor if isinstance(anchor, list) else [anchor]
        pos = {id(s): k for k, s in enumerate(self.graph.stages)}
        i = min(pos[id(a)] for a in anchors)
        self.graph.stages.insert(i, new)
        self._handles[new] = StageSchedule(self, new)
        return self._handles[new]

    def _unique(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``... when a stage has that name already (the
        frontend's convention), so that ``s[name]`` names one stage: e.g. cache_write twice."""
        taken = {st.name for st in self.graph.stages}
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        return name

    def _tensor(self, t) -> Tensor:
        if isinstance(t, Tensor):
            return t
        if isinstance(t, StageSchedule):
            return t.stage.output
        for x in self.graph.inputs:
            if x.name == t:
                return x
        return self[t].stage.output

    # ------------------------------------------------------------ rfactor
    @primitive(check=True)
    def rfactor(self, stage, axis, factor_axis: int = 0) -> StageSchedule:
        """Split a reduction into partial results over ``axis`` (a new stage ``<B>.rf``).

        The partials become a spatial dimension of the new stage at position
        ``factor_axis``; the original stage then reduces over them.
        """
        h = self[stage]
        st = h.stage
        if not st.is_reduction:
            raise ScheduleError(f"rfactor: stage {st.name} is not a reduction",
                                hint="rfactor splits a reduction stage; give one made by kd.sum/kd.max/... over a reduce axis")
        ax = h._leaf(axis, "rfactor")
        if ax.kind is not n.IterKind.REDUCE:
            raise ScheduleError(f"rfactor: {ax.name} is a spatial axis; give one of the reduction axes "
                                f"({', '.join(a.name for a in h.leaf if a.kind is n.IterKind.REDUCE)})",
                                hint="pass a reduce axis of this stage (s[name].reduce_axes[0], or one split from it)")
        if any(a.kind is n.IterKind.REDUCE for a in h.attrs):
            # (an attached stage keeps its attachment, as in TVM: the new stage is placed
            # on its own, at the root until attached)
            raise ScheduleError(f"rfactor: call it before binding reduction axes of {st.name}",
                                hint=f"call s.rfactor({st.name!r}, ...) first, then bind")
        rf_name = self._unique(st.name + ".rf")
        for g in h._attached_here():
            if g.attach_axis.kind is n.IterKind.REDUCE:
                spatial = [a.name for a in h.leaf if a.kind is n.IterKind.SPATIAL]
                raise ScheduleError(f"rfactor: stage {g.name} is attached to the reduction loop "
                                    f"{g.attach_axis.name} of {st.name}{where(g.attach_loc)}, which rfactor moves "
                                    f"into the new stage {rf_name}",
                                    hint=(f"attach {g.name} at a spatial loop of {st.name} "
                                          f"({', '.join(spatial)}), or " if spatial else "")
                                    + f"call rfactor first, then attach {g.name} to a loop of {rf_name}")
        _check_predicate_kept(h, "rfactor", n.IterKind.REDUCE)
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int) or not 0 <= factor_axis <= len(st.axes):
            raise ScheduleError(f"rfactor: factor_axis must be in 0..{len(st.axes)}, got {factor_axis}",
                                hint="factor_axis is where the new axis goes among the stage's axes: 0 (first) to the number of axes (last)")
        red = st.body
        # root reduce var -> expression over reduce leaves, plus guards of uneven splits
        value, guards = _reduce_root_values(h)
        reduce_leaves = [a for a in h.leaf if a.kind is n.IterKind.REDUCE]
        rf_iv = _new_iv(ax.name, ax.dom.extent, n.IterKind.SPATIAL)
        new_sp = [_new_iv(a.name, a.dom.extent, n.IterKind.SPATIAL) for a in st.axes]
        # reduction bounds over the spatial axes (a triangular sum) follow them into the new stage
        sp_map = {a.var: b.var for a, b in zip(st.axes, new_sp)}
        if free_vars(ax.dom.extent) & (set(sp_map) | {r.var for r in st.reduce_axes}):
            raise ScheduleError(f"rfactor: the extent of {ax.name} depends on another axis of "
                                f"{st.name} (a reduction with bounds over other axes); its partials "
                                "cannot be a dimension of fixed size",
                                hint=f"split {ax.name} by a constant factor and rfactor the inner part")
        others = [a for a in reduce_leaves if a is not ax]
        new_vars = [n.var(a.name) for a in others]
        leaf_map = {ax.var: rf_iv.var}
        leaf_map.update({a.var: v for a, v in zip(others, new_vars)})
        # the reduce roots over the new vars: a bound over another reduce axis (a triangular
        # sum over two reduce axes) must follow that axis into the new stage
        red_map = {r.var: substitute(value[r], {**leaf_map, **sp_map}) for r in st.reduce_axes}
        for _ in st.reduce_axes:        # bounds form a DAG: one round per level resolves them
            red_map = {v: substitute(e, red_map) for v, e in red_map.items()}
        full_map = {**leaf_map, **sp_map, **red_map}
        new_red = [n.IterVar(v, n.Range(mk.as_expr(0), substitute(a.dom.extent, full_map)),
                             n.IterKind.REDUCE) for a, v in zip(others, new_vars)]
        root_map = {a.var: b.var for a, b in zip(st.axes, new_sp)}
        root_map.update(red_map)
        cond = mk.all_of([substitute(g, full_map) for g in guards]
                         + ([substitute(red.condition, root_map)] if red.condition is not None else []))
        sp_axes = list(new_sp)
        sp_axes.insert(factor_axis, rf_iv)
        bf_body = n.Reduce(red.dtype, red.combiner, tuple(substitute(s_, root_map) for s_ in red.sources),
                           tuple(new_red), cond, red.value_index)
        bf = Stage(rf_name, tuple(sp_axes), tuple(new_red), bf_body, st.dtype, st.loc, origin="rfactor")
        # the original stage now reduces the partials
        kv = _new_iv(ax.name + ".v", ax.dom.extent, n.IterKind.REDUCE)
        idx = [a.var for a in st.axes]
        idx.insert(factor_axis, kv.var)
        sources = tuple(n.TensorRead(t.dtype, t, tuple(idx)) for t in bf.values)
        st.body = n.Reduce(red.dtype, red.combiner, sources, (kv,), None, red.value_index)
        st.reduce_axes = (kv,)
        h.relations = [r for r in h.relations if _relation_kind(r) is n.IterKind.SPATIAL]
        h.leaf = [a for a in h.leaf if a.kind is n.IterKind.SPATIAL] + [kv]
        h.attrs = {a: v for a, v in h.attrs.items() if a.kind is n.IterKind.SPATIAL}
        return self._insert_before(bf, st)

    # ------------------------------------------------------------ caches
    @primitive(check=True)
    def cache_read(self, tensor, scope, readers=None, *, pad: bool = False) -> StageSchedule:
        """A copy of ``tensor`` in ``scope`` that ``readers`` (default: all) read instead (``<A>.<scope>``).

        ``pad=True``: the copy writes its whole region (the tile its readers need), with zeros
        where the tile lies beyond ``tensor``'s edges, instead of skipping those elements.
        Readers then see the tensor padded with zeros: a tensor-core fragment loaded from
        such a tile needs no clipping, so its load is one unconditional ``ldmatrix``.
        """
        if not isinstance(pad, bool):
            raise ScheduleError(f"cache_read: pad must be True or False, got {pad!r}",
                                hint="cache_read(..., pad=True)")
        t = self._tensor(tensor)
        sc = as_scope(scope)
        rs = self._readers_of(t, readers, "cache_read")
        axes = tuple(_new_iv(f"ax{d}", e, n.IterKind.SPATIAL) for d, e in enumerate(t.shape))
        body = n.TensorRead(t.dtype, t, tuple(a.var for a in axes))
        cache = Stage(self._unique(f"{t.name}.{sc.value}"), axes, (), body, t.dtype, None, origin="cache_read")
        for r in rs:
            r.stage.body = retarget(r.stage.body, {t: cache.output})
        h = self._insert_before(cache, [r.stage for r in rs])
        h.scope = sc
        h.pad = pad
        return h

    @primitive(check=True)
    def pack(self, tensor, readers=None, axis: int = -1, factor: int | None = None, scope="local",
             lanes_last: bool = False) -> StageSchedule:
        """A copy of ``tensor`` cut into contiguous panels along ``axis`` (``<A>.packed``).

        ``P[p, .., x, ..] = A[.., p*factor + x, ..]`` with ``x`` in ``axis``'s
        place; ``readers`` then read ``P[i // factor, .., i % factor, ..]``.  This
        is the layout a blocked matmul streams its B operand in (TVM's packed B):
        one ``K x factor`` panel is contiguous, whatever ``A``'s leading
        dimension.  Entries past the end of ``axis`` are neither written nor read.
        ``readers`` defaults to every stage that reads ``tensor``; ``axis`` to the last.
        ``lanes_last=True`` puts ``x`` last instead (``P[p, .., y, x] = A[.., p*factor + x, y]``):
        panels of a transposed operand, contiguous along ``axis`` (attention's keys ``k[j, d]``
        read as ``k.T``: ``factor`` keys side by side for each ``d``).
        """
        t = self._tensor(tensor)
        rs = self._readers_of(t, readers, "pack")
        if factor is None:
            raise ScheduleError(f"pack: give the panel width, e.g. s.pack({t.name!r}, axis={axis}, factor=16)",
                                hint=f"s.pack({t.name!r}, axis=..., factor=16)")
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise ScheduleError(f"pack: axis must be an int (a dimension of {t.name}), got {axis!r}",
                                hint="axis=0 for the first dimension, -1 for the last")
        if not -t.ndim <= axis < t.ndim:
            raise ScheduleError(f"pack: {t.name} has {t.ndim} axes; axis {axis} does not exist",
                                hint=f"pick an axis in -{t.ndim}..{t.ndim - 1}")
        axis %= t.ndim
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise ScheduleError(f"pack: factor must be a positive int, got {factor!r}",
                                hint="factor=16 (a panel of 16 elements)")
        d = t.shape[axis]
        po = _new_iv("panel", mk.ceildiv(d, factor), n.IterKind.SPATIAL)
        inner = [_new_iv(f"ax{k}", factor if k == axis else e, n.IterKind.SPATIAL)
                 for k, e in enumerate(t.shape)]
        idx = [a.var for a in inner]
        idx[axis] = mk.add(mk.mul(po.var, factor), inner[axis].var)
        body = n.TensorRead(t.dtype, t, tuple(idx))
        order = list(inner)
        if lanes_last:
            order.append(order.pop(axis))
        packed = Stage(self._unique(f"{t.name}.packed"), (po, *order), (), body, t.dtype, None, origin="pack")
        def panels(indices):    # A[.., i, ..] -> P[i // factor, .., i % factor, ..]
            i = indices[axis]
            if lanes_last:
                return (mk.floordiv(i, factor), *indices[:axis], *indices[axis + 1:], mk.mod(i, factor))
            return (mk.floordiv(i, factor), *indices[:axis], mk.mod(i, factor), *indices[axis + 1:])

        for r in rs:
            r.stage.body = _RetargetReads({t: packed.output}, panels).visit(r.stage.body)
        h = self._insert_before(packed, [r.stage for r in rs])
        h.scope = as_scope(scope)
        h.store_predicate = mk.lt(idx[axis], d)
        h.store_predicate_loc = user_location()
        return h

    def _readers_of(self, t, readers, what: str) -> list:
        def own(name) -> bool:         # a kd.scan reads its own state: not a copyable read
            return getattr(getattr(t, "op", None), "name", None) == name

        def every():
            return [self._handles[s] for s in self.graph.stages if t in s.reads() and not own(s.name)]
        if readers is None:
            if not every():
                raise ScheduleError(f"{what}: no stage reads {t.name}",
                                    hint="name a tensor that some stage of this kernel reads")
            return every()
        if isinstance(readers, (StageSchedule, str, Stage, Tensor)):
            readers = [readers]
        try:
            rs = [self[r] for r in readers]
        except TypeError:
            raise ScheduleError(f"{what}: readers must be stages (a list of s[name] or names), got "
                                f"{readers!r}", hint=f"readers of {t.name}: "
                                + ", ".join(h.name for h in every())) from None
        if not rs:
            raise ScheduleError(f"{what}: give at least one reader of {t.name}",
                                hint=f"readers of {t.name}: " + ", ".join(h.name for h in every()))
        for r in rs:
            if own(r.name):
                raise ScheduleError(f"{what}: stage {r.name} is a kd.scan reading its own earlier "
                                    f"steps of {t.name}: a copy made before it runs would not hold "
                                    "them", hint=f"{what} the other tensors {r.name} reads"
                                    + (f" (readers of {t.name}: " + ", ".join(h.name for h in every())
                                       + ")" if every() else ""))
            if t not in r.stage.reads():
                raise ScheduleError(f"{what}: stage {r.name} does not read {t.name}",
                                    hint=f"readers of {t.name}: "
                                    + ", ".join(s.name for s in self.graph.stages if t in s.reads()))
        return rs

    def cacheable(self, stage) -> bool:
        """True when ``cache_write`` can cache ``stage``: it has one value, or only its main
        value is read or returned (argmax; not a tuple reducer whose members are all used)."""
        st = self[stage].stage
        others = [v for v in st.values if v is not st.output]
        return not any(v in self.graph.outputs or any(v in s.reads() for s in self.graph.stages)
                       for v in others)

    @primitive(check=True)
    def cache_write(self, stage, scope) -> StageSchedule:
        """Compute ``stage`` into a ``scope`` buffer (``<B>.<scope>``) that B then copies out."""
        h = self[stage]
        st = h.stage
        if h.relations or h.attach is not AttachKind.ROOT or h.attrs:
            raise ScheduleError(f"cache_write: call it on stage {st.name} before other primitives on it",
                                hint="call s.cache_write(stage, scope) right after getting s, then split/attach the stages")
        if hasattr(getattr(st, "scan", None), "init_steps"):
            raise ScheduleError(f"cache_write: stage {st.name} is a kd.scan: its steps read its own "
                                "earlier steps, which a copy written out after it would not hold",
                                hint=f"leave {st.name} uncached (its loops can still be split, "
                                "reordered, parallelised or bound along the other axes)")
        sc = as_scope(scope)
        _check_predicate_kept(h, "cache_write", n.IterKind.REDUCE)
        others = [v for v in st.values if v is not st.output]
        users = [s.name for s in self.graph.stages if s is not st and any(v in s.reads() for v in others)]
        if any(v in self.graph.outputs for v in others):    # a tuple reducer's members returned
            users.append("the kernel's return value")
        if users:   # the copy-out stage holds one value; a reader of the others would lose them
            raise ScheduleError(
                f"cache_write: stage {st.name} computes {len(st.values)} values "
                f"({', '.join(v.name for v in st.values)}) and {', '.join(users)} reads more than "
                f"one of them; a cache copies one value out",
                hint=f"cache_write the stage that reads them ({users[0]}) instead, or leave "
                f"{st.name} uncached")
        # the copies keep each axis's domain: a reduction over range(1, m) stays over range(1, m)
        sp = [n.IterVar(n.var(a.name), a.dom, n.IterKind.SPATIAL) for a in st.axes]
        rd, mapping = [], {a.var: b.var for a, b in zip(st.axes, sp)}
        for a in st.reduce_axes:    # bounds over other axes (a triangular sum) follow them
            rd.append(n.IterVar(n.var(a.name), n.Range(substitute(a.dom.min, mapping),
                                                       substitute(a.dom.extent, mapping)),
                                n.IterKind.REDUCE))
            mapping[a.var] = rd[-1].var
        body = substitute(st.body, mapping)
        if isinstance(body, n.Reduce):
            body = n.Reduce(body.dtype, body.combiner, body.sources, tuple(rd), body.condition, body.value_index)
        cache = Stage(self._unique(f"{st.name}.{sc.value}"), tuple(sp), tuple(rd), body, st.dtype, st.loc, origin="cache_write")
        st.body = n.TensorRead(st.dtype, cache.output, tuple(a.var for a in st.axes))
        st.reduce_axes = ()
        st.values = (st.output,)
        h.leaf = list(st.axes)
        ch = self._insert_before(cache, st)
        ch.scope = sc
        if h.store_predicate is not None:   # the cache computes only what B stores (a pack's ragged end)
            ch.store_predicate = substitute(h.store_predicate, mapping)
            ch.store_predicate_loc = h.store_predicate_loc
        return ch


def _relation_kind(rel) -> n.IterKind:
    return rel.parent.kind if isinstance(rel, Split) else rel.outer.kind


def leaf_values(h: StageSchedule, root_extent=None) -> tuple[dict, list]:
    """Express every root axis of a stage through its leaf axes.

    Returns ``(value, guards)``: ``value[root]`` is an index expression (relative
    to the root's domain minimum) over leaf vars, and ``guards`` the conditions
    that uneven splits need.  ``root_extent`` maps root IterVars to the extent
    to use (a bound-inferred region); default: the root's own domain.
    """
    extent = {}
    for a in list(h.stage.axes) + list(h.stage.reduce_axes):
        extent[a] = (root_extent or {}).get(a, a.dom.extent)
    keep = threaded_splits(h)
    for rel in h.relations:  # forward: extents of derived axes
        if isinstance(rel, Split):
            extent[rel.outer], extent[rel.inner] = split_extents(extent[rel.parent], rel.factor, rel.nparts,
                                                                 rel in keep)
        else:
            extent[rel.fused] = mk.mul(extent[rel.outer], extent[rel.inner])
    value = {a: a.var for a in h.leaf}
    guards = []
    for rel in reversed(h.relations):  # backward: values of parents
        if isinstance(rel, Split):
            pv = mk.add(mk.mul(value[rel.outer], extent[rel.inner]), value[rel.inner])
            value[rel.parent] = pv
            guards.append((mk.lt(pv, extent[rel.parent]), rel))
        else:
            f = value[rel.fused]
            value[rel.outer] = mk.floordiv(f, extent[rel.inner])
            value[rel.inner] = mk.mod(f, extent[rel.inner])
    return value, extent, guards


def _check_predicate_kept(h: StageSchedule, what: str, kind: n.IterKind):
    """A store predicate over axes of ``kind`` that ``what`` removes is an error at that call."""
    pred = h.store_predicate
    if pred is None:
        return
    gone = {a.var for a in h.leaf if a.kind is kind} | {a.var for a in h.stage.reduce_axes}
    if kind is n.IterKind.REDUCE and free_vars(pred) & gone:
        raise ScheduleError(f"{what}: the store predicate of {h.name}{where(h.store_predicate_loc)} uses its "
                            f"reduction axes, which {what} moves into another stage",
                            hint=f"call {what} before set_store_predicate")


def _reduce_root_values(h: StageSchedule):
    value, _, guards = leaf_values(h)
    out = {r: mk.add(r.dom.min, value[r]) for r in h.stage.reduce_axes}
    red_guards = [g for g, rel in guards if rel.parent.kind is n.IterKind.REDUCE]
    return out, red_guards
