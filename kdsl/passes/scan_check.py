"""scan_legality: refuse schedules that would break a ``kd.scan``'s order (a schedule-level pass).

A scan stage (``Stage.scan``, kdsl.frontend.scan) reads its own earlier steps along its
scan axis ``t``; its loop nest is correct when ``t`` is one loop running in order and no
two iterations of a parallel loop exchange state within a step.

Assumes: ``state.sched`` (the user's or a backend's schedule, not yet lowered).
Guarantees (else a ``ScheduleError`` naming the stage and axis, with a hint):

- a scan stage is computed at its own loops (not inlined, not attached with compute_at:
  its buffer is its whole state);
- its scan axis is one leaf loop (never split or fused), SERIAL or UNROLLED: not parallel,
  vectorized or bound to a GPU block/thread index;
- when the update reads the state at other positions along the other axes (not
  ``ScanInfo.pointwise``), the scan loop is the outermost loop of the stage and no other
  loop of it is bound to a GPU index (its threads would need a grid-wide barrier per
  step; kdsl has none: write the steps as separate kernels).

Pointwise scans may have any other loop parallel or bound, inside or outside the scan loop:
each thread then runs the steps of its own positions in order.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import nodes as n
from ..schedule.records import AttachKind

_ORDERED = (n.ForKind.SERIAL, n.ForKind.UNROLLED)


def check_scans(state):
    """The ``scan_legality`` pass (see the module docstring); returns ``state`` unchanged."""
    for h in state.sched.stages:
        info = getattr(h.stage, "scan", None)
        if info is not None:
            _check(h, info)
    return state


def _check(h, info) -> None:
    st = h.stage
    t = st.axes[info.axis]
    if h.attach is AttachKind.INLINE:
        raise ScheduleError(f"stage {st.name} is a kd.scan: it cannot be inlined (its steps read "
                            "its own earlier steps)", hint=f"leave {st.name} at its own loops")
    if h.attach is AttachKind.AT:
        raise ScheduleError(f"stage {st.name} is a kd.scan: compute_at would keep only part of "
                            "its state", hint=f"leave {st.name} computed at the root")
    if t not in h.leaf:
        raise ScheduleError(f"stage {st.name}: its scan axis {t.name!r} must stay one loop "
                            "(split, fuse and tile would change the order of its steps)",
                            hint=f"split or fuse the other axes of {st.name}, not {t.name!r}")
    attr = h.attrs.get(t)
    if attr is not None and (attr.kind not in _ORDERED or attr.thread is not None):
        how = f"bound to {attr.thread.value}" if attr.thread is not None else attr.kind.value
        raise ScheduleError(f"stage {st.name}: its scan axis {t.name!r} is {how}, but each step "
                            "reads the previous one: it must be a sequential loop",
                            hint=f"bind or parallelise the other axes of {st.name}; {t.name!r} "
                            "runs in order inside each thread")
    if info.pointwise:
        return
    if h.leaf[0] is not t:
        raise ScheduleError(f"stage {st.name}: its update reads the state at other positions of "
                            f"the other axes, so its scan axis {t.name!r} must be the outermost loop",
                            hint=f"reorder {t.name!r} first")
    bound = [iv.name for iv in h.leaf if h.attrs.get(iv) is not None
             and h.attrs[iv].thread is not None]
    if bound:
        raise ScheduleError(f"stage {st.name}: its update reads the state at other positions of "
                            f"{', '.join(bound)}, which are bound to GPU indices: every step would "
                            "need a grid-wide barrier, which kdsl does not have",
                            hint="leave that scan unbound (one thread runs it), or make each step "
                            "its own kernel call")
