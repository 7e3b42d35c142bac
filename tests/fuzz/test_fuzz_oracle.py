"""The fuzzer's own tests: the oracle agrees with numpy, comparisons catch what they must,
error fairness is judged as documented, and a crashing or hanging case is reported
without ending the run."""
import numpy as np
import pytest

import kdsl as kd

from . import check, direct
from .case import expected, generate, render
from .oracle import OracleRaise, OVal
from .oracle_red import reduce_np
from .supervise import Supervisor


def test_oracle_matches_numpy_itself():
    """Kernels numpy can run as plain code: same dtype, values within the oracle's bounds."""
    compared = 0
    for i in range(250):
        case = generate(99, i)
        if not direct.applicable(case):
            continue
        for call in case.calls:
            exp, got = expected(case, call), direct.run(case, call)
            if isinstance(exp, OracleRaise) or isinstance(got, Exception):
                assert isinstance(exp, OracleRaise) == isinstance(got, Exception), (
                    render(case), exp, got)
                continue
            for g, e in zip(got, exp):
                kind, det = check.compare(e, g)
                assert kind is None, (render(case), det)
                compared += 1
    assert compared > 150


def _ov(x):
    x = np.asarray(x)
    return OVal(x.dtype.name, x.astype(np.float64) if x.dtype.kind == "f" else x)


def test_sum_bounds_are_tight_enough_to_catch_a_narrow_accumulator():
    x = np.full((1, 4096), 0.1, np.float16)
    exp = reduce_np("sum", _ov(x), 1, False, None)
    assert exp.dtype == "float16"
    serial16 = np.float16(0)
    for v in x[0]:
        serial16 = np.float16(serial16 + v)       # float16 accumulation saturates
    assert check.compare(exp, np.array([serial16], np.float16))[0] == "wrong_value"
    good = np.array([np.float16(np.sum(x.astype(np.float32)))])
    assert check.compare(exp, good)[0] is None


def test_exact_sums_are_exact_and_ties_are_determined():
    x = np.array([[0.5, 1.25, -0.75, 2.0]], np.float32)
    s = reduce_np("sum", _ov(x), 1, False, None)
    assert s.err.item() == 0.0
    a = reduce_np("argmax", _ov(np.array([[1.0, 3.0, 3.0]], np.float32)), 1, False, None)
    assert a.val.item() == 1 and not a.M().any()
    assert check.compare(a, np.array([2]))[0] == "wrong_value"


def test_compare_reports_dtype_shape_and_values():
    e = _ov(np.array([1.0, 2.0], np.float32))
    e.err = np.zeros(2)
    assert check.compare(e, np.array([1.0, 2.0], np.float64))[0] == "wrong_dtype"
    assert check.compare(e, np.array([1.0], np.float32))[0] == "wrong_shape"
    assert check.compare(e, np.array([1.0, 2.001], np.float32))[0] == "wrong_value"
    assert check.compare(e, np.array([1.0, 2.0], np.float32))[0] is None


def test_fairness():
    ok = kd.ScheduleError("split: axis i9 does not exist; stage B has loop axes i0, i1",
                          loc=kd.SourceLoc("user.py", 3, "B.split(...)"), hint="use one of i0, i1")
    assert check.fairness(ok) == []
    raw = kd.ScheduleError("cannot bound IterVar(i0, spatial)", loc=kd.SourceLoc("user.py", 3),
                           hint="x")
    assert any("raw IR" in p for p in check.fairness(raw))
    internal = kd.ScheduleError("split: axis i1.inner is already vectorized",
                                loc=kd.SourceLoc("user.py", 3), hint="x")
    assert check.fairness(internal, explicit=True) == []
    assert check.fairness(internal, explicit=False)
    assert check.fairness(ValueError("x")) == ["not a kdsl user error (ValueError)"]


@pytest.mark.parametrize("what", ["segv", "hang"])
def test_supervisor_survives_crashes_and_hangs(what):
    sup = Supervisor(timeout=3)
    try:
        r = sup.run({"seed": 0, "index": 0, "backend": "numpy", "selftest": what})
        assert r["outcome"] == "bug" and r["kind"] == ("crash" if what == "segv" else "hang")
        assert "also when run alone" in r["detail"]
        after = sup.run({"seed": 0, "index": 1, "backend": "numpy"})
        assert after["outcome"] in ("ok", "user_error", "bug") and after["index"] == 1
    finally:
        sup.close()


def test_schedule_illegal_only_for_a_later_calls_sizes():
    """A schedule is generated against the first call's graph; a later call's sizes can make
    a primitive illegal there (size 1 is a constant extent, 16 is not), and kdsl's fair
    rejection at that call is then expected, not a late schedule error (case 11:27; it was
    5:81 before the issue-25 surface changed what the generator draws)."""
    from .gen_schedule import SchedSpec
    from .runner import rejected_for, run_task
    src = ("import numpy as np\nimport kdsl as kd\n\n\n@kd.kernel\ndef kern(a0):\n"
           "    return np.sum(a0, axis=0, keepdims=True)\n")
    spec = SchedSpec("explicit", lines=["st0 = s['sum']", "st0.bind(st0.axis('r0'), 'threadIdx.y')"])
    assert rejected_for(src, spec, [np.ones(1, np.float32)]) is None
    assert "constant extent" in rejected_for(src, spec, [np.ones(16, np.float32)])
    r = run_task(11, 27, "interp-gpu")
    assert r["outcome"] == "user_error", r
