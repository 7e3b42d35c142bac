"""A third-party backend written from docs/backends.md alone: the public contract only.

``ToyBackend`` keeps the contract without the ``BackendBase`` defaults: a ``BackendSpec`` and
the six methods.  It lowers through the core's sequential pass table and runs the loop IR
with the interpreter's public ``run_lowered``; its compiled kernels have the optional
fast-launch capability, a launcher in plain Python that follows its ``CallPlan`` literally
(checks every argument against the plan, declines anything else with ``NotImplemented``).
Counters say which path ran.
"""
from __future__ import annotations

import numpy as np

from kdsl.backends.interpreter import run_lowered
from kdsl.backends.spec import BackendSpec, FastLaunch, FastLauncher
from kdsl.dtypes import as_dtype
from kdsl.ir.evaluate import eval_expr
from kdsl.runtime.callplan import ScalarArg
from kdsl.schedule.hints import apply_hints


class ToyBackend:
    """Host arrays, the user's hints applied generically, the loop IR interpreted."""

    def __init__(self, name: str = "toy", **spec):
        self.spec = BackendSpec(name=name, device="host", version="toy-1", **spec)
        self.compiles = self.calls = self.fast_calls = 0
        self.plans = []
        self.requests = []

    def schedule(self, sched, hints) -> None:
        apply_hints(sched, hints)

    def lower(self, request):
        return request.lower()          # the core sequential table

    def compile(self, request):
        self.compiles += 1
        self.requests.append(request)
        return ToyCompiled(self.lower(request), self)

    def source(self, request) -> str:
        return str(self.lower(request))

    def accepts(self, array) -> bool:
        return isinstance(array, np.ndarray)

    def empty(self, shape, dtype, like=None):
        return np.empty(tuple(shape), as_dtype(dtype).np)


class ToyCompiled:
    """One specialisation: the lowered function, run by the interpreter."""

    def __init__(self, func, backend: ToyBackend):
        self.func, self.backend = func, backend
        self.fast = FastLaunch(self.fast_launcher)

    def __call__(self, inputs, outputs, scalars, stream=None) -> None:
        self.backend.calls += 1
        run_lowered(self.func, inputs, outputs, scalars)

    def fast_launcher(self, plan):
        self.backend.plans.append(plan)
        return FastLauncher(lambda *args: self._fast(plan, args))

    def _fast(self, plan, args):
        """The call of ``plan`` with ``args``, or NotImplemented where it does not match."""
        if len(args) != plan.nargs + (1 if plan.out_mode else 0):
            return NotImplemented
        for a in plan.args:
            if not (type(args[a.pos]) is a.pytype if isinstance(a, ScalarArg)
                    else _matches(args[a.pos], a)):
                return NotImplemented
        env = {}
        for var, src in plan.sources:
            env[var] = args[src[1]] if src[0] == "scalar" else args[src[1]].shape[src[2]]
        if any(args[p].shape[d] != eval_expr(e, env) for p, d, e in plan.checks):
            return NotImplemented
        if any(eval_expr(c.lhs, env) != eval_expr(c.rhs, env) for c in plan.constraints):
            return NotImplemented
        shapes = [tuple(int(eval_expr(e, env)) for e in o.shape) for o in plan.outputs]
        if plan.out_mode is None:
            if any(s < 0 for shape in shapes for s in shape):
                return NotImplemented
            outs = [np.empty(s, o.np) for o, s in zip(plan.outputs, shapes)]
        else:
            given = args[plan.nargs]
            outs = list(given) if plan.out_mode == "tuple" else [given]
            if not all(_matches(o, a) and o.flags.writeable and o.shape == s
                       for o, a, s in zip(outs, plan.out_args, shapes)):
                return NotImplemented
        self.backend.fast_calls += 1
        run_lowered(self.func, [args[p] for p in plan.inputs], outs,
                    [args[p] for p in plan.scalars])
        if plan.out_mode is not None:
            return args[plan.nargs]
        return outs[0] if len(outs) == 1 else tuple(outs)


def _matches(a, spec) -> bool:
    """``a`` is exactly what the plan's ArrayArg ``spec`` accepts."""
    return (type(a) is spec.kind and a.dtype is spec.dtype and a.ndim == len(spec.dims)
            and a.flags.c_contiguous == spec.contiguous
            and all((s != 1) if d is None else (s == d) for s, d in zip(a.shape, spec.dims)))


#: what the entry point ``toy = "toy_backend:backend"`` would name
backend = ToyBackend()
