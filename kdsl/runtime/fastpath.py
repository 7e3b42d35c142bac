"""The monomorphic fast path of a kernel call (docs/design.md, principle 8).

A cached call normally builds a key from its arguments, looks the launcher
up and runs the generated Python launcher.  A backend may do better: given a
``FastPlan`` -- everything that launcher checks and computes, as data -- its
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
from collections import namedtuple

import numpy as np

#: calls of one specialisation (through the normal path) before its fast launcher is built:
#: building one costs a few ms (the cpu backend's), so kernels called once or twice skip it
PROMOTE_AFTER = 3


# named tuples, not dataclasses: `import kdsl` should not pay ~0.4 ms per class
class ArrayArg(namedtuple("ArrayArg", "pos dtype dims contiguous kind classes",
                          defaults=(np.ndarray, None))):
    """An array argument the fast launcher accepts: exactly ``kind`` (``numpy.ndarray`` unless
    the compiled kernel takes device arrays: ``compiled.fast.device_arrays``) with this dtype
    object (identity), rank, C-contiguity flag and per-dim sizes (``None``: any size but 1;
    an int: exactly that size); ``classes``: per dim the size's bit length, for size-classed
    backends (``Signature.size_classes``), else None."""

    __slots__ = ()

    @property
    def ndim(self) -> int:
        return len(self.dims)


class ScalarArg(namedtuple("ScalarArg", "pos pytype")):
    """A scalar argument: exactly ``pytype`` (``int``, ``float`` or ``bool``, never a subclass)."""

    __slots__ = ()


class FastPlan(namedtuple("FastPlan", "nargs args inputs scalars sources checks constraints "
                                      "outputs out_mode out_args")):
    """What the generated launcher of one specialisation does, as data.

    - ``nargs``: positional arguments of the call; ``args``: their checks (ArrayArg/ScalarArg).
    - ``inputs``: argument positions of the array parameters, in the compiled kernel's order;
      ``scalars``: argument positions of the scalar parameters, in the kernel's order.
    - ``sources``: ``(shape variable, ("shape", pos, dim) | ("scalar", pos))``, in the order
      the Python launcher binds them.
    - ``checks``: ``(pos, dim, expr)``: dim ``dim`` of argument ``pos`` must equal ``expr``.
    - ``constraints``: ``(lhs, rhs)`` expression pairs that must be equal (index checks
      are ``(condition, True)``; a failing one must make the fast launcher decline).
    - ``outputs``: ``(numpy dtype, shape expressions)`` per result.
    - ``out_mode``: None (outputs allocated; result: the array or a tuple), "one" or "tuple"
      (``out=`` given; ``out_args`` checks each out array; the result is ``out`` itself).
    """

    __slots__ = ()


def make_plan(graph, sig, args, param_pos, nargs, out_mode=None, out=None, device=False,
              binds=None):
    """The FastPlan of a specialisation, or None when its calls cannot be checked exactly.

    ``args``/``out`` are the arguments of the call that built the specialisation (their
    dtype objects are what later calls must carry); the shape bindings and checks are
    ``binds`` (kdsl.runtime.callplan.Bindings: the ones the Python launcher was written from;
    derived here when not given).  ``device``: arrays of other types than numpy's may be
    planned (the backend's launcher reads them: ``compiled.fast.device_arrays``).
    """
    if graph.data_checks:
        return None      # checks that need the data run in the Python launcher's path
    from .callplan import bindings
    b = binds if binds is not None else bindings(graph, param_pos)
    classes = sig.size_classes or (None,) * len(args)
    checked = []
    for _p, pos in b.scalars:
        t = type(args[pos])
        if t not in (int, float, bool):
            return None            # numpy scalars: the normal path converts them
        checked.append(ScalarArg(pos, t))
    for _p, pos in b.arrays:
        a, ps = args[pos], sig.params[pos]
        kind = getattr(ps, "kind", None)
        if type(a) is not kind or (kind is not np.ndarray and not device):
            return None
        checked.append(ArrayArg(pos, a.dtype, tuple(ps.shape), bool(ps.contiguous), kind,
                                classes[pos]))
    inputs = [pos for _p, pos in b.arrays]
    scalars = [pos for _p, pos in b.scalars]
    sources, checks = b.sources, b.checks
    outputs = tuple((np.dtype(t.dtype.np), tuple(t.shape)) for t in b.outputs)
    out_args = ()
    if out_mode is not None:
        outs = out if out_mode == "tuple" else (out,)
        if len(outs) != len(outputs) or any(
                type(o) is not np.ndarray and not device for o in outs):
            return None
        # out= keys carry each dim's size-1 flag (kdsl.runtime.signature.out_key)
        from .arrays import array_info
        infos = [array_info(o) for o in outs]
        if any(i is None for i in infos):
            return None
        out_args = tuple(ArrayArg(-1, o.dtype, tuple(1 if s == 1 else None for s in info[1]),
                                  bool(info[2]), type(o)) for o, info in zip(outs, infos))
    return FastPlan(nargs, tuple(checked), tuple(inputs), tuple(scalars), tuple(sources),
                    tuple(checks), tuple((c.lhs, c.rhs) for c in b.constraints), outputs,
                    out_mode, out_args)


class FastSlot:
    """The fast launcher of one specialisation, built on its ``PROMOTE_AFTER``-th call.

    ``get()`` counts a call and returns the fast launcher (what ``build`` returned: a
    kdsl.backends.spec.FastLauncher) or None.  Building is tried once;
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


def slot_for(compiled, graph, sig, args, param_pos, nargs, out_mode=None, out=None, binds=None):
    """A FastSlot for this specialisation, or None when the compiled kernel has no fast
    launchers (its ``fast`` capability, a kdsl.backends.spec.FastLaunch, is None) or no plan
    fits.  The slot's launcher is a ``FastLauncher``."""
    fast = compiled.fast
    if fast is None:
        return None
    plan = make_plan(graph, sig, args, param_pos, nargs, out_mode, out, fast.device_arrays, binds)
    if plan is None:
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
