"""The interpreter wrapped in the Backend protocol."""
import sys
import types

import numpy as np
import pytest

from kdsl import dtypes as dt
from kdsl.backends.interpreter import InterpreterBackend, run_lowered
from kdsl.backends.protocol import Backend, Compiled
from kdsl.ir import nodes as n

from interp_build import c, kernel, load, loop, store


class FakeRequest:
    """Stands for a CompileRequest: only ``lower()`` is used by the interpreter."""

    def __init__(self, func):
        self.func = func
        self.lowered = 0

    def lower(self, extra_passes=(), pipeline=None):
        self.lowered += 1
        return self.func


def double():
    def body(A, B):
        i = n.var("i")
        return loop(i, A.shape[0], store(B, (i,), n.Binary(dt.float32, n.BinOp.MUL, load(A, i),
                                                           c(2.0, dt.float32))))
    return kernel("double", [("A", "float32", 1)], [("B", "float32", 1)], body)


def test_protocol_members():
    be = InterpreterBackend()
    assert isinstance(be, Backend)
    assert (be.spec.name, be.spec.device) == ("interp", "host")
    assert be.accepts(np.zeros(3)) and not be.accepts([1, 2]) and not be.accepts(3.0)
    e = be.empty((2, 3), dt.float16)
    assert e.shape == (2, 3) and e.dtype == np.float16
    assert be.empty((4,), np.int8).dtype == np.int8
    assert be.empty((0, 2), "float32").shape == (0, 2)


def test_compile_and_call_and_source():
    be = InterpreterBackend()
    req = FakeRequest(double())
    fn = be.compile(req)
    assert isinstance(fn, Compiled)
    a = np.arange(5, dtype=np.float32)[::-1]
    out = be.empty((5,), dt.float32)
    fn([a], [out], [])
    np.testing.assert_array_equal(out, a * 2)
    src = be.source(req)
    assert src.startswith("def double(") and "for i in range(" in src
    compile(src, "<check>", "exec")        # the text is valid Python


def test_intrinsic_is_refused_clearly():
    def body(A, B):
        return n.Intrinsic("wmma.mma_sync", (A, B))
    f = kernel("tc", [("A", "float16", 1)], [("B", "float32", 1)], body)
    with pytest.raises(NotImplementedError, match="wmma.mma_sync"):
        InterpreterBackend().compile(FakeRequest(f))
    assert "_intrinsic('wmma.mma_sync')" in InterpreterBackend().source(FakeRequest(f))
    with pytest.raises(NotImplementedError, match="wmma.mma_sync"):
        run_lowered(f, [np.zeros(2, np.float16)], [np.zeros(2, np.float32)], [])


def test_schedule_applies_generic_hints_only(monkeypatch):
    calls = []
    fake = types.ModuleType("kdsl.schedule.hints")
    fake.apply_hints = lambda sched, hints: calls.append((sched, list(hints)))
    monkeypatch.setitem(sys.modules, "kdsl.schedule.hints", fake)
    sched, hints = object(), ["h1", "h2"]
    assert InterpreterBackend().schedule(sched, hints) is None
    assert calls == [(sched, ["h1", "h2"])]
