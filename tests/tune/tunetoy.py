"""A backend whose candidates behave as the tuning tests need (and say which one ran).

``TuneToy`` runs kernels on the loop-IR interpreter (the core's sequential table, the user's
hints applied generically) and reads the ``unroll`` hint of the schedule it compiles as a
switch: ``unroll=3`` computes a wrong answer (one added to the first output) with no delay,
``unroll=5`` fails to compile, ``unroll=2`` runs without delay, ``unroll=4`` warns (a
ScheduleWarning) when it compiles; every other schedule (the
default included) sleeps ``SLOW_S`` a call.  So the fastest candidate that is also correct is
``unroll=2``, deterministically.  ``ran`` lists the unroll value of each compiled kernel run.
"""
from __future__ import annotations

import time
import warnings

from kdsl.backends.base import BackendBase
from kdsl.backends.interpreter import run_lowered
from kdsl.backends.spec import BackendSpec
from kdsl.errors import BackendCompileError, ScheduleWarning
from kdsl.schedule.hints import apply_hints

SLOW_S = 0.002
SPACE = [{"unroll": 3}, {"unroll": 5}, {"unroll": 2}, {"unroll": 4}]


class TuneToy(BackendBase):
    """See the module docstring."""

    def __init__(self, name="tunetoy"):
        self.spec = BackendSpec(name=name, device="host", version="tt-1",
                                tuning_space=lambda sched, hints: SPACE,
                                device_model=lambda: "toy device 1")
        self.ran = []

    def schedule(self, sched, hints) -> None:
        apply_hints(sched, hints)
        sched.tunetoy_unroll = next((h.hints["unroll"] for h in reversed(hints)
                                     if "unroll" in h.hints), None)

    def compile(self, request):
        u = request.schedule.tunetoy_unroll
        if u == 5:
            raise BackendCompileError("tunetoy: unroll=5 does not compile")
        if u == 4:
            warnings.warn("tunetoy: unroll=4 warns", ScheduleWarning)
        func = self.lower(request)
        backend = self

        def run(inputs, outputs, scalars, stream=None):
            backend.ran.append(u)
            run_lowered(func, inputs, outputs, scalars)
            if u == 3:
                outputs[0][...] += 1
            elif u != 2:
                time.sleep(SLOW_S)
        run.fast = None
        return run


def rowdot(A, B):
    """The kernel function the tests tune (here, so that a fresh process imports it too)."""
    return (A * B).sum(axis=1) + 1.0
