"""The monomorphic fast path of a kernel call (docs/design.md, principle 8).

A cached call normally builds a key from its arguments, looks the launcher
up and runs the generated Python launcher.  A backend may do better: given the
``kdsl.runtime.callplan.CallPlan`` -- everything that launcher checks and computes, as data,
with ``plan.args`` the exact argument checks -- its
compiled kernel's optional fast-launch capability (``compiled.fast.build(plan)``,
kdsl.backends.spec.FastLaunch) returns a ``FastLauncher`` whose ``call(*args)``
(``call(*args, out)`` when ``plan.out_mode`` is set) checks the
arguments *exactly* against the specialisation the plan was made for and
either returns the call's result or ``NotImplemented``.  ``NotImplemented``
means "not mine": the kernel then takes the normal path, which keeps every
error message, so a fast launcher declines anything unusual (another dtype
object, a failed shape check, an odd scalar, a kernel status) rather than
reporting it.

The kernel remembers the fast launcher of the specialisation it ran last and
tries it first (``Kernel.__call__``).  A fast launcher is built lazily, on the
``PROMOTE_AFTER``-th call of its specialisation, so kernels called once pay
nothing for it.
"""
from __future__ import annotations

import threading

#: calls of one specialisation (through the normal path) before its fast launcher is built:
#: building one costs a few ms (the cpu backend's), so kernels called once or twice skip it
PROMOTE_AFTER = 3


class FastSlot:
    """The fast launcher of one specialisation, built on its ``PROMOTE_AFTER``-th call.

    ``get()`` counts a call and returns the fast launcher or None.  Building is tried once;
    a backend that cannot (or fails to) build one leaves ``fn`` None and ``error`` set.
    """

    __slots__ = ("_build", "fn", "calls", "error", "_lock")

    def __init__(self, build):
        self._build = build
        self.fn = None
        self.calls = 0
        self.error = None
        self._lock = threading.Lock()

    def get(self):
        fn = self.fn
        if fn is not None or self._build is None:
            return fn
        self.calls += 1
        if self.calls < PROMOTE_AFTER:
            return None
        with self._lock:
            build, self._build = self._build, None
            if build is not None:
                try:
                    self.fn = build()
                except Exception as e:  # a fast path must never break a call: keep the normal one
                    self.error = e
        return self.fn


def slot_for(compiled, plan):
    """A FastSlot for this specialisation's ``callplan.CallPlan``, or None when the compiled
    kernel has no fast launchers (its ``fast``, a kdsl.backends.spec.FastLaunch, is None) or
    the plan's calls cannot be checked exactly (``plan.args`` None).  The slot's launcher is a
    ``FastLauncher``."""
    fast = compiled.fast
    if fast is None or plan.args is None:
        return None
    make = fast.build

    def build():
        from ..backends.spec import FastLauncher
        got = make(plan)
        if got is not None and not isinstance(got, FastLauncher):   # kept as the slot's error
            raise TypeError(f"FastLaunch.build returned a {type(got).__name__}, not a "
                            "kdsl.backends.spec.FastLauncher or None")
        return got
    return FastSlot(build)
