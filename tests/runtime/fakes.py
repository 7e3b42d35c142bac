"""Hand-built graphs standing in for traced kernels, and a counting backend."""
from __future__ import annotations

import threading

from handgraph import Builder, read, sum_

from kdsl import dtypes as dt
from kdsl.backends.numpy_backend import NumpyBackend
from kdsl.backends.spec import BackendSpec
from kdsl.graph import Constraint
from kdsl.ir import nodes as n
from kdsl.runtime import dispatch

_real_trace = dispatch.trace_graph
real_schedule = dispatch.make_schedule


def fake_trace(fn, specs, name=None, constants=()):
    build = getattr(fn, "__fake_graph__", None)
    if build is None:
        return _real_trace(fn, specs, name=name, constants=constants)
    fake_trace.calls += 1
    return build(list(specs))


fake_trace.calls = 0


def fake_schedule(graph):
    """A real Schedule (hint names are validated against it) that also records what was applied."""
    s = real_schedule(graph)
    s.applied = []
    return s


def install(monkeypatch):
    monkeypatch.setattr(dispatch, "trace_graph", fake_trace)
    monkeypatch.setattr(dispatch, "make_schedule", fake_schedule)


def graph_for(build):
    """Decorator: attach a graph builder ``build(specs) -> Graph`` to a kernel function."""
    def deco(fn):
        fn.__fake_graph__ = build
        return fn
    return deco


def _dims(b, spec, prefix):
    out = []
    for k, s in enumerate(spec.shape):
        out.append(s if isinstance(s, (int, str)) else f"{prefix}{k}")
    return out


def g_add(specs):
    """C[i...] = A[i...] + B[i...]; both share their dim names (so they must agree)."""
    b = Builder("add")
    a_spec, b_spec = specs
    shape = _dims(b, a_spec, "n")
    A = b.input("A", shape, a_spec.dtype, a_spec.contiguous)
    B = b.input("B", [s if s == 1 else d for s, d in zip(_dims(b, b_spec, "n"), shape)],
                b_spec.dtype, b_spec.contiguous)
    axes = [b.axis(f"i{k}", e) for k, e in enumerate(A.shape)]
    body = n.Binary(A.dtype, n.BinOp.ADD, read(A, *axes),
                    read(B, *[0 if isinstance(s, n.Const) and s.value == 1 else ax
                              for s, ax in zip(B.shape, axes)]))
    return b.graph(b.compute("C", axes, body))


def g_rowsum(specs):
    b = Builder("rowsum")
    (s,) = specs
    A = b.input("A", _dims(b, s, "n"), s.dtype, s.contiguous)
    i, k = b.axis("i", A.shape[0]), b.raxis("k", A.shape[1])
    return b.graph(b.compute("B", [i], sum_(read(A, i, k), [k]), [k]))


def g_scale(specs):
    b = Builder("scale")
    s, c = specs
    A = b.input("A", _dims(b, s, "n"), s.dtype, s.contiguous)
    if not hasattr(c, "dtype"):          # a constant arrives as its value
        k = n.const(c, A.dtype)
    else:
        v = b.scalar("s", c.dtype)
        k = n.Cast(A.dtype, v) if c.dtype is not A.dtype else v
    i = b.axis("i", A.shape[0])
    return b.graph(b.compute("B", [i], n.Binary(A.dtype, n.BinOp.MUL, read(A, i), k)))


def g_matvec(specs):
    """y[i] = sum_k M[i, k] * x[k] with a call-time constraint M.shape[1] == x.shape[0]."""
    b = Builder("matvec")
    ms, xs = specs
    M = b.input("M", _dims(b, ms, "m"), ms.dtype)
    X = b.input("x", _dims(b, xs, "x"), xs.dtype)
    i, k = b.axis("i", M.shape[0]), b.raxis("k", M.shape[1])
    body = sum_(n.Binary(M.dtype, n.BinOp.MUL, read(M, i, k), read(X, k)), [k])
    c = Constraint(M.shape[1], X.shape[0], "matvec: M's columns must match x's length")
    return b.graph(b.compute("y", [i], body, [k]), constraints=[c])


def g_two(specs):
    """Two outputs: A + 1 and A * 2."""
    b = Builder("two")
    (s,) = specs
    A = b.input("A", _dims(b, s, "n"), s.dtype)
    i = b.axis("i", A.shape[0])
    one = n.const(1, A.dtype)
    two = n.const(2, A.dtype)
    P = b.compute("P", [i], n.Binary(A.dtype, n.BinOp.ADD, read(A, i), one))
    j = b.axis("j", A.shape[0])
    Q = b.compute("Q", [j], n.Binary(A.dtype, n.BinOp.MUL, read(A, j), two))
    return b.graph(P, Q)


class CountingBackend(NumpyBackend):
    """numpy semantics; counts compiles and records the hints it is given."""

    spec = BackendSpec(name="counting")

    def __init__(self):
        self.compiles, self.hints, self.lock = 0, [], threading.Lock()

    def schedule(self, sched, hints):
        self.hints.append(list(hints))

    def compile(self, request):
        with self.lock:
            self.compiles += 1
        return super().compile(request)

    def lower(self, request):
        return ("lowered", request.graph.name)


class NullBackend(NumpyBackend):
    """Compiles to a no-op: measures pure dispatch overhead."""

    spec = BackendSpec(name="null")

    def compile(self, request):
        def run(inputs, outputs, scalars, stream=None):
            pass
        run.fast = None        # a compiled object: callable, no fast launcher
        return run
