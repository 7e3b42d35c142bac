"""hoist_allocations: buffers leave serial loops, stay inside parallel loops and loops their
shape depends on, appear once when versioned nests repeat them, and the program still
computes the numpy result in the bounds-checking interpreter."""
import numpy as np

from handgraph import Builder, read, sum_
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.verifier import verify
from kdsl_cpu.passes.hoist_allocations import hoist_allocations
from kdsl.passes.pipeline import lower
from kdsl.schedule import Schedule

F32 = dt.float32


def _func(body, *scalars):
    return n.LoweredFunc("f", (), (), tuple(scalars), body, {})


def _store1(buf):
    return n.Store(buf, (mk.as_expr(0),), n.const(1.0, F32))


def test_lifts_out_of_serial_loops_but_not_parallel_ones():
    i, j, m = n.var("i"), n.var("j"), n.var("m")
    t = n.Buffer("T", F32, (m,), None, n.Scope.LOCAL)
    inner = n.For(j, mk.as_expr(0), mk.as_expr(4), n.ForKind.SERIAL, n.Allocate(t, _store1(t)))
    f = hoist_allocations(_func(n.For(i, mk.as_expr(0), m, n.ForKind.PARALLEL, inner), m))
    verify(f)
    text = str(f)
    # allocated once per parallel iteration (per thread), outside the serial loop
    assert text.index("for i in") < text.index("allocate T") < text.index("for j in")


def test_shape_that_uses_a_loop_var_stays_in_that_loop():
    i, j = n.var("i"), n.var("j")
    t = n.Buffer("T", F32, (mk.add(i, 1),), None, n.Scope.LOCAL)
    inner = n.For(j, mk.as_expr(0), mk.as_expr(4), n.ForKind.SERIAL, n.Allocate(t, _store1(t)))
    f = hoist_allocations(_func(n.For(i, mk.as_expr(0), mk.as_expr(3), n.ForKind.SERIAL, inner)))
    text = str(f)
    assert text.index("for i in") < text.index("allocate T") < text.index("for j in")


def test_versioned_copies_allocate_once():
    i = n.var("i")
    t = n.Buffer("T", F32, (mk.as_expr(8),), None, n.Scope.LOCAL)
    branch = n.IfThenElse(mk.lt(i, 2), n.Allocate(t, _store1(t)), n.Allocate(t, _store1(t)))
    f = hoist_allocations(_func(n.For(i, mk.as_expr(0), mk.as_expr(3), n.ForKind.SERIAL, branch)))
    verify(f)
    assert str(f).count("allocate T") == 1 and str(f).startswith("def f(") and \
        str(f).index("allocate T") < str(f).index("for i in")


def test_attached_stage_still_computes_the_result():
    b = Builder("mm")
    A = b.input("A", ("n", "k"), F32)
    B = b.input("B", ("k", "m"), F32)
    i, j, r = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    prod = n.Binary(F32, n.BinOp.MUL, read(A, i, r), read(B, r, j))
    g = b.graph(b.compute("C", [i, j], sum_(prod, [r]), [r]))
    s = Schedule(g)
    C = s["C"]
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 4, 4)
    CL.compute_at(C, jo)
    f = hoist_allocations(lower(s))
    verify(f)
    assert str(f).index("allocate C.local") < str(f).index("for i.outer")
    rng = np.random.default_rng(3)
    for nn, kk, mm in [(9, 5, 7), (4, 4, 4), (0, 3, 2), (1, 1, 1)]:
        a, bb = rng.random((nn, kk), dtype=np.float32), rng.random((kk, mm), dtype=np.float32)
        out = np.zeros((nn, mm), np.float32)
        run_lowered(f, [a, bb], [out], [])
        np.testing.assert_allclose(out, a.astype(np.float64) @ bb, rtol=1e-5, atol=1e-5)
