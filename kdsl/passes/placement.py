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


def place_stages(state: LowerState) -> LowerState:
    """The schedule's Placement, checked (see the module docstring)."""
    if getattr(state.sched, "_pending", None) is not None:   # a schedule lowered without dispatch
        from ..schedule.checking import finish
        finish(state.sched, "lowering")
    return dataclasses.replace(state, placement=Placement(state.sched, "lowering"))
