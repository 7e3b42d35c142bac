"""kdsl.runtime.callplan: one CallPlan per signature (key, shape sources, checks, constraints,
outputs, typed scalar slots), from which every launcher is emitted (issue 26 item 1)."""
import numpy as np
import pytest

import kdsl as kd
from kdsl import dtypes as dt
from kdsl.errors import ArgumentError, InternalCompilerError, ShapeError
from kdsl.ir import nodes as n
from kdsl.runtime import callplan, fastpath
from kdsl.runtime.slots import LaunchInfo


@pytest.fixture(autouse=True)
def _fake_parts():
    """The real frontend here (overrides tests/runtime/conftest.py's fakes)."""
    yield


def _scaled_mm():
    @kd.kernel
    def scaled_mm(A, s, B):
        return (A @ B) * s
    return scaled_mm


def _plan(k):
    (launch,) = k._cache.values()
    return launch.__kdsl_plan__


def test_the_plan_binds_each_name_once_and_checks_the_rest(rng):
    k = _scaled_mm()
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    k(a, 2.0, b, backend="numpy")
    plan = _plan(k)
    assert plan.inputs == (0, 2) and plan.scalars == (1,) and plan.scalar_dtypes == (dt.float64,)
    assert [src for _, src in plan.sources] == [("scalar", 1), ("shape", 0, 0), ("shape", 0, 1),
                                                ("shape", 2, 0), ("shape", 2, 1)]
    # B's first dim has a name of its own: A's second must equal it (a graph constraint)
    assert plan.checks == () and len(plan.constraints) == 1
    (o,) = plan.outputs
    assert o.dtype is dt.float64 and o.np == np.float64 and len(o.shape) == 2
    assert plan.key in k._cache and plan.out_mode is None and plan.nargs == 3
    assert [type(x).__name__ for x in plan.args] == ["ScalarArg", "ArrayArg", "ArrayArg"]


def test_scalar_slots_are_resolved_once_and_typed():
    f32 = dt.float32
    info = LaunchInfo.from_json({
        "name": "k", "inputs": [["A", "float32"]], "outputs": [["C", "float64"]],
        "scalars": [["n", "int64"], ["s", "int64"], ["x", "bfloat16"]],
        "bindings": [["shape", 1, 0], ["stride", 0, 1], ["scalar", 0, None]]})
    shape, stride, scalar = callplan.scalar_slots(info)
    assert (shape.kind, shape.index, shape.dim, shape.code) == ("shape", 1, 0, "q")
    assert (stride.kind, stride.itemsize, stride.buffer) == ("stride", f32.itemsize, "A")
    assert (scalar.kind, scalar.index, scalar.dtype, scalar.code) == ("scalar", 0, dt.bfloat16,
                                                                      "H6x")
    short = info._replace(bindings=info.bindings[:2])
    with pytest.raises(InternalCompilerError, match="3 scalars but 2 bindings"):
        callplan.scalar_slots(short)
    odd = info._replace(scalars=info.scalars[:2] + (info.scalars[2]._replace(dtype=dt.float16),),
                        bindings=info.bindings[:2] + (n.Binding(n.BindingKind.SCALAR, 0),))
    assert callplan.scalar_slots(odd)[2].code == "e6x"


def test_slots_come_from_the_fast_launch_func(rng):
    """A plan's slots are those of ``compiled.fast.func`` (a typed FastLaunch field): the cpu
    backend's LaunchInfo gives them; a compiled object without a fast launcher (interp), none.
    The SIMT/interpreter decoders read the same ``ir.bindings.scalar_slots``."""
    from kdsl.ir import bindings
    assert callplan.scalar_slots is bindings.scalar_slots and callplan.Slot is bindings.Slot
    k = _scaled_mm()
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    np.testing.assert_allclose(k(a, 2.0, b, backend="interp"), (a @ b) * 2.0)
    assert _plan(k).slots is None
    k = _scaled_mm()
    np.testing.assert_allclose(k(a[:, ::-1], 2.0, b, backend="cpu"), (a[:, ::-1] @ b) * 2.0)
    plan = _plan(k)
    kinds = {sl.kind for sl in plan.slots}
    assert {"shape", "stride", "scalar"} <= kinds
    assert [sl.code for sl in plan.slots if sl.kind == "scalar"] == ["d"]


def test_one_key_for_the_hot_path_and_the_miss(rng):
    """A positional call (hot key) and a keyword call (bound, then the miss path's key) land
    on one cache entry; so do constants, None and specialize=True keys."""
    @kd.kernel(constants=("c",))
    def f(a, c, s=None):
        return a * c if s is None else a * c + s
    a = rng.standard_normal((4, 1))
    for call in (lambda: f(a, 2, backend="numpy"), lambda: f(a, c=2, backend="numpy"),
                 lambda: f(a, 2, None, backend="numpy")):
        np.testing.assert_allclose(call(), a * 2)
    assert len(f._cache) == 1
    np.testing.assert_allclose(f(a, 3, 1.5, backend="numpy"), a * 3 + 1.5)
    assert len(f._cache) == 2
    with pytest.raises(ArgumentError, match="must be hashable"):
        f(a, [2], backend="numpy")
    with pytest.raises(ArgumentError, match="must be an array or a Python scalar"):
        f(object(), 2, backend="numpy")
    key = callplan.key_function(3, (False, True, False), True)((a, 2, None), "numpy", 0, None,
                                                               False, None)
    assert key[2] == (a.dtype, (4, 1), True) and key[3] == ("const", int, 2)


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu"])
def test_the_launchers_emitted_from_one_plan_agree(backend, rng):
    if backend == "cpu":
        pytest.importorskip("kdsl_cpu")
    k = _scaled_mm()
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    for _ in range(fastpath.PROMOTE_AFTER + 1):     # the Python launcher, then the fast one
        np.testing.assert_allclose(k(a, 2.0, b, backend=backend), (a @ b) * 2.0)
    v = rng.standard_normal((4, 10))[:, ::2]        # strided: a stride slot
    np.testing.assert_allclose(k(a, 0.5, v, backend=backend), (a @ v) * 0.5)
    out = np.empty((3, 5))
    for _ in range(fastpath.PROMOTE_AFTER + 1):
        assert k(a, 2.0, b, out=out, backend=backend) is out
        np.testing.assert_allclose(out, (a @ b) * 2.0)
    if backend == "cpu":        # native fast launchers, from the same plans
        assert k._fast is not None and k._fast_out is not None
    a0, b0 = np.ones((0, 4)), np.ones((4, 1))
    np.testing.assert_allclose(k(a0, 2.0, b0, backend=backend), np.zeros((0, 1)))
    with pytest.raises(ShapeError) as e:
        k(a, 2.0, rng.standard_normal((3, 5)), backend=backend)
    del e       # its traceback holds the frames (and arrays) of the failed call
    with pytest.raises(ArgumentError, match="out= array 0 has shape"):
        k(a, 2.0, b, out=np.empty((3, 4)), backend=backend)


def test_cpu_packed_launcher_declines_out_that_shares_memory(rng):
    """The cpu fast launcher takes (args, out) and checks out= overlaps natively; an out= that
    meets an input (wholly, partly, through a reversed view) is computed as numpy would."""
    pytest.importorskip("kdsl_cpu")

    @kd.kernel
    def rev_add(a, b):
        return a + b[::-1]
    n = 9
    a, b, out = (rng.standard_normal(n) for _ in range(3))
    for _ in range(fastpath.PROMOTE_AFTER + 1):
        assert rev_add(a, b, out=out, backend="cpu") is out
    packed = rev_add._fast_out[2]     # the machine code itself, called with (args, out)
    assert type(packed).__name__ == "builtin_function_or_method", packed
    np.testing.assert_allclose(out, a + b[::-1])
    buf = rng.standard_normal(2 * n)
    for o, x, y in [(b, a, b), (buf[3:3 + n], buf[:n], a), (buf[n - 1:2 * n - 1], a, buf[:n])]:
        want = x + y[::-1]
        assert rev_add(x, y, out=o, backend="cpu") is o
        np.testing.assert_allclose(o, want)
    empty = np.empty(0)
    np.testing.assert_allclose(rev_add(empty, empty, out=empty, backend="cpu"), empty)
