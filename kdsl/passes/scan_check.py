"""scan_legality: refuse schedules that would break a ``kd.scan``'s order (a schedule-level pass).

A scan stage (``Stage.scan``, kdsl.frontend.scan) reads its own earlier steps along its
scan axis ``t``; its loop nest is correct when ``t`` is one loop running in order and no
two iterations of a parallel loop exchange state within a step.

Assumes: ``state.sched`` (the user's or a backend's schedule, not yet lowered).
Guarantees (else a ``ScheduleError`` naming the stage and axis, with a hint):

- a scan stage is computed at its own loops (not inlined, not attached with compute_at:
  its buffer is its whole state);
- its scan axis is one leaf loop (never fused, nor split except into one part), SERIAL or UNROLLED: not parallel,
  vectorized or bound to a GPU block/thread index; a segmented scan (``ScanInfo.segment``,
  kdsl.backends.scan_blocked) may be split by exactly its segment, the outer loop (over
  segments) then free;
- a tuple-state scan's member axis (``ScanInfo.members``) is a serial or unrolled loop
  inside the scan loop, never bound to a GPU index: each thread computes every member;
- when the update reads the state at other positions along the other axes (not
  ``ScanInfo.pointwise``), the scan loop is the outermost loop of the stage and no other
  loop of it is bound to a GPU index (its threads would need a grid-wide barrier per
  step; kdsl has none: write the steps as separate kernels).

The reductions in the update that read the state (``ScanInfo.steps``) are attached at the
scan loop here (``compute_at``, on the schedule being lowered) so they run once per step.

Pointwise scans may have any other loop parallel or bound, inside or outside the scan loop:
each thread then runs the steps of its own positions in order.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import nodes as n
from ..schedule.records import AttachKind
from ..schedule.scan_axis import scan_leaf as _scan_leaf
from .gates import scan_stages

_ORDERED = (n.ForKind.SERIAL, n.ForKind.UNROLLED)


def check_scans(state):
    """The ``scan_legality`` pass (see the module docstring); returns ``state``."""
    sched = state.sched
    for h, info in scan_stages(state):
        _check(h, info)
        _attach_steps(sched, h, info)
    return state


def _attach_steps(sched, h, info) -> None:
    """The scan's per-step reductions (``ScanInfo.steps``) run inside its scan loop: attached
    there (``compute_at``) unless a schedule attached them already; elsewhere is refused."""
    t, _ = _scan_leaf(h, h.stage.axes[info.axis])
    for name in info.steps:
        a = sched[name]
        if a.attach is AttachKind.AT and a.attach_stage is h and a.attach_axis is t:
            continue
        if a.attach is not AttachKind.ROOT or a.relations or a.attrs:
            raise ScheduleError(f"stage {name} reduces over earlier steps of the kd.scan "
                                f"{h.name}: it must be computed at {h.name}'s scan loop "
                                f"{t.name!r}, unscheduled",
                                hint=f"leave {name} to kdsl (it is attached at {t.name!r})")
        a.compute_at(h, t)


def _check(h, info) -> None:
    st = h.stage
    t = st.axes[info.axis]
    if h.attach is AttachKind.INLINE:
        raise ScheduleError(f"stage {st.name} is a kd.scan: it cannot be inlined (its steps read "
                            "its own earlier steps)", hint=f"leave {st.name} at its own loops")
    if h.attach is AttachKind.AT:
        raise ScheduleError(f"stage {st.name} is a kd.scan: compute_at would keep only part of "
                            "its state", hint=f"leave {st.name} computed at the root")
    t, units = _scan_leaf(h, t)
    if t is None or t not in h.leaf:
        raise ScheduleError(f"stage {st.name}: its scan axis {st.axes[info.axis].name!r} must "
                            "stay one loop (split, fuse and tile would change the order of its "
                            "steps; only a split into 1 part is allowed)",
                            hint=f"split or fuse the other axes of {st.name}, not "
                            f"{st.axes[info.axis].name!r}")
    if info.members is not None:
        _check_members(h, st, t, info)
    attr = h.attrs.get(t)
    if attr is not None and (attr.kind not in _ORDERED or attr.thread is not None):
        how = f"bound to {attr.thread.value}" if attr.thread is not None else attr.kind.value
        raise ScheduleError(f"stage {st.name}: its scan axis {t.name!r} is {how}, but each step "
                            "reads the previous one: it must be a sequential loop",
                            hint=f"bind or parallelise the other axes of {st.name}; {t.name!r} "
                            "runs in order inside each thread")
    if info.pointwise:
        return
    if [iv for iv in h.leaf if iv not in units][0] is not t:
        raise ScheduleError(f"stage {st.name}: its update reads the state at other positions of "
                            f"the other axes, so its scan axis {t.name!r} must be the outermost loop",
                            hint=f"reorder {t.name!r} first")
    bound = [iv.name for iv in h.leaf if h.attrs.get(iv) is not None
             and h.attrs[iv].thread is not None and iv not in units]
    if bound:
        raise ScheduleError(f"stage {st.name}: its update reads the state at other positions of "
                            f"{', '.join(bound)}, which are bound to GPU indices: every step would "
                            "need a grid-wide barrier, which kdsl does not have",
                            hint="leave that scan unbound (one thread runs it), or make each step "
                            "its own kernel call")


def _check_members(h, st, t, info) -> None:
    """A tuple state's member axis: one serial (or unrolled) loop inside the scan loop."""
    mem = st.axes[info.members]
    attr = h.attrs.get(mem)
    if mem not in h.leaf or h.leaf.index(mem) < h.leaf.index(t) or (
            attr is not None and (attr.kind not in _ORDERED or attr.thread is not None)):
        raise ScheduleError(f"stage {st.name}: its member axis {mem.name!r} (one element per "
                            "member of its tuple state) must stay one sequential loop inside "
                            f"the scan loop {t.name!r}: each step reads every member of the "
                            "earlier ones",
                            hint=f"leave {mem.name!r} unscheduled (kdsl puts it innermost)")
