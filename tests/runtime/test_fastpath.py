"""The kernel call's fast path (kdsl.runtime.fastpath), backend-independent: plans, lazy
promotion, declines falling back to the normal path with its errors, the backend choice.

``PlanBackend`` gives its compiled kernels a fast launcher (``fast``) written in Python that follows
the CallPlan literally; it is the executable statement of what a plan means."""
import threading

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends import registry
from kdsl.backends.numpy_backend import NumpyBackend
from kdsl.backends.spec import BackendSpec, FastLaunch, FastLauncher
from kdsl.errors import ShapeError
from kdsl.runtime import callplan, dispatch, fastpath

from fakes import g_add, g_matvec, g_scale, g_two
from test_dispatch import make


class _Compiled:
    def __init__(self, inner, backend):
        self.inner, self.backend = inner, backend
        self.fast = FastLaunch(self.fast_launcher)

    def __call__(self, inputs, outputs, scalars, stream=None):
        self.inner(inputs, outputs, scalars)

    def fast_launcher(self, plan):
        self.backend.plans.append(plan)
        if self.backend.fail_build:
            raise RuntimeError("no fast launcher today")
        return FastLauncher(lambda *args: self.backend.run_plan(self.inner, plan, args))


class PlanBackend(NumpyBackend):
    """numpy semantics, plus fast launchers that interpret their plan."""

    spec = BackendSpec(name="plan")

    def __init__(self):
        self.plans, self.fast_calls, self.fail_build = [], 0, False

    def compile(self, request):
        return _Compiled(super().compile(request), self)

    def run_plan(self, inner, plan, args):
        if len(args) != plan.nargs + (1 if plan.out_mode else 0):
            return NotImplemented
        env = {}
        for spec in plan.args:
            a = args[spec.pos]
            if isinstance(spec, callplan.ScalarArg):
                if type(a) is not spec.pytype:
                    return NotImplemented
                continue
            if not _matches(a, spec):
                return NotImplemented
        names = {}
        for var, src in plan.sources:
            names[var] = f"x{len(names)}"
            env[names[var]] = args[src[1]] if src[0] == "scalar" else args[src[1]].shape[src[2]]
        value = lambda e: eval(dispatch.py_expr(e, names), dict(env, _fdiv=dispatch._fdiv,
                                                                   _fmod=dispatch._fmod))
        if any(args[p].shape[d] != value(e) for p, d, e in plan.checks):
            return NotImplemented
        if any(value(c.lhs) != value(c.rhs) for c in plan.constraints):
            return NotImplemented
        shapes = [tuple(value(e) for e in o.shape) for o in plan.outputs]
        if plan.out_mode is None:
            if any(s < 0 for shape in shapes for s in shape):
                return NotImplemented
            outs = [np.empty(s, o.np) for o, s in zip(plan.outputs, shapes)]
        else:
            given = args[plan.nargs]
            outs = list(given) if plan.out_mode == "tuple" else [given]
            if not all(_matches(o, spec) and o.flags.writeable and o.shape == s
                       for o, spec, s in zip(outs, plan.out_args, shapes)):
                return NotImplemented
        self.fast_calls += 1
        inner([args[p] for p in plan.inputs], outs, [args[p] for p in plan.scalars])
        if plan.out_mode is not None:
            return args[plan.nargs]
        return outs[0] if len(outs) == 1 else tuple(outs)


def _matches(a, spec):
    return (type(a) is np.ndarray and a.dtype is spec.dtype and a.ndim == len(spec.dims)
            and bool(a.flags.c_contiguous) == spec.contiguous
            and all(s != 1 if w is None else s == w for s, w in zip(a.shape, spec.dims)))


@pytest.fixture
def plan():
    b = PlanBackend()
    registry.register_backend("plan", b)
    yield b
    registry.unregister_backend("plan")


def test_promoted_after_some_calls_then_taken(plan):
    k = make(g_add)
    a, b = np.arange(6.0), np.ones(6)
    for i in range(fastpath.PROMOTE_AFTER):
        assert k._fast is None
        np.testing.assert_array_equal(k(a, b, backend="plan"), a + b)
    assert k._fast is not None and len(plan.plans) == 1
    for _ in range(5):
        np.testing.assert_array_equal(k(a, b, backend="plan"), a + b)
    assert plan.fast_calls == 5
    p = plan.plans[0]
    assert p.nargs == 2 and p.inputs == (0, 1) and p.out_mode is None
    assert [s.dims for s in p.args] == [(None,), (None,)]


def test_declines_fall_back_with_the_same_errors(plan):
    k = make(g_matvec)
    M, x = np.ones((3, 4)), np.ones(4)
    bad = lambda: k(M, np.ones(5), backend="plan")   # noqa: E731  (one call site for both)
    with pytest.raises(ShapeError) as before:
        bad()
    for _ in range(fastpath.PROMOTE_AFTER + 1):
        k(M, x, backend="plan")
    assert plan.plans[0].constraints and k._fast is not None
    calls = plan.fast_calls
    with pytest.raises(ShapeError) as after:
        bad()                                   # the constraint fails: declined, then raised
    assert str(after.value) == str(before.value) and plan.fast_calls == calls
    np.testing.assert_array_equal(k(M.astype(np.float32), x.astype(np.float32), backend="plan"),
                                  np.full(3, 4.0, np.float32))      # another dtype: normal path
    assert plan.fast_calls == calls


def test_scalars_out_and_several_outputs(plan):
    s = make(g_scale)
    a = np.arange(5.0)
    for _ in range(fastpath.PROMOTE_AFTER + 2):
        np.testing.assert_array_equal(s(a, 2.0, backend="plan"), a * 2)
    assert plan.fast_calls == 2 and plan.plans[-1].scalars == (1,)
    np.testing.assert_array_equal(s(a, np.float64(3.0), backend="plan"), a * 3)  # numpy scalar
    assert plan.fast_calls == 2
    two = make(g_two)
    p, q = np.empty(5), np.empty(5)
    for _ in range(fastpath.PROMOTE_AFTER + 1):
        r = two(a, out=(p, q), backend="plan")
    assert r[0] is p and two._fast_out is not None and two._fast is None
    assert plan.plans[-1].out_mode == "tuple"
    for _ in range(fastpath.PROMOTE_AFTER + 1):
        r1, r2 = two(a, backend="plan")
    np.testing.assert_array_equal(r2, a * 2)
    assert two._fast is not None


def test_failed_build_keeps_the_normal_path(plan):
    plan.fail_build = True
    k = make(g_add)
    a = np.arange(4.0)
    for _ in range(5):
        np.testing.assert_array_equal(k(a, a, backend="plan"), a + a)
    assert k._fast is None and len(plan.plans) == 1          # tried once
    (launch,) = k._cache.values()
    assert isinstance(k._slots[launch].error, RuntimeError)


def test_no_fast_path_without_support(plan, counting):
    k = make(g_add)
    a = np.arange(4.0)
    for _ in range(4):
        k(a, a, backend="counting")          # its compiled kernels' fast is None
    assert k._fast is None
    c = make(g_scale, constants=("s",))
    for _ in range(4):
        c(a, 2.0, backend="plan")            # constants are part of the key: normal path
    assert c._fast is None and not plan.plans


def test_backend_choice_and_registry_generation(plan, monkeypatch):
    k = make(g_add)
    a = np.arange(4.0)
    with kd.use_backend("plan"):
        for _ in range(fastpath.PROMOTE_AFTER + 1):
            k(a, a)
        calls = plan.fast_calls
        k(a, a)
        assert plan.fast_calls == calls + 1
    k(a, a, backend="plan")
    assert plan.fast_calls == calls + 2
    k(a, a)                                   # the automatic default is another backend
    k(a, a, backend="numpy")
    monkeypatch.setenv("KDSL_BACKEND", "plan")
    k(a, a)                                   # set in the environment: the normal path decides
    assert plan.fast_calls == calls + 2
    monkeypatch.delenv("KDSL_BACKEND")
    registry.register_backend("plan", plan)   # a name may now mean another object
    k(a, a, backend="plan")
    assert plan.fast_calls == calls + 2


def test_slot_builds_once_under_contention():
    built = []
    gate = threading.Barrier(8)

    def build():
        built.append(1)
        return len

    slot = fastpath.FastSlot(build)
    for _ in range(fastpath.PROMOTE_AFTER - 1):
        assert slot.get() is None             # counted, nothing built yet
    got = []

    def work():
        gate.wait()
        got.append(slot.get())
    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert built == [1] and got == [len] * 8
