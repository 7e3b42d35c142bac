"""What ``double_buffer()`` / ``pipeline(stages)`` accept (checked at the call and at lowering).

A stage qualifies when it is a plain copy of global memory into shared memory (what
``cache_read(A, "shared")`` makes: ``A.shared[ax...] = A[ax...]`` with ``A`` a kernel
input or a stage stored in global memory at the root) attached with ``compute_at`` to a
serial loop (e.g. the K-tile loop ``ko``): the ``software_pipeline`` lowering pass then
copies tile ko+stages-1 while tile ko is computed, through a ring of ``stages`` buffers.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import nodes as n
from .records import AttachKind, where

QUALIFIES = ("a stage can be pipelined when it copies global memory into shared memory "
             "(s.cache_read(A, \"shared\", [C])), attached with compute_at to a serial loop "
             "of its reader (e.g. the K-tile loop ko), with stages >= 2")


def _err(h, what: str, loc=None) -> ScheduleError:
    if loc is not None:     # re-checked at lowering
        what += (" (checked on the finished schedule: the stage as the primitives after the "
                 "pipeline / double_buffer call left it)")
    return ScheduleError(f"pipeline: stage {h.name} {what}", hint=QUALIFIES, loc=loc)


def check_stages(stages) -> None:
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 2:
        raise ScheduleError(f"pipeline needs stages >= 2 (an int), got {stages!r}", hint=QUALIFIES)


def check_pipelinable(h, loc=None, placed: bool = True) -> None:
    """ScheduleError unless stage handle ``h`` qualifies for ``pipeline`` (see the module).
    ``loc``: the user's pipeline line (None: the current user frame).  ``placed=False``
    (at the call, before ``compute_at``): where it is attached is checked later, when the
    schedule is finished (``check_schedule``)."""
    st = h.stage
    body = st.body
    copy = (isinstance(body, n.TensorRead) and not st.reduce_axes
            and len(body.indices) == len(st.axes)
            and all(i is a.var for i, a in zip(body.indices, st.axes)))
    if not copy:
        raise _err(h, "is not a copy of another tensor (its body computes values)", loc)
    src = body.tensor
    if not src.is_input:
        ps = h.sched[src.stage.name] if src.stage in h.sched._handles else None
        if ps is None or ps.attach is not AttachKind.ROOT or ps.scope not in (None, n.Scope.GLOBAL):
            raise _err(h, f"copies {src.name}, which is not in global memory (only a copy "
                          "from global memory can be asynchronous)", loc)
    if h.scope is not n.Scope.SHARED:
        scope = (h.scope or n.Scope.GLOBAL).value
        raise _err(h, f"is stored in {scope} memory, not shared memory", loc)
    if h.attach is not AttachKind.AT and not placed:
        return
    if h.attach is not AttachKind.AT:
        raise _err(h, "is computed at the root; it must be attached with compute_at inside the "
                      "serial loop it is pipelined over", loc)
    ax = h.attach_axis
    attr = h.attach_stage.attrs.get(ax)
    if attr is not None and attr.kind not in (n.ForKind.SERIAL, n.ForKind.UNROLLED):
        kind = attr.kind.value + (f" to {attr.thread.value}" if attr.thread else "")
        raise _err(h, f"is attached at loop {ax.name} of {h.attach_stage.name}{where(h.attach_loc)}, "
                      f"which is {kind}; the loop must be serial", loc)


def check_schedule(sched) -> None:
    """Re-check every pipelined stage of ``sched`` (a later primitive may have broken it);
    the error names the user's pipeline call."""
    for h in sched.stages:
        if h.buffer_stages > 1:
            check_pipelinable(h, loc=getattr(h, "pipeline_loc", None))


__all__ = ["QUALIFIES", "check_stages", "check_pipelinable", "check_schedule"]
