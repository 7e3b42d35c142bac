"""Declarative schedule hints: the ``@kd.schedule`` decorator and ``apply_hints``.

``@kd.schedule(target, **hints)`` records a ``Hint``; ``@kd.schedule(target, fn)``
records an explicit schedule function ``fn(s)``.  Backends call
``apply_hints`` to turn the generic hints (``tile``, ``parallel``,
``vectorize``, ``unroll``, ``rfactor``) into primitives; the hardware hints
(``threads``, ``cache``, ``stages``, ``tensor_cores``) are validated here and
left in ``sched.backend_hints[stage_name]`` for the backend to interpret.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ScheduleError, SourceLoc, for_user, user_location
from ..ir import nodes as n

GENERIC = ("tile", "parallel", "vectorize", "unroll", "rfactor")
HARDWARE = ("threads", "cache", "stages", "tensor_cores")
VOCABULARY = GENERIC + HARDWARE + ("stage",)


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
    """Decorator: attach schedule hints (or an explicit schedule function) for ``target``."""
    try:
        return _schedule(target, fn, hints)
    except ScheduleError as e:
        __tracebackhide__ = True  # noqa: F841
        raise for_user(e) from None


def _schedule(target, fn, hints):
    loc = user_location()
    if callable(target) and fn is None and not isinstance(target, str):
        raise ScheduleError("kd.schedule needs a target first: @kd.schedule('cpu', parallel='i0') "
                            "or @kd.schedule('cuda', my_schedule_fn)", loc=loc)
    if target is not None and not isinstance(target, str):
        raise ScheduleError(f"kd.schedule target must be a backend name or None, got {target!r}", loc=loc)
    if fn is not None and hints:
        raise ScheduleError("kd.schedule takes either a schedule function or hints, not both", loc=loc)
    if fn is not None and not callable(fn):
        raise ScheduleError(f"kd.schedule's second argument must be a function of the schedule, got {fn!r}",
                            loc=loc)
    unknown = sorted(set(hints) - set(VOCABULARY))
    if unknown:
        raise ScheduleError(f"unknown schedule hint(s) {', '.join(unknown)}",
                            hint=f"the hints are: {', '.join(VOCABULARY)}", loc=loc)
    hint = Hint(target, dict(hints), fn, loc)

    def deco(obj):
        add = getattr(obj, "_add_schedule", None)
        if add is not None:
            add(hint)
        elif callable(obj):
            lst = list(getattr(obj, "__kdsl_schedules__", []))
            lst.append(hint)
            obj.__kdsl_schedules__ = lst
        else:
            raise ScheduleError("@kd.schedule decorates a kernel function", loc=loc)
        return obj
    return deco


# ---------------------------------------------------------------- application
def _err(hint: Hint, msg: str, what: str | None = None):
    return ScheduleError(msg, hint=what, loc=hint.loc)


def _resolve_axis(h, name: str, hint: Hint, outer: bool = True) -> n.IterVar:
    """A leaf axis by name; a split root axis resolves to its outer (or inner) part."""
    for a in h.leaf:
        if a.name == name:
            return a
    cur = name
    while True:
        nxt = cur + (".outer" if outer else ".inner")
        found = [a for a in h.leaf if a.name == nxt]
        if found:
            return found[0]
        if not any(getattr(r, "parent", None) is not None and r.parent.name == cur for r in h.relations):
            break
        cur = nxt
    raise _err(hint, f"stage {h.name} has no axis {name!r}; its axes are "
               f"{', '.join(a.name for a in h.leaf)}")


def _stage_of(sched, hint: Hint):
    name = hint.hints.get("stage")
    if name is None:
        return sched.outputs[0]
    try:
        return sched[name]
    except ScheduleError:
        raise _err(hint, f"schedule hint stage={name!r}: there is no such stage; stages: "
                   f"{', '.join(s.name for s in sched.stages)}") from None


def validate_hint(sched, hint: Hint):
    """Check every name a hint uses against the schedule; raise ScheduleError listing what exists."""
    h = _stage_of(sched, hint)
    hv = hint.hints
    names = {a.name for a in h.leaf}
    for key in ("tile",):
        if key in hv:
            if not isinstance(hv[key], dict):
                raise _err(hint, f"{key}= takes a dict axis -> factor", f"e.g. {key}={{'i0': 32}}")
            for ax, f in hv[key].items():
                if ax not in names:
                    raise _err(hint, f"tile names axis {ax!r}, but stage {h.name} has axes "
                               f"{', '.join(sorted(names))}")
                if isinstance(f, bool) or not isinstance(f, int) or f < 1:
                    raise _err(hint, f"tile factor for {ax} must be a positive int, got {f!r}")
    for key in ("parallel", "vectorize", "unroll"):
        v = hv.get(key)
        axes = [v] if isinstance(v, str) else list(v) if isinstance(v, (list, tuple)) else []
        for ax in axes:
            if ax not in names:
                raise _err(hint, f"{key} names axis {ax!r}, but stage {h.name} has axes "
                           f"{', '.join(sorted(names))}")
    if "cache" in hv:
        reads = {t.name for t in h.stage.reads()}
        if not isinstance(hv["cache"], dict):
            raise _err(hint, "cache= takes a dict input -> scope", "e.g. cache={'A': 'shared'}")
        for t, scope in hv["cache"].items():
            if t not in reads:
                raise _err(hint, f"cache names {t!r}, but stage {h.name} reads "
                           f"{', '.join(sorted(reads)) or 'no tensors'}")
            if scope not in ("shared", "local"):
                raise _err(hint, f"cache scope for {t} must be 'shared' or 'local', got {scope!r}")
    if "stages" in hv and (not isinstance(hv["stages"], int) or hv["stages"] < 1):
        raise _err(hint, f"stages= must be an int >= 1 (2 or more: multi-buffering), got {hv['stages']!r}")
    if "rfactor" in hv:
        f = hv["rfactor"]
        if isinstance(f, bool) or not isinstance(f, int) or f < 1:
            raise _err(hint, f"rfactor= takes the number of partial reductions (an int), got {f!r}")
        if not h.stage.is_reduction:
            raise _err(hint, f"rfactor: stage {h.name} is not a reduction")
    return h


def apply_hints(sched, hints) -> None:
    """Apply the generic hints of ``hints`` (a list of ``Hint``) to ``sched``, in order."""
    for hint in hints:
        if hint.fn is not None:
            continue
        h = validate_hint(sched, hint)
        hv = hint.hints
        try:
            _apply_one(sched, h, hv, hint)
        except ScheduleError as e:
            if e.loc is None or hint.loc is not None:
                raise ScheduleError(e.message, hint=e.hint, loc=hint.loc) from None
            raise
        hw = {k: hv[k] for k in HARDWARE if k in hv}
        if hw:
            sched.backend_hints.setdefault(h.name, {}).update(hw)


def _apply_one(sched, h, hv, hint):
    if "rfactor" in hv:
        red = [a for a in h.leaf if a.kind is n.IterKind.REDUCE]
        r = red[0] if len(red) == 1 else h.fuse(*red)
        _, ri = h.split(r, factor=hv["rfactor"])
        sched.rfactor(h, ri)
    if "tile" in hv:
        outers, inners = [], []
        for name, f in hv["tile"].items():
            o, i = h.split(_resolve_axis(h, name, hint), factor=f)
            outers.append(o)
            inners.append(i)
        rest = [a for a in h.leaf if a not in outers and a not in inners]
        h.reorder(*(sorted(outers, key=h.leaf.index) + rest + sorted(inners, key=h.leaf.index)))
    v = hv.get("vectorize")
    if isinstance(v, str):
        h.vectorize(_resolve_axis(h, v, hint, outer=False))
    elif isinstance(v, int) and not isinstance(v, bool) and v > 1:
        sp = [a for a in h.leaf if a.kind is n.IterKind.SPATIAL and h.attrs.get(a) is None]
        if not sp:
            raise _err(hint, f"vectorize: stage {h.name} has no free spatial axis to vectorize")
        _, vi = h.split(sp[-1], factor=v)
        h.reorder(*([a for a in h.leaf if a is not vi] + [vi]))
        h.vectorize(vi)
    p = hv.get("parallel")
    if p is True:
        h.parallel(h.leaf[0])
    elif isinstance(p, str):
        h.parallel(_resolve_axis(h, p, hint))
    u = hv.get("unroll")
    if isinstance(u, (str, list, tuple)):
        for name in ([u] if isinstance(u, str) else u):
            h.unroll(_resolve_axis(h, name, hint, outer=False))
    elif isinstance(u, int) and not isinstance(u, bool) and u > 1:
        inner = h.leaf[-1]
        _, ui = h.split(inner, factor=u)
        h.unroll(ui)
