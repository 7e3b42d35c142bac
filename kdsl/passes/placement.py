"""placement: where each stage of the schedule runs (the first lowering pass).

Assumes: a Schedule whose primitives were validated at call time
(``kdsl.schedule.legality`` checked each placement when it was made).
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
    return dataclasses.replace(state, placement=Placement(state.sched, "lowering"))
