"""Stage plans: what each stage's loops become, decided by defaults and hints, realised in one place.

A backend's default rules and the user's ``@kd.schedule`` hints both write a
``StagePlan`` per stage (the hints override fields of the default plan, see
hints.py), and ``realize`` turns every plan into schedule primitives in one
fixed, legal order, whatever order the hints came in:

1. reduction axes are cut: partial reductions (``rfactor``: ``nparts`` contiguous
   chunks), tiles of reduction axes, SIMD lanes of a reduction axis;
2. ``rfactor`` makes the partial-reduction stage ``<B>.rf`` and, for lanes, the
   lane stage ``<B>.rf[.rf]``; the last one created is the *work stage*, which
   reads the inputs; the stages before it combine a short axis of partials;
3. the work stage's spatial axes are tiled and cut for the vector loop;
4. loops are ordered: outer parts (partials first when they run in parallel,
   spatial axes, then reduction axes, each in definition order), then tile
   inner parts, then the vector loop; reduction axes unrolled fully with a
   constant extent (a stencil's window) go innermost, inside the vector loop;
5. ``unroll`` (a factor) splits the innermost loop that is neither the vector
   loop nor a named one; named ``unroll`` axes unroll their innermost
   non-vector part;
6. the outermost part of the parallel axis (or the partials) becomes parallel,
   the vector loop vectorized.

Plans name axes by the stage's root axis names (``i0``, ``r0``: what the user
sees in ``kernel.lower`` without a schedule); internal names such as
``i1.inner`` never appear in a plan or in an error about one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InternalCompilerError, ScheduleError
from ..ir import nodes as n
from ..ir.visitor import collect, uses_var
from .records import AttachKind

#: ``StagePlan.parallel`` value: the loop over partial reductions runs in parallel
PARTIALS = "<partials>"
#: bytes of one SIMD register: a vector loop without an explicit width gets this many bytes
VECTOR_BYTES = 32


@dataclass(frozen=True)
class Recipe:
    """A backend's own realisation of a whole stage (the CPU GEMM): ``apply(sched, handle, plan)``;
    ``accepts(plan, stage)`` says whether it can honour the plan's hinted fields (else the generic
    realisation runs)."""

    name: str
    apply: object
    accepts: object


@dataclass
class StagePlan:
    """What one stage's loops should become (every field in root-axis names)."""

    tile: dict = field(default_factory=dict)      # axis -> factor
    parallel: object = None                       # None, an axis name or PARTIALS
    vectorize: int | None = None                  # vector width (None: natural or off)
    vector_axis: str | None = None                # which axis (None: the contiguous one)
    unroll: int | None = None                     # factor for the innermost non-vector loop
    unroll_axes: tuple = ()                       # axes whose innermost part is unrolled fully
    rfactor: int | None = None                    # number of partial reductions
    rfactor_axis: str | None = None               # which reduction axis is cut into them
    recipe: Recipe | None = None
    #: fields a hint set (the rest are the backend's defaults, which hints may move)
    explicit: set = field(default_factory=set)

    @property
    def vectorized(self) -> bool:
        return self.vectorize is not None or self.vector_axis is not None


def axis_names(stage) -> dict:
    """IterVar -> the name hints use for it: the axis's own name, with ``_1``, ``_2``... on
    repeats within the stage (two ``kd.reduce_axis(3)`` are ``k`` and ``k_1``, as printed)."""
    out, used = {}, set()
    for a in list(stage.axes) + list(stage.reduce_axes):
        base = name = a.name or "ax"
        k = 0
        while name in used:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        out[a] = name
    return out


def spatial_names(stage) -> list:
    names = axis_names(stage)
    return [names[a] for a in stage.axes]


def reduce_names(stage) -> list:
    names = axis_names(stage)
    return [names[a] for a in stage.reduce_axes]


def vector_axis_name(stage, plan) -> str | None:
    """The axis a vectorized plan vectorizes (its own choice, else the contiguous axis)."""
    if not plan.vectorized:
        return None
    if plan.vector_axis is not None:
        return plan.vector_axis
    c = contiguous_axis(stage)
    return axis_names(stage)[c] if c is not None else None


def contiguous_axis(stage) -> n.IterVar | None:
    """The root axis along which the stage's reads walk memory (the default vector axis).

    Each read of a row-major tensor votes for the axes its last index uses;
    ties go to spatial axes, then to inner ones.
    """
    axes = list(stage.axes) + list(stage.reduce_axes)
    if not axes:
        return None
    votes = {a: 0 for a in axes}
    for r in collect(stage.body, lambda x: isinstance(x, n.TensorRead)):
        op = getattr(r.tensor, "op", None)
        if not r.indices or getattr(op, "contiguous", True) is False:
            continue
        for a in axes:
            if uses_var(r.indices[-1], a.var):
                votes[a] += 1
    spatial = list(stage.axes)
    rank = {a: (votes[a], a in spatial, k) for k, a in enumerate(axes)}
    best = max(axes, key=lambda a: rank[a])
    if votes[best] == 0:
        return spatial[-1] if spatial else axes[-1]
    return best


def natural_width(stage) -> int:
    """SIMD lanes of one register for the stage's element type."""
    return max(2, VECTOR_BYTES // max(1, stage.dtype.itemsize))


def _const(iv) -> int | None:
    e = iv.dom.extent
    return int(e.value) if isinstance(e, n.Const) else None


@dataclass
class Realized:
    """What ``realize_stage`` made: the stage that reads the inputs, and the parts of each axis."""

    work: object
    parts: dict
    combines: list


class _Stage:
    """Realisation state of one stage (see the module docstring for the steps)."""

    def __init__(self, sched, h, plan: StagePlan):
        self.sched, self.h, self.plan = sched, h, plan
        st = h.stage
        names = axis_names(st)
        self.sp = [names[a] for a in st.axes]
        self.rd = [names[a] for a in st.reduce_axes]
        self.parts = {names[a]: [a] for a in list(st.axes) + list(st.reduce_axes)}
        self.vname = vector_axis_name(st, plan)
        self.vec = None
        self.p = None            # the partial-reduction axis (in the current stage)
        self.p_first = plan.parallel == PARTIALS
        self.combines = []

    # ---------------------------------------------------------------- cutting
    def _split(self, x, name, iv, **kw):
        o, i = x.split(iv, **kw)
        lst = self.parts[name]
        k = lst.index(iv)
        lst[k:k + 1] = [o, i]
        return o, i

    def _vector_part(self, x, name):
        """Cut the vector loop off the innermost part of ``name``."""
        iv = self.parts[name][-1]
        width = self.plan.vectorize
        tiled = name in self.plan.tile
        if width is None and tiled and len(self.parts[name]) > 1:
            self.vec = iv
            return
        width = width or natural_width(self.h.stage)
        if tiled and _const(iv) == width:
            self.vec = iv
            return
        _, self.vec = self._split(x, name, iv, factor=width)

    def cut_reductions(self):
        h, plan = self.h, self.plan
        if plan.rfactor and plan.rfactor > 1 and self.rd:
            name = plan.rfactor_axis or self.rd[0]
            iv = self.parts[name][0]
            o, i = h.split(iv, nparts=plan.rfactor)
            self.parts[name] = [i]
            self.p = o
        for name in self.rd:
            if name in plan.tile:
                self._split(h, name, self.parts[name][-1], factor=plan.tile[name])
        if self.vname in self.rd:
            self._vector_part(h, self.vname)

    def _rfactor(self, x, ax, factor_axis: int):
        """rfactor ``x`` over its reduce leaf ``ax``; move every part onto the new stage."""
        old_red = [a for a in x.leaf if a.kind is n.IterKind.REDUCE and a is not ax]
        old_sp = list(x.stage.axes)
        new = self.sched.rfactor(x, ax, factor_axis)
        new_sp = list(new.stage.axes)
        fac = new_sp.pop(factor_axis)
        remap = dict(zip(old_red, new.stage.reduce_axes))
        remap.update(zip(old_sp, new_sp))
        for name, lst in self.parts.items():
            self.parts[name] = [remap.get(a, a) for a in lst if a is not ax]
        if self.p is not None:
            self.p = remap.get(self.p, self.p)
        if self.vec is not None:
            self.vec = remap.get(self.vec, self.vec)
        self.combines.append(x)
        return new, fac

    def factor(self):
        """Make the partial-reduction and lane stages; return the work stage."""
        x = self.h
        if self.p is not None:
            pos = 0 if self.p_first else len(x.stage.axes)
            x, self.p = self._rfactor(x, self.p, pos)
        if self.vname in self.rd and self.vec is not None:
            x, self.vec = self._rfactor(x, self.vec, len(x.stage.axes))
        return x

    def cut_spatial(self, x):
        for name in self.sp:
            if name in self.plan.tile:
                self._split(x, name, self.parts[name][-1], factor=self.plan.tile[name])
        if self.vname in self.sp:
            self._vector_part(x, self.vname)

    # ---------------------------------------------------------------- ordering and marks
    def _window(self) -> list:
        """Innermost parts of reduction axes unrolled fully with a constant extent (a stencil's
        window): they go inside everything, the vector loop included, so that each output
        is computed in straight-line code."""
        out = []
        for name in self.rd:
            rest = [a for a in self.parts[name] if a is not self.vec]
            if name in self.plan.unroll_axes and rest and _const(rest[-1]) is not None:
                out.append(rest[-1])
        return out

    def order(self, x):
        window = self._window()
        out = [self.p] if self.p is not None and self.p_first else []
        out += [self.parts[a][0] for a in self.sp]
        if self.p is not None and not self.p_first:
            out.append(self.p)
        out += [self.parts[a][0] for a in self.rd if self.parts[a]]
        for a in self.sp + self.rd:
            out += [v for v in self.parts[a][1:] if v is not self.vec]
        if self.vec is not None:
            out.append(self.vec)
        out = [v for v in out if v not in window] + window
        if len(out) != len(x.leaf) or set(map(id, out)) != set(map(id, x.leaf)):
            raise InternalCompilerError(f"schedule plan of stage {self.h.name}: loop order "
                                        f"{[a.name for a in out]} does not cover "
                                        f"{[a.name for a in x.leaf]}")
        if out:
            x.reorder(*out)

    def _owner(self, iv):
        for name, lst in self.parts.items():
            if iv in lst:
                return name
        return None

    def _par_leaf(self):
        par = self.plan.parallel
        if par == PARTIALS:
            return self.p
        if par is None or par not in self.parts or not self.parts[par]:
            return None
        return self.parts[par][0]

    def marks(self, x):
        plan = self.plan
        unrolled = set()
        named = {id(a) for name in plan.unroll_axes for a in self.parts.get(name, ())}
        if plan.unroll and plan.unroll > 1:
            scan = getattr(x.stage, "scan", None)     # a kd.scan's axis runs in order: not split
            t_scan = axis_names(x.stage)[x.stage.axes[scan.axis]] if hasattr(scan, "init_steps") else None
            cands = [a for a in x.leaf if a is not self.vec and id(a) not in named
                     and (t_scan is None or self._owner(a) != t_scan)]
            if cands:
                t = cands[-1]
                c = _const(t)
                if c is not None and c <= plan.unroll and t is not self._par_leaf():
                    ui = t
                else:
                    name = self._owner(t)
                    if name is not None:
                        _, ui = self._split(x, name, t, factor=plan.unroll)
                    else:        # the partials axis
                        self.p, ui = x.split(t, factor=plan.unroll)
                x.unroll(ui)
                unrolled.add(ui)
        for name in plan.unroll_axes:
            rest = [a for a in self.parts.get(name, ()) if a is not self.vec]
            if rest:
                x.unroll(rest[-1])
                unrolled.add(rest[-1])
        par = self._par_leaf()
        if par is not None and par not in unrolled:   # (hints.py resolves that conflict)
            x.parallel(par)
        if self.vec is not None:
            x.vectorize(self.vec)
        if plan.parallel is not None:
            for c in self.combines:
                if c.stage.axes and c.leaf[0].kind is n.IterKind.SPATIAL:
                    c.parallel(c.leaf[0])


def realize_stage(sched, h, plan: StagePlan) -> Realized:
    """Turn ``plan`` into primitives on stage ``h`` (see the module docstring)."""
    if plan.recipe is not None:
        plan.recipe.apply(sched, h, plan)
        return Realized(h, {}, [])
    s = _Stage(sched, h, plan)
    s.cut_reductions()
    x = s.factor()
    s.cut_spatial(x)
    s.order(x)
    s.marks(x)
    return Realized(x, s.parts, s.combines)


def realize(sched, plans: dict, attach: dict | None = None) -> dict:
    """Realise ``plans`` (stage name -> StagePlan) on ``sched``; then attach each stage of
    ``attach`` (name -> consumer name) at the outermost loop of the consumer's first axis.

    A primitive refusing a plan is a kdsl bug (plans are legal by construction)."""
    done = {}
    try:
        for h in list(sched.stages):
            plan = plans.get(h.name)
            if plan is not None and h.attach is not AttachKind.INLINE:
                done[h.name] = realize_stage(sched, h, plan)
        for name, consumer in (attach or {}).items():
            r = done.get(consumer)
            c = sched[consumer]
            first = spatial_names(c.stage)[0]
            axis = r.parts[first][0] if r is not None and r.parts.get(first) else c.leaf[0]
            sched[name].compute_at(c, axis)
    except ScheduleError as e:
        raise InternalCompilerError(f"realising the schedule plan failed: {e.message}") from e
    return done
