"""placement: where each stage of the schedule runs (the first lowering pass).

Assumes: a Schedule whose primitives were validated (``kdsl.schedule.checking``:
a placement conflict left by a primitive is reported here, at that primitive's
line, when dispatch did not ``finish`` the schedule already).
Guarantees: ``state.placement`` is the schedule's ``Placement``: the root
order, ``kind`` (producer/consumer) of every attached stage, the attached
consumers also read outside their loop (``full_buffer``) and each stage's
``readers``.  Building it checks the placements again and raises a
ScheduleError naming the calls involved if a schedule got past them.
"""
from __future__ import annotations

import dataclasses

from ..schedule.legality import Placement
from .state import LowerState


def _single_iteration_pipelines(sched) -> None:
    """A stage pipelined over a loop of one iteration (a K of one tile) has nothing to overlap:
    it keeps one buffer (TVM accepts ``double_buffer`` there; the loop itself disappears)."""
    from ..ir import nodes as n
    from ..schedule.records import AttachKind
    from ..schedule.schedule import leaf_values
    for h in sched.stages:
        if h.buffer_stages > 1 and h.attach is AttachKind.AT:
            ext = leaf_values(h.attach_stage)[1].get(h.attach_axis)
            if type(ext) is n.Const and ext.value <= 1:
                h.buffer_stages = 1


def place_stages(state: LowerState) -> LowerState:
    """The schedule's Placement, checked (see the module docstring)."""
    _single_iteration_pipelines(state.sched)
    if getattr(state.sched, "_pending", None) is not None:   # a schedule lowered without dispatch
        from ..schedule.checking import finish
        finish(state.sched, "lowering")
    return dataclasses.replace(state, placement=Placement(state.sched, "lowering"))
