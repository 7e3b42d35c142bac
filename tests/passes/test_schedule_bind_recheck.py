"""``bind`` changes no placement (loops, order, attachments stay), so after it the placements
are re-checked only while an earlier conflict is pending (kdsl.schedule.checking, moves=False):
a legal schedule skips the check, an illegal one is still reported at finish and at lowering."""
import pytest

import kdsl as kd
from kdsl.errors import ScheduleError
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.passes.pipeline import lower
from kdsl.schedule import Schedule, legality


def chain3(A):
    T = kd.compute(A.shape, lambda i: A[i] * 2.0, name="T")
    U = kd.compute(A.shape, lambda i: T[i] + 1.0, name="U")
    return kd.compute(A.shape, lambda i: U[i] * T[i], name="V")


def _counting(monkeypatch):
    calls = []
    real = legality.check

    def check(sched, call):
        calls.append(call)
        return real(sched, call)
    monkeypatch.setattr(legality, "check", check)
    return calls


def test_bind_on_a_legal_schedule_skips_the_recheck(monkeypatch):
    s = Schedule(trace(chain3, [TensorSpec((64,), "float32")]))
    V = s["V"]
    vo, vi = V.split(V.axes[0], factor=16)
    s["U"].compute_at(V, vo)
    s["T"].compute_at(V, vo)
    calls = _counting(monkeypatch)
    V.bind(vo, "blockIdx.x")
    V.bind(vi, "threadIdx.x")
    assert calls == []
    s.finish()
    assert calls == ["schedule"]


def test_bind_after_a_conflict_still_reports_it(monkeypatch):
    s = Schedule(trace(chain3, [TensorSpec((64,), "float32")]))
    V = s["V"]
    vo, vi = V.split(V.axes[0], factor=16)
    s["T"].compute_at(s["U"], s["U"].axes[0])       # T is also read by V, at the root
    calls = _counting(monkeypatch)
    V.bind(vo, "blockIdx.x")                        # pending conflict: checked again
    assert calls == ["bind"]
    with pytest.raises(ScheduleError, match="its reader V runs at the root"):
        s.finish()
    with pytest.raises(ScheduleError, match="its reader V runs at the root"):
        lower(s)
    s["T"].compute_root()
    s.finish()
