"""The monomorphic fast path of a kernel call (docs/design.md, principle 8).

A compiled kernel may offer fast launchers (``compiled.fast``, a kdsl.backends.spec.FastLaunch):
``build(plan)`` turns one specialisation's ``kdsl.runtime.callplan.CallPlan`` into a
``FastLauncher`` that checks the arguments exactly against the plan and returns the result or
``NotImplemented`` ("not mine": the kernel takes its normal path, which reports errors).  The
kernel tries the launcher of the specialisation it ran last first (``Kernel._call``); it is
built on that specialisation's ``PROMOTE_AFTER``-th call.
"""
from __future__ import annotations

import threading

from .outputs import overlaps

#: calls of one specialisation (through the normal path) before its fast launcher is built:
#: building one costs a few ms (the cpu backend's), so kernels called once or twice skip it
PROMOTE_AFTER = 3


class FastSlot:
    """The fast launcher of one specialisation: ``get()`` counts a call and returns what
    ``build()`` gave from the ``PROMOTE_AFTER``-th call on.  Building is tried once; a failure
    leaves ``fn`` None and ``error`` set."""

    __slots__ = ("_build", "fn", "calls", "error", "_lock")

    def __init__(self, build):
        self._build, self.fn, self.calls, self.error = build, None, 0, None
        self._lock = threading.Lock()

    def get(self):
        if self._build is None:
            return self.fn
        self.calls += 1
        if self.calls >= PROMOTE_AFTER:
            with self._lock:
                build, self._build = self._build, None
                if build is not None:
                    try:
                        self.fn = build()
                    except Exception as e:  # a fast path must never break a call
                        self.error = e
        return self.fn


def slot_for(compiled, plan):
    """A FastSlot giving the ``FastLauncher`` of ``plan`` with its ``packed`` set, or None when
    the compiled kernel has none (``compiled.fast`` None) or the plan's calls cannot be checked
    exactly (``plan.args`` None)."""
    fast = compiled.fast
    if fast is None or plan.args is None:
        return None
    return FastSlot(lambda: _packed(fast.build(plan)))


def _packed(got):
    """``got`` with ``packed`` set: a launcher offering only ``call`` is called with the kernel's
    ``(args, out)``, a host one declining an out= that shares memory with an argument (numpy's
    rule: the normal path computes into fresh arrays)."""
    from ..backends.spec import FastLauncher
    if not isinstance(got, FastLauncher):
        if got is None:
            return None
        raise TypeError(f"FastLaunch.build returned a {type(got).__name__}, not a "
                        "kdsl.backends.spec.FastLauncher or None")   # (kept as the slot's error)
    call, dev = got.call, got.device_arrays
    if got.packed is not None:
        return got

    def packed(args, out):
        if out is None:
            return call(*args)
        return NotImplemented if not dev and overlaps(out, args) else call(*args, out)
    return got._replace(packed=packed)
