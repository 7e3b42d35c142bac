"""When schedule primitives are checked: at the call, or when the schedule is finished.

A primitive's own argument checks (a wrong axis, a reduction bound to a
block index...) raise at the call: no later primitive can fix them.  Where
stages run relative to each other (``legality.Placement``) depends on the
whole schedule, and TVM accepts the primitives in any order that ends legal
(``AA.compute_at(CL, ko)`` before ``AL.compute_at(CL, ki)``, ``double_buffer()``
before ``compute_at``, ``compute_at`` before ``compute_inline``).  So after
each primitive that moves stages or loops the placements are checked, and a
failure is *remembered* (with the user's line) instead of raised; the next
call that makes the schedule legal again forgets it.  ``finish(sched)`` runs
when the schedule function returns (dispatch), when hints are realized and at
lowering: it checks the finished schedule and reports what is still wrong at
the line of the call that made it so, in the user's names.
"""
from __future__ import annotations

import functools
import inspect

from ..errors import ScheduleError, user_location


def primitive(check: bool = False, moves: bool = True):
    """Decorator of a schedule primitive (a method of StageSchedule or Schedule).

    A call with arguments that do not fit the signature is a ScheduleError at
    the user's line that shows the signature.  With ``check``, a ScheduleError
    raised by the primitive itself restores the schedule to what it was before
    the call, and placements are re-validated after the call
    (``legality.check``); a conflict is deferred to ``finish`` (module docstring).
    ``moves=False``: the primitive changes nothing a placement reads (``bind``: the loops,
    their order and the attachments stay), so a schedule legal before it (nothing pending:
    every primitive that can change placements is checked) is legal after it and the
    re-check (most of a default schedule's time) is skipped.
    """
    def deco(fn):
        sig = inspect.signature(fn)
        usage = f"{fn.__name__}({', '.join(str(p) for p in list(sig.parameters.values())[1:])})"

        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            try:
                sig.bind(self, *args, **kwargs)
            except TypeError as e:
                raise ScheduleError(f"{fn.__name__}: {e}".replace(f"{fn.__qualname__}() ", ""),
                                    hint=f"call it as {usage}") from None
            sched = getattr(self, "sched", self)
            # a primitive called by a primitive: the outer one checks; only compute_at creates
            # attachments: without any (and nothing remembered), nothing can conflict
            if (not check or sched._checking
                    or not (sched._n_attached or sched._pending or fn.__name__ == "compute_at")):
                return fn(self, *args, **kwargs)
            saved = _snapshot(sched)
            sched._checking = True
            try:
                out = fn(self, *args, **kwargs)
            except ScheduleError:
                _restore(sched, saved)
                raise
            finally:
                sched._checking = False
            if moves or sched._pending is not None:
                _recheck(sched, fn.__name__)
            return out
        return wrapper
    return deco


def _recheck(sched, call: str) -> None:
    """Check the placements after ``call``; remember the first call of a run of failures."""
    from .legality import check as _check
    try:
        if sched._n_attached:
            _check(sched, call)
    except ScheduleError as e:
        pend = sched._pending
        if pend is None or pend[2] != _text(e, pend[0]):
            sched._pending = (call, user_location(), _text(e, call))
        return
    sched._pending = None


def _text(e: ScheduleError, call: str) -> str:
    """The message of a placement error without its ``call: `` prefix (to compare two)."""
    msg = e.message
    return msg[len(call) + 2:] if msg.startswith(call + ": ") else msg


def finish(sched, where: str = "schedule") -> None:
    """Check the finished schedule ``sched`` (placements, pipelined stages, block sizes).

    A conflict is a ScheduleError at the line of the primitive after which the
    schedule became (and stayed) illegal, named by that call; one that no
    remembered call explains names ``where``.
    """
    from .legality import check as _check
    pend = sched._pending
    call, loc = (pend[0], pend[1]) if pend is not None else (where, None)
    try:
        placement = _check(sched, call) if sched._n_attached else None
    except ScheduleError as e:
        if loc is not None:
            e = ScheduleError(e.message, hint=e.hint, loc=loc)
        raise e from None
    sched._pending = None
    from .stage import _predicate_axes_enclose
    for h in sched.stages:
        if h.store_predicate is not None:
            if placement is None:
                from .legality import Placement
                placement = Placement(sched, where)
            _predicate_axes_enclose(h, placement)
    if any(h.buffer_stages > 1 for h in sched.stages):   # (pipelining.check_schedule's test)
        from .pipelining import check_schedule
        check_schedule(sched)
    from .limits import check_blocks
    check_blocks(sched)


_HANDLE_FIELDS = ("relations", "leaf", "attrs", "bind_locs", "attach", "attach_stage", "attach_axis", "attach_loc",
                  "store_predicate_loc",
                  "scope", "store_predicate", "buffer_stages", "pipeline_loc", "tensorized", "pad",
                  "loops_per_iteration")
_STAGE_FIELDS = ("axes", "reduce_axes", "body", "values")


def _snapshot(sched):
    hs = {h: tuple(_copy(getattr(h, f)) for f in _HANDLE_FIELDS) for h in sched._handles.values()}
    sts = {st: tuple(getattr(st, f) for f in _STAGE_FIELDS) for st in sched.graph.stages}
    return hs, sts, list(sched.graph.stages), dict(sched._handles), sched._n_attached, sched._pending


def _copy(x):
    return list(x) if type(x) is list else dict(x) if type(x) is dict else x


def _restore(sched, saved):
    hs, sts, stages, handles, n_attached, pending = saved
    for h, vals in hs.items():
        for f, v in zip(_HANDLE_FIELDS, vals):
            setattr(h, f, v)
    for st, vals in sts.items():
        for f, v in zip(_STAGE_FIELDS, vals):
            setattr(st, f, v)
    sched.graph.stages[:] = stages
    sched._handles.clear()
    sched._handles.update(handles)
    sched._n_attached = n_attached
    sched._pending = pending
