"""Hints become primitives; bad names list what exists."""
import numpy as np
import pytest

from test_lowering import matmul_graph, rowsum_graph, run
from kdsl.errors import ScheduleError
from kdsl.schedule import Schedule, apply_hints
from kdsl.schedule.hints import Hint, schedule

RNG = np.random.default_rng(1)


def hinted(**hv):
    return lambda s: apply_hints(s, [Hint(None, hv)])


@pytest.mark.parametrize("hv", [
    dict(parallel="i", vectorize=8),
    dict(rfactor=4),
    dict(rfactor=4, unroll=2),
    dict(tile={"i": 4}, parallel=True),
    dict(unroll="k"),
])
def test_rowsum_hints(hv):
    a = RNG.random((13, 29)).astype(np.float32)
    (out,), f = run(rowsum_graph(), hinted(**hv), [a], [(13,)])
    np.testing.assert_allclose(out, a.astype(np.float64).sum(1), rtol=1e-5)


def test_matmul_tile_hint_order():
    a, b = RNG.random((10, 6)).astype(np.float32), RNG.random((6, 9)).astype(np.float32)
    (out,), f = run(matmul_graph(), hinted(tile={"i": 4, "j": 4, "r": 2}, parallel="i", vectorize="j"), [a, b],
                    [(10, 9)])
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5)
    text = str(f)
    assert "# parallel" in text and "# vectorized" in text
    s = Schedule(matmul_graph())
    hinted(tile={"i": 4, "j": 4, "r": 2})(s)
    assert [a.name for a in s["C"].leaf_axes] == ["i.outer", "j.outer", "r.outer", "i.inner", "j.inner", "r.inner"]


def test_hardware_hints_are_kept_for_backends():
    s = Schedule(matmul_graph())
    apply_hints(s, [Hint("cuda", dict(threads=(16, 16), cache={"A": "shared"}, stages=2, tensor_cores=True))])
    assert s.backend_hints["C"] == dict(threads=(16, 16), cache={"A": "shared"}, stages=2, tensor_cores=True)


@pytest.mark.parametrize("hv, msg", [
    (dict(parallel="x"), "has no axis 'x'|names axis 'x'"),
    (dict(tile={"q": 4}), "stage C has axes"),
    (dict(stage="D"), "stages: C"),
    (dict(cache={"Z": "shared"}), "reads A, B"),
    (dict(cache={"A": "texture"}), "'shared' or 'local'"),
    (dict(rfactor=0), "number of partial"),
])
def test_hint_errors(hv, msg):
    s = Schedule(matmul_graph())
    with pytest.raises(ScheduleError, match=msg):
        apply_hints(s, [Hint(None, hv)])


def test_decorator_validates_vocabulary_and_records():
    with pytest.raises(ScheduleError, match="the hints are"):
        schedule("cpu", paralel="i0")

    @schedule("cpu", parallel="i0")
    @schedule("cuda", lambda s: None)
    def f(A):
        return A
    hints = f.__kdsl_schedules__
    assert [h.target for h in hints] == ["cuda", "cpu"]
    assert hints[0].fn is not None and hints[1].hints == {"parallel": "i0"}
    assert hints[1].loc is not None and hints[1].loc.file == __file__
