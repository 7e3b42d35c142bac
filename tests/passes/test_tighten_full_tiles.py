"""tighten_loops and full_tiles: the printed IR they produce, where they must not fire, and
that the transformed loop IR still computes the numpy result in the (bounds-checking) IR
interpreter, on shapes that do and do not divide the split factors (0 and 1 included)."""
import dataclasses
import re

import numpy as np
import pytest

from handgraph import Builder, matmul_graph, read, rowsum_graph, sum_
from seed_schedules import bind_rows, split_only
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.verifier import verify
from kdsl_cpu.passes.full_tiles import MAX_GUARDS, full_tiles
from kdsl.passes.pipeline import lower
from kdsl_cpu.passes.tighten_loops import tighten_loops
from kdsl.schedule import Schedule

RNG = np.random.default_rng(7)
F64 = dt.float64


def _mul(a, b):
    return n.Binary(F64, n.BinOp.MUL, a, b)


# ------------------------------------------------------------------ graphs
def ew1_graph():
    b = Builder("ew1")
    A = b.input("A", ("n",), F64)
    i = b.axis("i", b.dim("n"))
    return b.graph(b.compute("B", [i], _mul(read(A, i), n.const(3.0, F64))))


def ew2_graph():
    b = Builder("ew2")
    A = b.input("A", ("n", "m"), F64)
    i, j = b.axis("i", b.dim("n")), b.axis("j", b.dim("m"))
    return b.graph(b.compute("B", [i, j], _mul(read(A, i, j), n.const(2.0, F64))))


# ------------------------------------------------------------------ schedules
def s_ew1_split(s):
    B = s["B"]
    _, bi = B.split(B.axes[0], factor=8)
    B.vectorize(bi)


def s_ew1_parallel(s):
    B = s["B"]
    bo, _ = B.split(B.axes[0], factor=5)
    B.parallel(bo)


def s_ew2_tile(s):
    B = s["B"]
    B.tile(B.axes[0], B.axes[1], 4, 8)


def s_ew2_tile_unroll(s):
    """ii split by 3 (which does not divide 4): a two-conjunct guard on an unrolled loop."""
    B = s["B"]
    _, _, ii, _ = B.tile(B.axes[0], B.axes[1], 4, 8)
    _, iii = B.split(ii, factor=3)
    B.unroll(iii)


def s_mm_block(s):
    """A small register-blocked GEMM (gemm.py's shape): local tile, rows unrolled, cols vectorized."""
    C = s["C"]
    cc = s.cache_write(C, "local")
    i, j = C.axes
    io, ii = C.split(i, factor=3)
    ioo, ioi = C.split(io, factor=2)
    jo, ji = C.split(j, factor=4)
    C.reorder(ioo, jo, ioi, ii, ji)
    C.parallel(ioo)
    cc.compute_at(C, ioi)
    ci, cj = cc.stage.axes
    (k,) = cc.stage.reduce_axes
    cc.reorder(k, ci, cj)
    cc.unroll(ci)
    cc.vectorize(cj)


def _lower(graph, sched):
    s = Schedule(graph)
    sched(s)
    return lower(s)


VARIANTS = {
    "none": lambda f: f,
    "tighten": tighten_loops,
    "full_tiles": full_tiles,
    "both": lambda f: tighten_loops(full_tiles(f)),   # the cpu backend's order
}


def _run(f, args, out_shape):
    out = np.full(out_shape, np.nan)
    run_lowered(f, list(args), [out], [])
    return out


# ------------------------------------------------------------------ printed IR
def test_tighten_moves_guard_into_extent():
    f = _lower(ew1_graph(), s_ew1_split)
    assert "if i.outer*8 + i.inner < n:" in str(f)
    t = tighten_loops(f)
    verify(t)
    text = str(t)
    assert "for i.inner in range(min(8, max(n - i.outer*8, 0))):  # vectorized" in text
    assert "if " not in text
    assert tighten_loops(t) is t            # idempotent, and the mutator returns the same object


def test_tighten_parallel_loop_and_reduction_split():
    t = tighten_loops(_lower(ew1_graph(), s_ew1_parallel))
    assert "if " not in str(t)
    t = str(tighten_loops(_lower(rowsum_graph(F64), split_only)))
    assert "range(min(16, max(m - k.outer*16, 0)))" in t
    assert "if k.outer*16 + k.inner < m" not in t
    # the row loop's body is two guarded statements (init, update), not one if: the guards stay,
    # the loop stops where both are dead (kdsl_cpu/passes/dead_iterations.py)
    assert "for i.inner in range(min(32, max(n - i.outer*32, 0))):" in t
    assert t.count("if i.outer*32 + i.inner < n:") == 2


def test_tighten_keeps_other_conjuncts_and_unrolled_loops():
    f = _lower(ew2_graph(), s_ew2_tile_unroll)
    t = str(tighten_loops(f))
    # the unrolled loop keeps its constant extent and its (two-conjunct) guard
    assert "for i.inner.inner in range(3):  # unrolled" in t
    assert "if i.inner.outer*3 + i.inner.inner < 4 and i.outer*4 + i.inner.outer*3 + i.inner.inner < n:" in t
    assert "for j.inner in range(min(8, max(m - j.outer*8, 0))):" in t
    # the same two-conjunct guard on a serial loop: one conjunct moves, the other stays an if
    s = Schedule(ew2_graph())
    B = s["B"]
    _, _, ii, _ = B.tile(B.axes[0], B.axes[1], 4, 8)
    B.split(ii, factor=3)
    t = str(tighten_loops(lower(s)))
    assert "for i.inner.inner in range(min(3, max(4 - i.inner.outer*3, 0))):" in t
    assert "if i.outer*4 + i.inner.outer*3 + i.inner.inner < n:" in t


def test_thread_bound_loops_are_left_alone():
    f = _lower(rowsum_graph(F64), bind_rows)
    assert "bound threadIdx.x" in str(f) and "if i.outer*32 + i.inner < n" in str(f)
    assert tighten_loops(f) is f
    assert full_tiles(f) is f


def _hand(cond_of, kind=n.ForKind.SERIAL, otherwise=False, wrap=False):
    """ew1's function with its body replaced by ``for x in range(8): if cond_of(x, n): B[x] = A[x]*3``."""
    f = _lower(ew1_graph(), lambda s: None)
    (A,), (B,) = f.inputs, f.outputs
    nvar = A.shape[0]
    x = n.var("x")
    store = n.Store(B, (x,), _mul(n.Load(F64, A, (x,)), n.const(3.0, F64)))
    other = n.Store(B, (x,), n.const(-1.0, F64)) if otherwise else None
    body = n.For(x, n.const(0), n.const(8), kind, n.IfThenElse(cond_of(x, nvar), store, other))
    if wrap:   # full_tiles versions a nest around a tile loop, never the tile loop alone
        body = n.For(n.var("z"), n.const(0), n.const(1), n.ForKind.SERIAL, body)
    return dataclasses.replace(f, body=body)


#: (guard, the same guard on Python ints)
NO_APPLY = {
    "coef2": (lambda x, N: mk.lt(mk.mul(x, 2), N), lambda x, N: 2 * x < N),
    "var_in_limit": (lambda x, N: mk.lt(x, mk.sub(N, x)), lambda x, N: x < N - x),
    "greater": (lambda x, N: mk.compare(n.CmpOp.GT, N, x), lambda x, N: N > x),
    "eq": (lambda x, N: mk.eq(x, mk.sub(N, 1)), lambda x, N: x == N - 1),
    "modulo": (lambda x, N: mk.lt(mk.mod(x, 3), mk.sub(N, 5)), lambda x, N: x % 3 < N - 5),
}


@pytest.mark.parametrize("name", list(NO_APPLY))
def test_no_change_where_pattern_does_not_apply(name):
    cond, py = NO_APPLY[name]
    f = _hand(cond)
    assert tighten_loops(f) is f
    assert full_tiles(f) is f
    w = _hand(cond, wrap=True)
    assert full_tiles(w) is w
    for nn in (0, 3, 8, 11):
        a = RNG.random(nn)
        want = np.full(nn, np.nan)
        for x in range(8):
            if py(x, nn):
                want[x] = a[x] * 3
        np.testing.assert_array_equal(_run(f, [a], (nn,)), want)


def test_if_with_else_is_left_alone():
    g = _hand(lambda x, N: mk.lt(x, N), otherwise=True)
    assert tighten_loops(g) is g and full_tiles(g) is g


@pytest.mark.parametrize("unroll", [False, True])
def test_unrolled_loop_keeps_extent(unroll):
    kind = n.ForKind.UNROLLED if unroll else n.ForKind.SERIAL
    f = _hand(lambda x, N: mk.lt(x, N), kind)
    t = tighten_loops(f)
    if unroll:
        assert t is f
    else:
        assert "for x in range(min(8, max(n, 0))):" in str(t)


@pytest.mark.parametrize("op", ["lt", "le"])
@pytest.mark.parametrize("nn", [0, 1, 5, 7, 8, 9])
def test_hand_built_le_and_offsets(op, nn):
    """``x + 2 <= n - 1`` (LE, an offset on each side) on an array of ``n`` elements."""
    cmp = n.CmpOp.LE if op == "le" else n.CmpOp.LT
    f = _hand(lambda x, N: mk.compare(cmp, mk.add(x, 2), mk.sub(N, 1)), wrap=True)
    t = tighten_loops(f)
    assert "if " not in str(t)
    ft = full_tiles(f)
    assert "else:" in str(ft)
    a = RNG.random(nn)
    want = np.full(nn, np.nan)
    lim = (nn - 1 - 2 + (1 if op == "le" else 0))
    cnt = max(0, min(8, lim))
    want[:cnt] = a[:cnt] * 3
    for g in (f, t, ft, tighten_loops(ft)):
        verify(g)
        np.testing.assert_array_equal(_run(g, [a], (nn,)), want)


def test_full_tiles_versions_the_nest():
    f = _lower(ew2_graph(), s_ew2_tile)
    v = full_tiles(f)
    verify(v)
    text = str(v)
    # the j guard's limit uses j.outer, so the outermost nest where it is fixed is i.inner's
    # loop; i.inner's own guard is tighten_loops' business
    assert "      if 8 <= m - j.outer*8:\n        for i.inner in range(4):\n" in text
    assert text.count("else:") == 1
    full, _, edge = text.partition("else:")
    assert "if j.outer*8 + j.inner < m" not in full
    assert "if j.outer*8 + j.inner < m" in edge
    both = str(tighten_loops(v))
    assert both.count("for i.inner in range(min(4, max(n - i.outer*4, 0))):") == 2
    assert "for j.inner in range(min(8, max(m - j.outer*8, 0))):" in both
    assert "for j.inner in range(8):" in both
    assert "if " in both and "if i.outer" not in both


def test_full_tiles_gemm_block():
    f = _lower(matmul_graph(F64), s_mm_block)
    text = str(full_tiles(f))
    # the reduction nest is versioned on both tile guards: its full copy has no guard at all
    # (blocked_sums wraps it in ``if k <= 1024:``, hence the free indentation)
    assert re.search(r"if 3 <= n - i.outer.outer\*6 - i.outer.inner\*3 and 4 <= m - j.outer\*4:\n"
                     r" +for r in range\(k\):\n +for i in range\(3\):  # unrolled\n"
                     r" +for j in range\(4\):  # vectorized\n +C.local\[i, j\] = ", text)
    # versioned: the zeroing, the reduction and the store-back, and blocked_sums' long-k copy
    # (its ``else``), its blocks and its final fold
    assert text.count("else:") == 6


def test_full_tiles_limits_the_number_of_guards():
    """A nest with more than MAX_GUARDS tile guards is not versioned as a whole."""
    f = _lower(ew1_graph(), lambda s: None)
    (A,), (B,) = f.inputs, f.outputs
    nvar = A.shape[0]
    y = n.var("y")
    loops = []
    for k in range(MAX_GUARDS + 1):
        x = n.var(f"x{k}")
        idx = mk.add(mk.mul(y, 2), x)
        st = n.Store(B, (idx,), _mul(n.Load(F64, A, (idx,)), n.const(float(k + 1), F64)))
        loops.append(n.For(x, n.const(0), n.const(2), n.ForKind.SERIAL, n.IfThenElse(mk.lt(idx, nvar), st)))

    def nest(inner):
        # the guards' limits n - y*2 are fixed inside z: z is where a nest could be versioned
        z = n.For(n.var("z"), n.const(0), n.const(1), n.ForKind.SERIAL, n.Seq(tuple(inner)))
        return n.For(y, n.const(0), mk.ceildiv(nvar, 2), n.ForKind.SERIAL, z)
    g = dataclasses.replace(f, body=nest(loops))
    assert full_tiles(g) is g
    h = dataclasses.replace(f, body=nest(loops[:MAX_GUARDS]))
    vh = full_tiles(h)
    assert str(vh).count("else:") == 1
    for nn in (0, 1, 6, 7):
        a = RNG.random(nn)
        want = a * MAX_GUARDS
        np.testing.assert_array_equal(_run(vh, [a], (nn,)), want)
        np.testing.assert_array_equal(_run(tighten_loops(vh), [a], (nn,)), want)
        np.testing.assert_array_equal(_run(g, [a], (nn,)), a * (MAX_GUARDS + 1))


# ------------------------------------------------------------------ semantics
SEM_CASES = [
    ("ew1_split", ew1_graph, s_ew1_split, [(0,), (1,), (7,), (8,), (9,), (16,), (23,)]),
    ("ew1_parallel", ew1_graph, s_ew1_parallel, [(0,), (1,), (5,), (11,)]),
    ("ew2_tile", ew2_graph, s_ew2_tile, [(0, 3), (3, 0), (1, 1), (4, 8), (5, 9), (8, 16), (9, 7)]),
    ("ew2_tile_unroll", ew2_graph, s_ew2_tile_unroll, [(0, 0), (1, 1), (4, 8), (7, 13), (12, 17)]),
    ("rowsum_split", lambda: rowsum_graph(F64), split_only, [(0, 5), (5, 0), (1, 1), (32, 16), (33, 17), (40, 35)]),
    ("rowsum_default", lambda: rowsum_graph(F64), lambda s: None, [(0, 3), (3, 4)]),
]


def _ref(name, a):
    if name.startswith("ew1"):
        return a * 3
    if name.startswith("ew2"):
        return a * 2
    return a.sum(axis=1)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("case", SEM_CASES, ids=lambda c: c[0])
def test_semantics_vs_numpy(case, variant):
    name, graph, sched, shapes = case
    f = VARIANTS[variant](_lower(graph(), sched))
    verify(f)
    for shape in shapes:
        a = RNG.standard_normal(shape)
        want = _ref(name, a)
        got = _run(f, [a], want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        # a strided view (the interpreter reads through the buffer's strides)
        if a.ndim == 2:
            big = RNG.standard_normal((shape[0], 2 * shape[1]))
            v = big[::-1, ::2]
            np.testing.assert_allclose(_run(f, [v], want.shape), _ref(name, v), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("shape", [(0, 0, 0), (1, 1, 1), (3, 2, 4), (6, 3, 8), (7, 5, 9), (13, 1, 3),
                                   (2, 0, 5)])
def test_gemm_block_semantics(variant, shape):
    nn, kk, mm = shape
    f = VARIANTS[variant](_lower(matmul_graph(F64), s_mm_block))
    verify(f)
    a, b = RNG.standard_normal((nn, kk)), RNG.standard_normal((kk, mm))
    np.testing.assert_allclose(_run(f, [a, b], (nn, mm)), a @ b, rtol=1e-12, atol=1e-12)
