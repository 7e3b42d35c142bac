"""Per-stage schedule state and the primitives that act on one stage.

A ``StageSchedule`` (what ``s["B"]`` returns) keeps the relations (splits,
fuses), the ordered leaf axes, how each leaf becomes a loop, and where the
stage is attached.  Every primitive validates at the call and raises
``ScheduleError`` naming what exists and what would work.
"""
from __future__ import annotations

import inspect

from ..errors import ScheduleError, user_location
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.axis_expr import AxisExpr
from .checking import primitive
from .records import AttachKind, Fuse, IterAttr, Split, Tensorize, relation_axes, where

_TAGS = {t.value: t for t in n.ThreadTag}
_SCOPES = {s.value: s for s in n.Scope}


def _new_iv(name: str, extent, kind: n.IterKind) -> n.IterVar:
    return n.IterVar(n.var(name), n.Range(mk.as_expr(0), mk.as_expr(extent)), kind)


def as_scope(scope) -> n.Scope:
    if isinstance(scope, n.Scope):
        return scope
    if scope in _SCOPES:
        return _SCOPES[scope]
    raise ScheduleError(f"unknown memory scope {scope!r}", hint=f"use one of {sorted(_SCOPES)}")


class StageSchedule:
    """The schedule of one stage: ``split``, ``fuse``, ``reorder``, ``bind``, ``compute_at``..."""

    def __init__(self, sched, stage):
        self.sched = sched
        self.stage = stage
        self.relations: list = []
        self.leaf: list = list(stage.axes) + list(stage.reduce_axes)
        self.attrs: dict = {}
        self.bind_locs: dict = {}   # leaf -> the user's bind line
        self.attach = AttachKind.ROOT
        self.attach_stage: StageSchedule | None = None
        self.attach_axis: n.IterVar | None = None
        self.attach_loc = None      # the user's compute_at / compute_inline line
        self.scope: n.Scope | None = None
        self.store_predicate: n.Expr | None = None
        self.store_predicate_loc = None
        self.buffer_stages = 1
        self.pipeline_loc = None    # the user's double_buffer / pipeline line
        self.tensorized: Tensorize | None = None
        #: a cache_read(..., pad=True): its whole region is written, zeros beyond the array
        self.pad = False
        #: a producer attached with compute_at whose loops run over the region the current
        #: iteration of the enclosing loops needs (it may change with them: a causal chain's
        #: scores end at the query block's diagonal), not over the hull of every iteration;
        #: its buffer keeps the loop-invariant size (kdsl/passes/bound.py)
        self.loops_per_iteration = False

    # ------------------------------------------------------------ introspection
    @property
    def name(self) -> str:
        return self.stage.name

    @property
    def axes(self) -> tuple:
        """The stage's spatial root axes (as defined, before splits)."""
        return tuple(self.stage.axes)

    @property
    def reduce_axes(self) -> tuple:
        """The stage's reduction root axes (after ``rfactor``: the new factored axis)."""
        return tuple(self.stage.reduce_axes)

    @property
    def leaf_axes(self) -> tuple:
        """The current loop order, outermost first."""
        return tuple(self.leaf)

    @property
    def op(self):
        return self.stage

    def __repr__(self) -> str:
        return f"<stage {self.name}: loops {', '.join(a.name for a in self.leaf)}>"

    def _describe(self) -> str:
        return f"stage {self.name} has loop axes {', '.join(a.name for a in self.leaf) or '(none)'}"

    def axis(self, name: str) -> n.IterVar:
        """The leaf axis called ``name`` (``"i0"``, ``"k.outer"``)."""
        for a in self.leaf:
            if a.name == name:
                return a
        raise ScheduleError(f"{self._describe()}; there is no axis {name!r}",
                            hint="use one of the axis names listed (they follow the order split/fuse made them)")

    def _leaf(self, ax, what: str) -> n.IterVar:
        if isinstance(ax, str):
            return self.axis(ax)
        if not isinstance(ax, n.IterVar):
            raise ScheduleError(f"{what} takes an axis of stage {self.name} "
                                f"(e.g. s[{self.name!r}].axes[0]), got {type(ax).__name__}",
                                hint=f"pass s[{self.name!r}].axes[i], .reduce_axes[i], an axis split/fuse returned, or its name")
        if ax not in self.leaf:
            if self._is_root_axis(ax) or any(ax in relation_axes(r) for r in self.relations):
                raise ScheduleError(f"{what}: axis {ax.name} was already split or fused; {self._describe()}",
                                    hint="use the axes that split/fuse returned")
            raise ScheduleError(f"{what}: axis {ax.name} does not belong to stage {self.name}; "
                                f"{self._describe()}",
                                hint=f"take the axis from s[{self.name!r}] (each stage has its own axes)")
        return ax

    def _predicate_axis(self, ax) -> n.IterVar:
        """An axis a store predicate is a function of: one of this stage's loops, or a loop of
        another stage that this one is computed inside (TVM's predicate on an enclosing
        thread axis; checked when the schedule is finished)."""
        if isinstance(ax, n.IterVar) and ax not in self.leaf:
            for h in self.sched._handles.values():
                if h is not self and ax in h.leaf:
                    return ax
        return self._leaf(ax, "set_store_predicate")

    def _is_root_axis(self, ax) -> bool:
        return ax in self.stage.axes or ax in self.stage.reduce_axes

    def _check_unbound(self, ax, what):
        attr = self.attrs.get(ax)
        if attr is not None and attr.kind is not n.ForKind.SERIAL:
            raise ScheduleError(f"{what}: axis {ax.name} of stage {self.name} is already {attr.kind.value}"
                                + (f" to {attr.thread.value}" if attr.thread else ""),
                                hint=f"{what} it before marking it")

    # ------------------------------------------------------------ loop structure
    @primitive(check=True)
    def split(self, axis, factor: int | None = None, nparts: int | None = None):
        """Split ``axis`` into (outer, inner): inner has extent ``factor``, or outer ``nparts``.

        A stage attached at ``axis`` (compute_at) stays attached per iteration of
        the original axis, i.e. at the inner loop.
        """
        ax = self._leaf(axis, "split")
        self._check_unbound(ax, "split")
        self._check_not_tensorized(ax, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError("split takes exactly one of factor= or nparts=",
                                hint=f"s[{self.name!r}].split(axis, factor=16)")
        val = factor if factor is not None else nparts
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ScheduleError(f"split factor must be a positive int, got {val!r}",
                                hint=f"s[{self.name!r}].split(axis, factor=16)")
        segment = getattr(getattr(self.stage, "scan", None), "segment", 0)
        if nparts != 1 and factor != 1 and not (segment and factor == segment):
            # (a segmented scan, ``blocked_scan``'s, restarts at each segment: split by it)
            self._require_not_scan_axis(ax, "split", "stay one loop (only a split into 1 part "
                                        "keeps the order of its steps)")
        outer_ext, inner_ext = split_extents(ax.dom.extent, factor, nparts)
        outer = _new_iv(ax.name + ".outer", outer_ext, ax.kind)
        inner = _new_iv(ax.name + ".inner", inner_ext, ax.kind)
        self.relations.append(Split(ax, outer, inner, factor, nparts, user_location()))
        i = self.leaf.index(ax)
        self.leaf[i:i + 1] = [outer, inner]
        self._move_attached({ax}, inner)
        return outer, inner

    def _move_attached(self, old: set, new: n.IterVar):
        """Stages attached at a loop that split/fuse replaced follow it to ``new``."""
        for h in self.sched._handles.values():
            if h.attach is AttachKind.AT and h.attach_stage is self and h.attach_axis in old:
                h.attach_axis = new

    def _check_not_tensorized(self, ax, what):
        t = self.tensorized
        if t is not None and t.axis is ax:
            raise ScheduleError(f"{what}: axis {ax.name} of stage {self.name} is tensorized{where(t.loc)}",
                                hint=f"{what} it before tensorize")

    @primitive(check=True)
    def fuse(self, *axes):
        """Fuse consecutive axes (outermost first) into one (stages attached at them follow);
        the fusion of one axis is that axis."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if not axes:
            raise ScheduleError("fuse takes the axes to fuse (adjacent in loop order)",
                                hint=f"s[{self.name!r}].fuse(*s[{self.name!r}].axes)")
        ivs = [self._leaf(a, "fuse") for a in axes]
        if len(ivs) == 1:   # TVM: the fusion of one axis is that axis
            return ivs[0]
        pos = [self.leaf.index(a) for a in ivs]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ScheduleError(f"fuse needs adjacent axes in loop order; {self._describe()}",
                                hint="reorder them next to each other first")
        if len({a.kind for a in ivs}) != 1:
            raise ScheduleError(f"fuse cannot mix spatial and reduction axes ({', '.join(a.name for a in ivs)})",
                                hint="fuse spatial axes with spatial ones and reduction axes with reduction ones; "
                                "reorder them next to each other first")
        for a in ivs:
            self._check_unbound(a, "fuse")
            self._check_not_tensorized(a, "fuse")
            self._require_not_scan_axis(a, "fuse", "stay one loop of its own (fused, its steps "
                                        "would interleave with another axis)")
        loc = user_location()
        fused = ivs[0]
        for nxt in ivs[1:]:
            ext = mk.mul(fused.dom.extent, nxt.dom.extent)
            new = _new_iv(f"{fused.name}.{nxt.name}.fused", ext, fused.kind)
            self.relations.append(Fuse(fused, nxt, new, loc))
            fused = new
        self.leaf[pos[0]:pos[-1] + 1] = [fused]
        self._move_attached(set(ivs), fused)
        return fused

    @primitive(check=True)
    def reorder(self, *axes):
        """Put the given axes in this order, in the loop positions they occupy now."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        ivs = [self._leaf(a, "reorder") for a in axes]
        if len(set(map(id, ivs))) != len(ivs):
            raise ScheduleError("reorder got the same axis twice",
                                hint="name each axis once, in the new order")
        slots = sorted(self.leaf.index(a) for a in ivs)
        before = list(self.leaf)
        for slot, a in zip(slots, ivs):
            self.leaf[slot] = a
        try:
            self._check_cross_thread("reorder")
        except ScheduleError:
            self.leaf[:] = before
            raise

    @primitive(check=True)
    def tile(self, x, y, x_factor: int, y_factor: int):
        """Split x and y and order them (x.outer, y.outer, x.inner, y.inner)."""
        for a, f in ((x, x_factor), (y, y_factor)):    # checked before the first split changes
            if f != 1:                                 # anything (a refused tile leaves no trace)
                self._require_not_scan_axis(self._leaf(a, "tile"), "tile", "stay one loop (a "
                                            "tile splits it)")
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def _mark(self, axis, kind: n.ForKind, what: str, thread=None):
        ax = self._leaf(axis, what)
        if kind not in (n.ForKind.SERIAL, n.ForKind.UNROLLED):
            self._require_not_scan_axis(ax, what)
        self.attrs[ax] = IterAttr(kind, thread)
        return ax

    def _require_not_scan_axis(self, ax, what: str, must: str = "be a sequential loop"):
        """A kd.scan's scan axis runs in order: refused at the primitive's call (the same rule
        kdsl.passes.scan_check applies to the finished schedule; ``scan_axis.scan_leaf``)."""
        info = getattr(self.stage, "scan", None)
        if info is None or not hasattr(info, "init_steps"):
            return
        from .scan_axis import scan_leaf
        t, _ = scan_leaf(self, self.stage.axes[info.axis])
        if ax is t:
            raise ScheduleError(f"{what}: stage {self.name}: its scan axis {ax.name!r} must "
                                f"{must} (each step of the kd.scan reads the previous one)",
                                hint=f"{what} the other axes of {self.name}; "
                                f"{ax.name!r} runs in order inside each thread")

    @primitive()
    def parallel(self, axis):
        """Run iterations of ``axis`` on several CPU threads."""
        ax = self._leaf(axis, "parallel")
        if ax.kind is n.IterKind.REDUCE:
            raise ScheduleError(f"parallel: {ax.name} is a reduction axis of stage {self.name}; "
                                "iterations would race on the result",
                                hint=f"s.rfactor(s[{self.name!r}], axis) makes a parallel partial reduction")
        self._mark(ax, n.ForKind.PARALLEL, "parallel")

    @primitive()
    def vectorize(self, axis):
        """Turn ``axis`` into SIMD lanes (best with a constant extent)."""
        ax = self._leaf(axis, "vectorize")
        if ax.kind is n.IterKind.REDUCE:
            raise ScheduleError(f"vectorize: {ax.name} is a reduction axis of stage {self.name}",
                                hint="rfactor the reduction and vectorize the factored (spatial) axis")
        self._mark(ax, n.ForKind.VECTORIZED, "vectorize")

    @primitive()
    def unroll(self, axis):
        """Unroll ``axis`` (best with a small constant extent)."""
        self._mark(axis, n.ForKind.UNROLLED, "unroll")

    @primitive(check=True, moves=False)
    def bind(self, axis, tag: str):
        """Bind ``axis`` to a GPU index: blockIdx.x|y|z, threadIdx.x|y|z or vthread.x|y."""
        ax = self._leaf(axis, "bind")
        t = _TAGS.get(tag if isinstance(tag, str) else getattr(tag, "value", None))
        if t is None:
            raise ScheduleError(f"bind: unknown thread tag {tag!r}", hint=f"use one of {', '.join(_TAGS)}")
        if ax.kind is n.IterKind.REDUCE and not t.is_thread:
            raise ScheduleError(f"bind: reduction axis {ax.name} can only be bound to threadIdx "
                                f"(a cross-thread reduction), not {t.value}",
                                hint="bind a spatial axis to blockIdx; a reduction axis only to threadIdx.x/y/z")
        for other, attr in self.attrs.items():
            if attr.thread is t and other is not ax and other in self.leaf:
                raise ScheduleError(f"bind: {t.value} is already bound to axis {other.name} of stage {self.name}",
                                    hint="bind each thread tag to one axis of a stage (split or fuse to make one axis)")
        if ax.kind is n.IterKind.REDUCE and not isinstance(ax.dom.extent, n.Const):
            raise ScheduleError(f"bind: the reduction axis {ax.name} of stage {self.name} has no constant extent; "
                                "a cross-thread reduction needs one",
                                hint=f"split it by a constant factor and bind the inner axis: "
                                f"s[{self.name!r}].split({ax.name}, factor=32)")
        before = self.attrs.get(ax)
        self._mark(ax, n.ForKind.BOUND, "bind", t)
        self.bind_locs[ax] = user_location()
        try:
            self._check_cross_thread("bind")
            from .limits import check_bind
            check_bind(self, ax, t)     # a CUDA block: at most 1024 threads
        except ScheduleError:
            self.attrs.pop(ax)
            if before is not None:
                self.attrs[ax] = before
            raise

    def _check_cross_thread(self, what: str):
        """Reduction axes bound to threadIdx make a cross-thread reduction: inside the reduction
        loops, the threadIdx-bound loops (reduced, or spatial ones that stay spatial) come before
        the serial reduction loops, and no serial spatial loop is left there (each thread folds
        its partial once, after all its reduction loops)."""
        bound = [a for a in self.leaf if a.kind is n.IterKind.REDUCE and self.attrs.get(a) is not None
                 and self.attrs[a].thread is not None]
        if not bound:
            return
        tl = bound[0]
        line = where(self.bind_locs.get(tl))
        p = next(k for k, a in enumerate(self.leaf) if a.kind is n.IterKind.REDUCE)
        serial = None
        for a in self.leaf[p:]:
            attr = self.attrs.get(a)
            tag = attr.thread if attr is not None else None
            if tag is not None and not tag.is_thread:
                raise ScheduleError(f"{what}: the reduction axis {tl.name} of stage {self.name} is bound to "
                                    f"{self.attrs[tl].thread.value}{line}, so {a.name}, bound to {tag.value}, must "
                                    f"be outside the reduction loops; {self._describe()}",
                                    hint=f"reorder so that {a.name} comes before the reduction axes")
            if tag is not None and serial is not None:
                raise ScheduleError(f"{what}: the reduction axis {tl.name} of stage {self.name} is bound to "
                                    f"{self.attrs[tl].thread.value}{line}, so the thread-bound loops must be the "
                                    f"outermost reduction loops, but {a.name} ({tag.value}) is inside the serial "
                                    f"reduction loop {serial.name}; {self._describe()}",
                                    hint=f"reorder so that {a.name} comes before {serial.name}")
            if tag is None and a.kind is n.IterKind.SPATIAL:
                raise ScheduleError(f"{what}: the reduction axis {tl.name} of stage {self.name} is bound to "
                                    f"{self.attrs[tl].thread.value}{line}, so every spatial loop must be outside it "
                                    f"or bound to threadIdx, but {a.name} is inside; {self._describe()}",
                                    hint=f"reorder so that {a.name} comes before {tl.name}, or bind {a.name} to a "
                                    f"threadIdx tag before binding {tl.name} (threads of a block stay spatial)")
            if tag is None and serial is None:
                serial = a

    # ------------------------------------------------------------ placement
    @primitive(check=True)
    def compute_at(self, other, axis):
        """Compute this stage inside loop ``axis`` of ``other``.

        ``other`` is a consumer (direct, or through stages attached inside that
        loop, e.g. a packed operand at an outer loop of the output whose local
        accumulator reads it): every reader must then run inside ``axis``, and
        the stage computes the region they read there.  Or ``other`` is a
        producer: this stage reads it at its own axes (``T[i, j]``, any order)
        or at indices along axes that one iteration of ``axis`` computes whole
        (``sum[i, 0]``), from outside its reduction loops, and computes what
        that iteration wrote.  A later split or fuse of ``axis`` keeps the
        stage at one iteration of it (the inner loop, the fused loop).
        Anything else raises here, or at the later call that breaks it.
        """
        if not isinstance(other, StageSchedule):
            other = self.sched[other]
        if other is self:
            raise ScheduleError(f"compute_at: stage {self.name} cannot be attached to itself",
                                hint="attach it to a loop of a stage that reads its result")
        if other.attach is AttachKind.INLINE:
            raise ScheduleError(f"compute_at: stage {other.name} is inlined{where(other.attach_loc)} and has "
                                "no loops", hint=f"attach {self.name} to a stage that has loops")
        ax = other._leaf(axis, "compute_at")
        g = self.sched
        if g.depends(other, self):
            # a consumer, or a later stage whose loop encloses the consumers (bound inference
            # checks that every reader runs inside that loop)
            if self.stage.output in self.sched.output_tensors():
                raise ScheduleError(f"compute_at: {self.name} is a kernel output; only intermediate "
                                    "stages can be computed inside their consumers",
                                    hint=f"attach an intermediate stage instead, or schedule "
                                         f"{self.name}'s own loops")
        elif g.reads(self, other) or g.depends(self, other):
            pass  # a consumer computed inside its producer's loop (legality checks it reads it directly)
        else:
            raise ScheduleError(f"compute_at: stage {self.name} neither reads nor is read by stage {other.name}",
                                hint="attach a stage to a loop of a stage that uses its result (or of its producer)")
        self._set_attach(AttachKind.AT, other, ax)

    def _set_attach(self, kind, stage=None, axis=None):
        was = self.attach is AttachKind.AT
        self.attach, self.attach_stage, self.attach_axis = kind, stage, axis
        self.attach_loc = user_location() if kind is not AttachKind.ROOT else None
        self.sched._n_attached += (kind is AttachKind.AT) - was

    def _attached_here(self) -> list:
        return [h for h in self.sched._handles.values()
                if h.attach is AttachKind.AT and h.attach_stage is self]

    @primitive(check=True)
    def compute_inline(self):
        """Substitute this elementwise stage into every reader (no buffer, no loops)."""
        if self.stage.is_reduction:
            raise ScheduleError(f"compute_inline: {self.name} is a reduction and cannot be inlined",
                                hint="compute_at it inside its consumer instead")
        if hasattr(getattr(self.stage, "scan", None), "init_steps"):
            raise ScheduleError(f"compute_inline: stage {self.name} is a kd.scan: it cannot be "
                                "inlined (its steps read its own earlier steps)",
                                hint=f"leave {self.name} at its own loops")
        if self.stage.output in self.sched.output_tensors():
            raise ScheduleError(f"compute_inline: {self.name} is a kernel output and cannot be inlined",
                                hint="inline only intermediate stages (a kernel output must be "
                                     "stored); compute_at or schedule its loops instead")
        here = self._attached_here()
        if here:
            raise ScheduleError(f"compute_inline: stage {here[0].name} is attached to loop "
                                f"{here[0].attach_axis.name} of {self.name}{where(here[0].attach_loc)}; an "
                                "inlined stage has no loops",
                                hint=f"attach {here[0].name} elsewhere first, or keep {self.name} in its own loops")
        if self.buffer_stages > 1:
            raise ScheduleError(f"compute_inline: stage {self.name} is pipelined; an inlined stage has no buffer",
                                hint=f"drop the pipelining of {self.name} (stages=) or keep it in its own buffer")
        if self.store_predicate is not None:
            raise ScheduleError(f"compute_inline: stage {self.name} stores only where its predicate holds"
                                f"{where(self.store_predicate_loc)} (a pack leaves its ragged end unwritten), "
                                "so it cannot be substituted into its readers",
                                hint=f"keep {self.name} in its own loops (compute_at or compute_root)")
        self._set_attach(AttachKind.INLINE)

    @primitive(check=True)
    def compute_root(self):
        """Compute this stage in its own loop nest at the top level (the default)."""
        if self.buffer_stages > 1:
            raise ScheduleError(f"compute_root: stage {self.name} is pipelined, which needs it attached inside "
                                "the loop it is pipelined over",
                                hint=f"attach {self.name} with compute_at inside the loop it is pipelined over")
        self._set_attach(AttachKind.ROOT)

    @primitive()
    def set_scope(self, scope):
        """Keep this stage's buffer in ``global``, ``shared`` or ``local`` memory."""
        self.scope = as_scope(scope)

    @primitive()
    def double_buffer(self):
        """Keep two copies of this stage's buffer so loads overlap compute (same as pipeline(2))."""
        self.pipeline(2)

    @primitive()
    def pipeline(self, stages: int):
        """Multi-buffer this stage's buffer across ``stages`` iterations (cp.async on CUDA)."""
        from .pipelining import check_pipelinable, check_stages
        check_stages(stages)
        # a copy global -> shared attached at a serial loop (the loop: when the schedule is
        # finished, if compute_at comes later)
        check_pipelinable(self, placed=self.attach is AttachKind.AT)
        self.buffer_stages = stages
        self.pipeline_loc = user_location()

    @primitive()
    def tensorize(self, axis, intrin):
        """Replace the loop nest below ``axis`` by a tensor intrinsic (``kd.intrin.wmma``,
        ``kd.intrin.wgmma``)."""
        from .intrin import WGMMA, WMMA, BlockIntrinsic
        ax = self._leaf(axis, "tensorize")
        if not isinstance(intrin, (WMMA, WGMMA, BlockIntrinsic)):
            raise ScheduleError(f"tensorize takes an intrinsic such as kd.intrin.wmma(16, 16, 16) or "
                                f"kd.intrin.wgmma(256), got {intrin!r}",
                                hint=f"s[{self.name!r}].tensorize(axis, kd.intrin.wmma(16, 16, 16))")
        self.tensorized = Tensorize(ax, intrin, user_location())

    @primitive()
    def set_store_predicate(self, cond, *axes):
        """Store results only where ``cond`` holds.

        ``cond`` is a function of the given axes, e.g.
        ``B.set_store_predicate(lambda tx: tx == 0, B.reduce_axes[0])`` (without
        axes: of the stage's spatial axes), or a comparison of an axis with an
        int, such as ``C.set_store_predicate(C.axes[0] < 10)`` (arithmetic and
        ``& | ~`` work on axes too: ``(C.axes[0] * 2 + C.axes[1] < 9) & (C.axes[1] > 0)``).
        """
        example = f"{self.name}.set_store_predicate(lambda i: i < 10, {self.name}.axes[0])"
        if isinstance(cond, int):     # bool, or ~ of one
            raise ScheduleError(f"set_store_predicate got the Python {type(cond).__name__} {cond}, not a condition on axes "
                                "(== between an axis and a number compares the objects)",
                                hint=f"write it as a function of the axes: {example.replace('<', '==')}")
        if callable(cond):
            from ..frontend.predicate import trace_axis_expr
            ivs = [self._predicate_axis(a) for a in axes] or list(self.stage.axes)
            _check_arity(cond, len(ivs), f"set_store_predicate: the predicate function gets one argument per "
                         f"axis ({', '.join(a.name for a in ivs) or 'none'})", example)
            expr = trace_axis_expr(cond, ivs)
        else:
            if axes:
                raise ScheduleError("set_store_predicate takes axes only with a function of them",
                                    hint=example)
            expr = cond
        if isinstance(expr, AxisExpr):    # operators on axes: C.axes[0] * 2 < 10
            expr = expr.expr
        if not isinstance(expr, n.Expr) or not expr.dtype.is_bool:
            got = "an integer axis expression" if isinstance(expr, n.Expr) else type(expr).__name__
            raise ScheduleError("set_store_predicate takes a condition on axes (or a function of axes "
                                f"returning one), got {got}", hint=f"compare it, e.g. {example}")
        own = {a.var for a in self.stage.axes + self.stage.reduce_axes} | {a.var for a in self.leaf}
        for rel in self.relations:
            own |= {a.var for a in relation_axes(rel)}
        from ..ir.visitor import free_vars
        outer = {a.var for h in self.sched._handles.values() if h is not self for a in h.leaf}
        foreign = [v for v in free_vars(expr) if v not in own and v not in outer]
        if foreign:
            raise ScheduleError(f"set_store_predicate: the condition uses {foreign[0].name}, which is not an "
                                f"axis of stage {self.name} ({self._describe()})", hint=f"e.g. {example}")
        self.store_predicate = expr
        self.store_predicate_loc = user_location()


def _predicate_axes_enclose(h, placement) -> None:
    """A store predicate on another stage's loop (TVM's ``tx.var.equal(0)``) needs ``h``
    computed inside that loop (checked on the finished schedule, at the predicate's line)."""
    pred = h.store_predicate
    if pred is None:
        return
    from ..ir.visitor import free_vars
    own = {a.var for a in h.stage.axes + h.stage.reduce_axes} | {a.var for a in h.leaf}
    for rel in h.relations:
        own |= {a.var for a in relation_axes(rel)}
    around = {iv.var for _, iv in placement.loops(h)}
    for v in free_vars(pred):
        if v in own or v in around:
            continue
        other = next((g for g in h.sched.stages if any(a.var is v for a in g.leaf)), None)
        if other is None:
            continue    # a symbol of the kernel (a shape, a scalar)
        raise ScheduleError(f"set_store_predicate: the store predicate of {h.name} uses {v.name}, a loop of "
                            f"stage {other.name}, but {h.name} is not computed inside that loop",
                            hint=f"a store predicate may use {h.name}'s own axes and the loops it is computed "
                            f"inside (compute_at({other.name}, axis) puts it there); kdsl stores a stage "
                            "computed after a cross-thread reduction from one thread itself",
                            loc=h.store_predicate_loc)


def _check_arity(fn, count: int, what: str, example: str):
    """ScheduleError when ``fn`` cannot be called with ``count`` positional arguments."""
    try:
        inspect.signature(fn).bind(*range(count))
    except TypeError:
        raise ScheduleError(f"{what}; the function does not take {count}", hint=example) from None
    except ValueError:
        pass    # no signature to inspect (a builtin): let the call decide


def split_extents(ext, factor, nparts, keep: bool = False):
    """(outer, inner) extents of splitting an axis of extent ``ext``.

    Where ``ext`` is a constant smaller than the inner (``factor``) or outer
    (``nparts``) extent, that loop gets ``ext`` instead: the same iterations,
    and a chain of splits by factors that do not divide never makes loops (or
    the regions inferred from them) grow with the product of the factors.
    ``keep`` (a split whose loops lead to a thread index, ``threaded_splits``):
    the loops keep the asked extents, guarded, as in TVM, so that a block has
    the shape the schedule binds whatever the sizes.
    """
    small = ext.value if isinstance(ext, n.Const) and ext.value >= 1 and not keep else None
    if factor is not None:
        inner = factor if small is None else min(factor, small)
        return mk.ceildiv(ext, factor), mk.as_expr(inner)
    outer = nparts if small is None else min(nparts, small)
    return mk.as_expr(outer), mk.ceildiv(ext, outer)


def threaded_splits(h) -> set:
    """The Split relations of stage ``h`` whose outer or inner loop is, or is split or fused
    into, a loop bound to a thread index (threadIdx or vthread), and every split of a
    tensorized stage: their loops keep the factor's extent (``split_extents(keep=True)``)."""
    threaded = {iv for iv, attr in h.attrs.items()
                if attr.thread is not None and not attr.thread.is_block and iv in h.leaf}
    if h.tensorized is not None:    # the intrinsic's tile: every loop keeps its extent
        threaded.update(h.leaf)
    if not threaded:
        return set()
    keep = set()
    for rel in reversed(h.relations):
        if isinstance(rel, Split):
            if rel.outer in threaded or rel.inner in threaded:
                keep.add(rel)
                threaded.add(rel.parent)
        elif rel.fused in threaded:
            threaded.update((rel.outer, rel.inner))
    return keep
