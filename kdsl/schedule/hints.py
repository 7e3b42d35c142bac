"""Declarative schedule hints: the ``@kd.schedule`` decorator, their checks, and plans from them.

``@kd.schedule(target, **hints)`` records a ``Hint``; ``@kd.schedule(target, fn)``
records an explicit schedule function ``fn(s)``.  Hint values are checked when
the decorator runs, names (stages, axes) when a kernel is scheduled.

Hints adjust a backend's default schedule: a backend builds one
``StagePlan`` per stage from its default rules (plan.py), ``merge_hints``
overrides the plan fields the hints name, and ``plan.realize`` applies the
result in one fixed order, so every combination composes in any order.
``apply_hints`` is the same with empty defaults (the interpreter, and targets
that are not installed).  Hardware hints (``threads``, ``cache``, ``stages``,
``tensor_cores``) are also left in ``sched.backend_hints[stage_name]`` for the
backend to interpret; a backend ignores what does not apply to it.
"""
from __future__ import annotations

import functools
import types
from dataclasses import dataclass, field

from ..errors import ScheduleError, SourceLoc, for_user, user_location
from .patterns import cast_read
from .plan import PARTIALS, StagePlan, axis_names, realize, reduce_names, spatial_names, \
    vector_axis_name

GENERIC = ("tile", "parallel", "vectorize", "unroll", "rfactor")
HARDWARE = ("threads", "cache", "stages", "tensor_cores")
VOCABULARY = GENERIC + HARDWARE + ("stage",)
#: partial reductions ``parallel=True`` makes on a stage that only reduces (without a backend's count)
DEFAULT_PARTS = 4


@dataclass(frozen=True, eq=False)
class Hint:
    """One ``@kd.schedule`` decorator: hints for ``target`` (None: every backend) or a function."""

    target: str | None
    hints: dict = field(default_factory=dict)
    fn: object = None
    loc: SourceLoc | None = None

    def applies_to(self, backend: str) -> bool:
        return self.target is None or self.target == backend


def schedule(target=None, fn=None, **hints):
    """Decorator: schedule hints (or an explicit schedule function) for ``target``.

    ``@kd.schedule("cpu", parallel="i0", vectorize=8)`` on a kernel function (or a
    Kernel); ``target=None`` means every backend; several decorators stack.  Hints
    (axes are named as ``kernel.lower`` shows them without a schedule: ``i0``, ``r0``):

    * ``tile={"i0": 32, "i1": 8}``: split axes; outer parts outside, inner parts inside
    * ``parallel="i0"`` or ``True`` (the backend's choice) or ``False`` (no parallel loop);
      naming a reduction axis reduces it in parallel partial results
    * ``vectorize=8`` (width, along the axis the reads walk contiguously; on a reduction
      along its rows that means 8 partial results in SIMD lanes) or ``vectorize="i1"``
    * ``unroll=4`` (the innermost non-vector loop, by a factor) or ``unroll="r0"`` / a list
      (unrolled fully when the extent is a constant, else by a factor; kdsl caps the code
      growth and warns when it unrolls less than asked)
    * ``rfactor=8``: 8 partial reductions over contiguous chunks, computed in parallel
    * ``threads``: CPU thread count (an int) or CUDA block shape (a tuple)
    * ``cache={"A": "shared"}``, ``stages=2`` (>= 2), ``tensor_cores=True``: GPU only
    * ``stage="name"``: the stage the hints apply to (default: the first output, or the
      reduction it casts, e.g. the float32 product of ``A @ B`` on float16 arrays)

    The user's function (or Kernel) is not modified: the decorator returns a copy that carries
    the hints (a Kernel's copy: a new Kernel with its schedules and this one, nothing compiled).
    """
    try:
        return _schedule(target, fn, hints)
    except ScheduleError as e:
        __tracebackhide__ = True  # noqa: F841
        raise for_user(e) from None


def _no_registry() -> list:
    from ..errors import InternalCompilerError
    raise InternalCompilerError("no backend registry: kdsl.backends.registry sets the target names")


#: () -> the sorted names a schedule may target; the backend registry sets it when it loads
#: (``set_target_names``: this layer sits below the backends and never imports them)
_target_names = _no_registry


def set_target_names(fn) -> None:
    """Where ``check_target`` learns the known target names (kdsl.backends.registry.known_targets)."""
    global _target_names
    _target_names = fn


def check_target(target, loc, who="kd.schedule"):
    """A ScheduleError at ``loc`` unless ``target`` is None or a known backend name (the
    error lists the known ones)."""
    if target is None:
        return
    if not isinstance(target, str):
        raise ScheduleError(f"{who} target must be a backend name or None, got {target!r}",
                            hint="e.g. 'cpu', 'cuda', 'interp', 'numpy'", loc=loc)
    known = _target_names()
    if target not in known:
        raise ScheduleError(f"{who.rstrip(':')}: unknown target {target!r}",
                            hint=f"the known targets are {', '.join(known)} (or None for all)",
                            loc=loc)


def _schedule(target, fn, hints):
    loc = user_location()
    if callable(target) and fn is None and not isinstance(target, str):
        raise ScheduleError("kd.schedule needs a target first: @kd.schedule('cpu', parallel='i0') "
                            "or @kd.schedule('cuda', my_schedule_fn)", loc=loc,
                            hint="put the target first: kd.schedule('cuda', fn) or @kd.schedule('cpu', parallel='i0')")
    check_target(target, loc)
    if fn is not None and hints:
        raise ScheduleError("kd.schedule takes either a schedule function or hints, not both", loc=loc,
                            hint="use two decorators: one with the function, one with the hints")
    if fn is not None and not callable(fn):
        raise ScheduleError(f"kd.schedule's second argument must be a function of the schedule, got {fn!r}",
                            loc=loc,
                            hint="pass a function taking the schedule: def my_schedule(s): ...")
    unknown = sorted(set(hints) - set(VOCABULARY))
    if unknown:
        raise ScheduleError(f"unknown schedule hint(s) {', '.join(unknown)}",
                            hint=f"the hints are: {', '.join(VOCABULARY)}", loc=loc)
    for key, value in hints.items():
        _check_value(key, value, loc)
    if target == "cuda" and "threads" in hints:    # a block shape: the device's limit
        from .limits import check_threads_hint
        check_threads_hint(hints["threads"], loc)
    hint = Hint(target, dict(hints), fn, loc)

    def deco(obj):
        if getattr(obj, "_add_schedule", None) is not None:    # a Kernel: a copy carries the hint
            new = _copy_kernel(obj)
            new._add_schedule(hint)
            return new
        if not callable(obj):
            raise ScheduleError("@kd.schedule decorates a kernel function", loc=loc,
                                hint="put @kd.schedule(...) above a def (or a kd.kernel)")
        new = _copy_function(obj)
        new.__kdsl_schedules__ = list(getattr(obj, "__kdsl_schedules__", ())) + [hint]
        return new
    return deco


def _copy_kernel(k):
    """A new Kernel of ``k``'s function with ``k``'s schedules (nothing compiled), so that
    ``kd.schedule(target, ...)(k)`` leaves ``k`` as it was, like a decorated function."""
    new = type(k)(k.fn, specialize=k.specialize, constants=k.constants)
    new._hints = list(k._hints)
    return new


def _copy_function(obj):
    """A copy of ``obj`` to carry the hints, so the user's function stays as it was."""
    if isinstance(obj, types.FunctionType):
        new = types.FunctionType(obj.__code__, obj.__globals__, obj.__name__, obj.__defaults__,
                                 obj.__closure__)
        new.__dict__.update(obj.__dict__)
        for attr in ("__kwdefaults__", "__qualname__", "__module__", "__doc__", "__annotations__"):
            setattr(new, attr, getattr(obj, attr))
        return new

    @functools.wraps(obj)
    def scheduled(*args, **kwargs):
        return obj(*args, **kwargs)
    return scheduled


# ---------------------------------------------------------------- value checks
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _names(v) -> bool:
    return isinstance(v, str) or (isinstance(v, (list, tuple)) and len(v) > 0
                                  and all(isinstance(x, str) for x in v))


def _bad(key, value, what, example, loc):
    raise ScheduleError(f"schedule hint {key}={value!r}: {key} takes {what}",
                        hint=f"e.g. {key}={example}", loc=loc)


def _check_value(key, v, loc) -> None:
    """Reject a hint value that can mean nothing, with what would work."""
    if key == "tile":
        if not isinstance(v, dict) or not v:
            _bad(key, v, "a dict axis -> factor", "{'i0': 32}", loc)
        for ax, f in v.items():
            if not isinstance(ax, str) or not _is_int(f) or f < 1:
                _bad(key, v, "axis names mapped to positive int factors", "{'i0': 32}", loc)
    elif key == "parallel":
        if not isinstance(v, (bool, str)):
            _bad(key, v, "an axis name, True (the backend picks) or False", "'i0'", loc)
    elif key == "vectorize":
        if not (isinstance(v, str) or (_is_int(v) and v >= 1)):
            _bad(key, v, "a vector width (an int >= 1) or an axis name", "8", loc)
    elif key == "unroll":
        if not (_names(v) or (_is_int(v) and v >= 1)):
            _bad(key, v, "an unroll factor (an int >= 1) or axis names", "4", loc)
    elif key == "rfactor":
        if not _is_int(v) or v < 1:
            _bad(key, v, "the number of partial reductions (an int >= 1)", "8", loc)
    elif key == "threads":
        ok = (_is_int(v) and v >= 1) or (isinstance(v, (list, tuple)) and 1 <= len(v) <= 3
                                         and all(_is_int(t) and t >= 1 for t in v))
        if not ok:
            _bad(key, v, "a thread count (an int >= 1) or a CUDA block shape of 1 to 3 "
                 "positive ints", "(16, 16)", loc)
    elif key == "cache":
        if not isinstance(v, dict) or not all(isinstance(t, str) for t in v):
            _bad(key, v, "a dict input name -> 'shared' or 'local'", "{'A': 'shared'}", loc)
        for t, scope in v.items():
            if scope not in ("shared", "local"):
                _bad(key, v, "'shared' or 'local' for each input", "{'A': 'shared'}", loc)
    elif key == "stages":
        if not _is_int(v) or v < 2:
            _bad(key, v, "the number of buffers of a multi-buffered copy (an int >= 2)", "2", loc)
    elif key == "tensor_cores":
        if not isinstance(v, bool):
            _bad(key, v, "True or False", "True", loc)
    elif key == "stage":
        if not isinstance(v, str):
            _bad(key, v, "the name of a stage", "'sum'", loc)


# ---------------------------------------------------------------- name checks
def _err(hint: Hint, msg: str, what: str | None = None):
    return ScheduleError(msg, hint=what, loc=hint.loc)


def _stage_of(sched, hint: Hint):
    name = hint.hints.get("stage")
    if name is None:
        return _cast_source(sched, sched.outputs[0])
    try:
        return sched[name]
    except ScheduleError:
        raise _err(hint, f"schedule hint stage={name!r}: there is no such stage; stages: "
                   f"{', '.join(s.name for s in sched.stages)}") from None


def _cast_source(sched, h):
    """The stage the default hints target: the first output, or, when that output only casts
    a reduction element for element (``A @ B`` and ``A.sum(axis=1)`` of float16 arrays
    accumulate in float32, then cast), the reduction: the user's axes (``r0``) live there."""
    rd = cast_read(h.stage)
    src = rd.tensor.stage if rd is not None else None
    if src is None or not src.is_reduction or len(src.axes) != len(h.stage.axes):
        return h
    try:
        return sched[src.name]
    except ScheduleError:
        return h


def describe_axes(stage) -> str:
    """``stage sum has axes i0 and reduction axes r0`` (root names, as the user sees them)."""
    sp = ", ".join(spatial_names(stage))
    rd = ", ".join(reduce_names(stage))
    if not sp and not rd:
        return f"stage {stage.name} has no axes"
    text = f"stage {stage.name} has " + (f"axes {sp}" if sp else "no spatial axes")
    return text + (f" and reduction axes {rd}" if rd else "")


def validate_hint(sched, hint: Hint):
    """Check every name a hint uses against the schedule; raise ScheduleError listing what exists."""
    hv = hint.hints
    for key, value in hv.items():
        if key not in VOCABULARY:
            raise _err(hint, f"unknown schedule hint {key}", f"the hints are: {', '.join(VOCABULARY)}")
        _check_value(key, value, hint.loc)
    h = _stage_of(sched, hint)
    st = h.stage
    names = set(axis_names(st).values())

    def check(key, ax):
        if ax not in names:
            have = sorted(names)
            raise _err(hint, f"schedule hint {key} names axis {ax!r}, but {describe_axes(st)}",
                       f"name one of {', '.join(have)}" if have else
                       f"drop {key}=, or give stage= naming a stage that has loops")

    t_scan = _scan_axis_name(st)

    def in_order(key, ax):          # a kd.scan's axis: one sequential loop
        if ax == t_scan and key != "unroll":
            raise _err(hint, f"schedule hint {key} names axis {ax!r}, the scan axis of stage "
                       f"{st.name} (a kd.scan): each step reads the previous one, so it stays "
                       "one sequential loop", f"name another axis of {st.name}, or drop {key}=")

    for ax in hv.get("tile", {}):
        check("tile", ax)
        in_order("tile", ax)
    for key in ("parallel", "vectorize", "unroll"):
        v = hv.get(key)
        for ax in ([v] if isinstance(v, str) else list(v) if isinstance(v, (list, tuple)) else []):
            check(key, ax)
            in_order(key, ax)
    if "cache" in hv:
        reads = {t.name for t in st.reads()}
        for t in hv["cache"]:
            if t not in reads:
                raise _err(hint, f"schedule hint cache names {t!r}, but stage {h.name} reads "
                           f"{', '.join(sorted(reads)) or 'no tensors'}")
    if hv.get("rfactor", 1) > 1 and not st.is_reduction:
        raise _err(hint, f"schedule hint rfactor: stage {h.name} is not a reduction",
                   "rfactor splits a reduction into partial results; name a reducing stage "
                   "with stage=")
    return h


# ---------------------------------------------------------------- hints -> plans
def record_backend_hints(sched, hints) -> None:
    """Leave the hardware hints in ``sched.backend_hints[stage]`` (validated names)."""
    for hint in hints:
        if hint.fn is not None:
            continue
        h = validate_hint(sched, hint)
        hw = {k: hint.hints[k] for k in HARDWARE if k in hint.hints}
        if hw:
            sched.backend_hints.setdefault(h.name, {}).update(hw)


def merge_hints(sched, plans: dict, hints, parts: int = DEFAULT_PARTS) -> None:
    """Override the fields of ``plans`` (stage name -> StagePlan) that ``hints`` name.

    ``parts``: how many partial reductions ``parallel=True`` makes on a stage
    without spatial axes (the backend's thread count)."""
    touched = {}
    for hint in hints:
        if hint.fn is not None:
            continue
        h = validate_hint(sched, hint)
        plan = plans.get(h.name)
        if plan is None:
            plan = plans[h.name] = StagePlan()
        _merge_one(h.stage, plan, hint.hints, parts)
        touched[h.name] = hint
    for name, hint in touched.items():
        _settle(sched[name].stage, plans[name], hint)
        _spare_scan_axis(sched[name].stage, plans[name])


def _merge_one(st, plan: StagePlan, hv: dict, parts: int) -> None:
    """One decorator's hints, in a fixed order (so the keyword order does not matter)."""
    ex = plan.explicit
    spatial = spatial_names(st)
    if "rfactor" in hv:
        ex.add("rfactor")
        plan.rfactor = hv["rfactor"] if hv["rfactor"] > 1 else None
        pinned = "parallel_axis" in ex or ("parallel" in ex and plan.parallel is None)
        if plan.rfactor and not pinned:
            plan.parallel = PARTIALS   # partial reductions run in parallel (unless told otherwise)
    if "parallel" in hv:
        p = hv["parallel"]
        ex.add("parallel")
        if p is False:
            plan.parallel = None
            if "rfactor" not in ex:
                plan.rfactor = None
        elif p is True:
            free = [a for a in spatial if a != _scan_axis_name(st)]   # (a scan's axis: in order)
            if plan.rfactor:
                plan.parallel = PARTIALS
            elif plan.parallel is None and free:
                plan.parallel = free[0]
            elif plan.parallel is None and st.reduce_axes and parts > 1:
                plan.rfactor, plan.parallel = parts, PARTIALS
        elif p in spatial:
            plan.parallel = p
            ex.add("parallel_axis")
            if "rfactor" not in ex:
                plan.rfactor = plan.rfactor_axis = None
        else:   # a reduction axis: reduce it in parallel partial results
            plan.rfactor_axis = p
            plan.rfactor = plan.rfactor or max(parts, 2)
            plan.parallel = PARTIALS
    if "tile" in hv:
        ex.add("tile")
        plan.tile.update(hv["tile"])
    if "vectorize" in hv:
        v = hv["vectorize"]
        ex.add("vectorize")
        if isinstance(v, str):
            plan.vector_axis = v
        elif v == 1:
            plan.vectorize = plan.vector_axis = None
        else:
            plan.vectorize = v
    if "unroll" in hv:
        u = hv["unroll"]
        ex.add("unroll")
        if isinstance(u, int):
            plan.unroll = u if u > 1 else None
            if u == 1:
                plan.unroll_axes = ()
        else:
            names = (u,) if isinstance(u, str) else tuple(u)
            plan.unroll_axes = tuple(dict.fromkeys(plan.unroll_axes + names))
    if plan.recipe is not None and not plan.recipe.accepts(plan, st):
        plan.recipe = None


def _scan_axis_name(st) -> str | None:
    """The name of a kd.scan stage's scan axis (None for other stages)."""
    info = getattr(st, "scan", None)
    if info is None or not hasattr(info, "init_steps"):
        return None
    return spatial_names(st)[info.axis]


def _spare_scan_axis(st, plan: StagePlan) -> None:
    """A kd.scan's axis runs in order: ``vectorize=8`` that would pick it (a 1-d ``cumsum``:
    its only axis) is a request with no legal loop, dropped (an axis named explicitly is still
    refused, with the reason)."""
    t = _scan_axis_name(st)
    if t is None:
        return
    if plan.vectorize and plan.vector_axis is None and vector_axis_name(st, plan) == t:
        plan.vectorize = None       # (unroll: plan.py's marks() skips the scan axis itself)


def _settle(st, plan: StagePlan, hint: Hint) -> None:
    """Resolve what two fields of a merged plan ask of the same loop."""
    par = plan.parallel
    if par in plan.unroll_axes and par not in plan.tile:
        if "parallel_axis" in plan.explicit:
            raise _err(hint, f"schedule hints of stage {st.name} ask for the loop over {par} "
                       "to be both unrolled and parallel",
                       f"tile it (tile={{{par!r}: 4}}) to unroll the inner part and run the outer "
                       "part in parallel, or drop one of the two")
        # the user's unroll wins: the backend's parallel loop moves to another axis
        free = [a for a in spatial_names(st) if a not in plan.unroll_axes]
        plan.parallel = free[0] if free else None


def apply_hints(sched, hints, parts: int = DEFAULT_PARTS) -> None:
    """Apply ``hints`` (a list of ``Hint``) on an empty default schedule (generic backends)."""
    record_backend_hints(sched, hints)
    plans: dict = {}
    merge_hints(sched, plans, hints, parts)
    realize(sched, plans)
