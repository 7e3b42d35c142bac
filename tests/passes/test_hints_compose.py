"""Hints compose, in any order, on every kind of kernel; their errors speak the user's names.

The matrix (tests/hint_matrix.py) runs here on the loop-IR interpreter, which
applies hints on an empty default through the same plan machinery as the cpu
backend (tests/cpu/test_cpu_hints.py runs it there).
"""
import numpy as np
import pytest

import kdsl as kd
from hint_matrix import HINT_SETS, KERNELS, cases, check, hint_id, make_kernel, resolve
from kdsl.errors import ScheduleError

INTERNAL = (".inner", ".outer", ".fused", ".rf", ".v ", "<partials>")


@pytest.mark.parametrize("kname, k", cases(), ids=lambda x: x if isinstance(x, str) else hint_id(x))
def test_matrix_on_the_interpreter(kname, k, rng):
    check(kname, make_kernel(kname, "interp", k), "interp", rng)


def _specs(kname):
    _, _, shapes, _ = KERNELS[kname]
    return [kd.TensorSpec(tuple(f"d{j}{d}" for d in range(len(s))), kd.float32)
            for j, s in enumerate(shapes[0])]


@pytest.mark.parametrize("kname", ["row", "full", "stencil", "matmul"])
def test_keyword_order_does_not_matter(kname):
    _, _, _, axes = KERNELS[kname]
    for hs in HINT_SETS:
        hv = resolve(hs, axes)
        if hv is None or len(hv) < 2:
            continue
        texts = set()
        items = list(hv.items())
        for perm in (items, items[::-1], items[1:] + items[:1]):
            fn = KERNELS[kname][0]
            kern = kd.kernel(kd.schedule("interp", **dict(perm))(fn))
            texts.add(str(kern.lower(*_specs(kname), backend="interp")))
        assert len(texts) == 1, f"{kname} {hv}: the loop nest depends on the keyword order"


def test_stacked_decorators_compose_and_the_later_one_wins(rng):
    def body(a):
        return a.sum(axis=1)
    k = kd.kernel(kd.schedule("interp", parallel="i0")(kd.schedule(None, tile={"r0": 4})(
        kd.schedule("interp", vectorize=2, unroll=8)(body))))
    text = str(k.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="interp"))
    assert "# parallel" in text and "# vectorized" in text and "# unrolled" in text
    a = rng.standard_normal((5, 11)).astype(np.float32)
    np.testing.assert_allclose(k(a, backend="interp"), a.astype(np.float64).sum(1), rtol=1e-5)
    # a later decorator's field overrides an earlier one's
    k2 = kd.kernel(kd.schedule(None, parallel=False)(kd.schedule(None, parallel="i0")(body)))
    assert "# parallel" not in str(k2.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="interp"))


# ------------------------------------------------------------------ value checks
@pytest.mark.parametrize("hv, msg", [
    (dict(vectorize=0), r"vectorize=0: vectorize takes a vector width \(an int >= 1\) or an axis name"),
    (dict(vectorize=True), "vectorize takes a vector width"),
    (dict(unroll=1.5), r"unroll=1.5: unroll takes an unroll factor \(an int >= 1\) or axis names"),
    (dict(unroll=[]), "unroll takes an unroll factor"),
    (dict(threads=-2), r"threads=-2: threads takes a thread count \(an int >= 1\) or a CUDA block"),
    (dict(threads=(16, 0)), "threads takes a thread count"),
    (dict(threads=(1, 2, 3, 4)), "1 to 3 positive ints"),
    (dict(stages=1), r"stages=1: stages takes the number of buffers of a multi-buffered copy \(an int >= 2\)"),
    (dict(tile={"i0": 0}), "tile takes axis names mapped to positive int factors"),
    (dict(tile=[4]), "tile takes a dict axis -> factor"),
    (dict(parallel=3), "parallel takes an axis name, True"),
    (dict(rfactor=0), "the number of partial reductions"),
    (dict(rfactor=2.0), "the number of partial reductions"),
    (dict(cache={"A": "texture"}), "'shared' or 'local'"),
    (dict(tensor_cores="yes"), "tensor_cores takes True or False"),
    (dict(stage=3), "the name of a stage"),
])
def test_bad_values_are_refused_at_the_decorator(hv, msg):
    with pytest.raises(ScheduleError, match=msg) as ei:
        kd.schedule("cpu", **hv)
    assert ei.value.loc is not None and ei.value.loc.file == __file__
    assert "e.g." in str(ei.value)


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(ScheduleError, match="unknown target 'cpux'") as ei:
        kd.schedule("cpux", parallel=True)
    text = str(ei.value)
    for known in ("cpu", "cuda", "interp", "numpy"):
        assert known in text
    kd.schedule("cuda", threads=(16, 16))     # a target not installed here is still known


def test_kernel_schedule_method_checks_its_target_and_functions():
    k = kd.kernel(_rowsum)
    with pytest.raises(ScheduleError, match="unknown target 'cpux'") as ei:
        k.schedule("cpux")
    assert "cpu" in str(ei.value) and ei.value.loc.file == __file__
    with pytest.raises(ScheduleError, match="target must be a backend name or None, got 3"):
        k.schedule(3)
    with pytest.raises(ScheduleError, match=r"decorates a function of the schedule, got int"):
        k.schedule("cpu")(5)
    assert "schedule" not in repr(k)        # nothing was added by the rejected calls

    @k.schedule(None)
    def every_target(s):
        pass
    assert repr(k).endswith(", 1 schedule>")


def test_kernel_repr_names_parameters_place_and_state():
    k = kd.kernel(_rowsum)
    text = repr(k)
    assert text.startswith("<kdsl.kernel ") and "_rowsum(a) at test_hints_compose.py:" in text
    k(np.ones((3, 4), np.float32), backend="numpy")
    assert repr(k).endswith(", 1 compiled>")


# ------------------------------------------------------------------ name checks
def _rowsum(a):
    return a.sum(axis=1)


@pytest.mark.parametrize("hv, msg", [
    (dict(parallel="x"), "parallel names axis 'x', but stage sum has axes i0 and reduction axes r0"),
    (dict(tile={"i1": 4}), "tile names axis 'i1', but stage sum has axes i0 and reduction axes r0"),
    (dict(vectorize="i0.inner"), "vectorize names axis 'i0.inner', but stage sum has axes i0"),
    (dict(unroll=["r0", "k"]), "unroll names axis 'k'"),
    (dict(stage="nope"), "stage='nope': there is no such stage; stages: sum"),
    (dict(cache={"B": "shared"}), "cache names 'B', but stage sum reads a"),
    (dict(stage="sum", rfactor=2, parallel="r0", unroll="i0", vectorize=4, tile={"q": 2}),
     "tile names axis 'q'"),
])
def test_bad_names_list_what_exists_in_the_users_words(hv, msg, executor):
    k = kd.kernel(kd.schedule(None, **hv)(_rowsum))
    with pytest.raises(ScheduleError, match=msg) as ei:
        k(np.ones((3, 4), np.float32), backend=executor)
    first = str(ei.value).split("\nat ")[0]
    assert not any(s in first.replace("'i0.inner'", "") for s in INTERNAL), first
    assert "@kd.schedule" not in first and ei.value.loc.file == __file__


def test_rfactor_on_an_elementwise_stage_says_what_rfactor_is_for():
    k = kd.kernel(kd.schedule(None, rfactor=4)(lambda a: a + 1))
    with pytest.raises(ScheduleError, match="rfactor: stage add is not a reduction") as ei:
        k(np.ones(3, np.float32), backend="interp")
    assert "partial results" in str(ei.value)


def test_unroll_and_parallel_of_the_same_whole_loop():
    body = lambda a: a * 2.0   # noqa: E731
    k = kd.kernel(kd.schedule(None, parallel="i0", unroll="i0")(body))
    with pytest.raises(ScheduleError, match="loop over i0 to be both unrolled and parallel") as ei:
        k.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="interp")
    assert "tile={'i0': 4}" in str(ei.value)
    # parallel=True leaves the choice of axis to kdsl: it takes another one
    text = str(kd.kernel(kd.schedule(None, parallel=True, unroll="i0")(body))
               .lower(kd.TensorSpec((4, "m"), kd.float32), backend="interp"))
    assert "i0 in range(4):  # unrolled" in text and "i1 in range(m):  # parallel" in text
    # tiled, the two apply to different parts
    text = str(kd.kernel(kd.schedule(None, parallel="i0", unroll="i0", tile={"i0": 4})(body))
               .lower(kd.TensorSpec(("n", "m"), kd.float32), backend="interp"))
    assert "i0.outer in range(ceildiv(n, 4)):  # parallel" in text
    assert "i0.inner in range(4):  # unrolled" in text


# ------------------------------------------------------------------ the decorator
def test_schedule_does_not_mutate_the_function(rng):
    def body(a):
        return a * 2.0
    hinted = kd.kernel(kd.schedule("interp", vectorize=4)(body))
    plain = kd.kernel(body)
    assert not hasattr(body, "__kdsl_schedules__")
    assert plain._hints == [] and len(hinted._hints) == 1
    spec = kd.TensorSpec(("n",), kd.float32)
    assert "# vectorized" not in str(plain.lower(spec, backend="interp"))
    assert "# vectorized" in str(hinted.lower(spec, backend="interp"))
    a = rng.standard_normal(9).astype(np.float32)
    np.testing.assert_allclose(hinted(a, backend="interp"), a * 2.0)

    class Callable:
        def __call__(self, a):
            return a + 1.0
    obj = Callable()
    k = kd.kernel(kd.schedule("interp", unroll=2)(obj))
    assert not hasattr(obj, "__kdsl_schedules__")
    np.testing.assert_allclose(k(a, backend="interp"), a + 1.0)


# ------------------------------------------------------------------ 0-d outputs
@pytest.mark.parametrize("hv", [dict(parallel=True), dict(unroll=4), dict(vectorize=8),
                                dict(parallel=True, unroll=4, vectorize=8),
                                dict(rfactor=3, parallel=True, vectorize=4, unroll=2)])
@pytest.mark.parametrize("which", ["compute", "sum", "argmax"])
def test_zero_d_outputs_take_any_hint(hv, which, executor, rng):
    fns = {"compute": (lambda x: kd.compute((), lambda: x[2] * 2.0), lambda x: x[2] * 2.0),
           "sum": (lambda x: x.sum(), lambda x: x.astype(np.float64).sum()),
           "argmax": (lambda x: x.argmax(), lambda x: x.argmax())}
    fn, ref = fns[which]
    if which == "compute" and "rfactor" in hv:
        return
    k = kd.kernel(kd.schedule(None, **hv)(fn))
    for size in (37, 1, 3):
        x = rng.standard_normal(size).astype(np.float32)
        if which == "compute" and size < 3:
            continue
        np.testing.assert_allclose(k(x, backend=executor), ref(x), rtol=1e-5)
