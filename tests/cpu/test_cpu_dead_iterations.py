"""Chunk loops stop at their first dead iteration (kdsl_cpu/passes/dead_iterations.py, used by
tighten_loops): the bound ``dead_from`` gives is checked by brute force against the guards it
reads; it refuses bodies it cannot prove dead; the default matmul with run-time M runs only the
row blocks that exist (the 3.6x M = 16 regression) and stays exact for M around the blocks."""
import itertools

import numpy as np
import pytest

import kdsl as kd
from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import simplify
from kdsl.ir.visitor import collect, substitute
from kdsl_cpu.passes.dead_iterations import dead_from

I = dt.index
x, y, N, q = (n.Var(I, name) for name in ("x", "y", "N", "q"))
BUF = n.Buffer("t", dt.float32, (mk.as_expr(64, I),), scope=n.Scope.LOCAL)


def _store():
    return n.Store(BUF, (mk.as_expr(0, I),), n.Const(dt.float32, 1.0))


def _value(e, env):
    got = simplify(substitute(e, {v: mk.as_expr(val, I) for v, val in env.items()}))
    assert isinstance(got, n.Const), got
    return got.value


def _guarded(cond, inner_loop=True):
    body = n.IfThenElse(cond, _store())
    return n.For(y, mk.as_expr(0, I), mk.as_expr(6, I), n.ForKind.UNROLLED, body) if inner_loop else body


def _body():
    """The packed GEMM's chunk body: a row-guarded tile init, a full/edge if, the guarded update."""
    rows = mk.lt(mk.add(mk.add(mk.mul(q, 192), mk.mul(x, 6)), y), N)
    full = n.Compare(dt.bool_, n.CmpOp.LE, mk.as_expr(6, I),
                     mk.sub(mk.sub(N, mk.mul(q, 192)), mk.mul(x, 6)))
    update = mk.lt(mk.add(mk.mul(q, 32), x), mk.ceildiv(N, 6))
    return n.Seq((_guarded(rows), n.IfThenElse(full, _store(), _guarded(rows)),
                  n.IfThenElse(update, _store())))


def test_dead_from_is_a_sound_bound_by_brute_force():
    body = _body()
    X = dead_from(body, x)
    assert isinstance(X, n.Expr)
    conds = [c.cond for c in collect(body, lambda s: type(s) is n.IfThenElse)]
    for Nv, qv in itertools.product((0, 1, 5, 6, 7, 13, 191, 192, 193, 250), (0, 1)):
        env = {N: Nv, q: qv}
        lim = _value(X, env)
        live = [xv for xv in range(46) if any(
            _value(c, {**env, x: xv, y: yv})
            for yv in (0, 5) for c in conds)]
        # every iteration with an effect runs; the bound is tight for the update's guard
        assert all(xv < lim for xv in live), (Nv, qv, lim, live)
        assert lim <= max(live, default=-1) + 1 or lim <= 0


@pytest.mark.parametrize("body", [
    n.Seq((_store(), _guarded(mk.lt(x, N)))),                                # unguarded store
    _guarded(mk.lt(mk.sub(x, y), N)),                                        # -y: not >= 0
    _guarded(mk.lt(mk.mul(x, x), N)),                                        # x*x: not linear
    _guarded(mk.lt(mk.sub(N, x), 3)),                                        # true for large x
    _guarded(mk.lt(mk.add(x, n.Load(I, n.Buffer("b", I, (mk.as_expr(4, I),)), (mk.as_expr(0, I),))), N)),
    n.LetStmt(y, x, _guarded(mk.lt(x, N), inner_loop=False)),               # a let: refused
])
def test_dead_from_refuses_what_it_cannot_prove(body):
    assert dead_from(n.Seq((body, n.IfThenElse(mk.lt(x, N), _store()))), x) is None


def _chunk_loops(func):
    return [s for s in collect(func.body, lambda s: type(s) is n.For)
            if s.var.name == "i0.outer.inner"]


def test_default_matmul_runs_only_the_row_blocks_that_exist():
    """Regression: with M known only at run time the chunk loop of the K-block ran all 32 register
    blocks (29 dead ones for M = 16: 17.9 vs 67 GFLOP/s on the 2-core box)."""
    mm = kd.kernel(lambda A, B: A @ B)
    func = mm.lower(np.ones((16, 8), np.float32), np.ones((8, 8), np.float32), backend="cpu")
    loops = _chunk_loops(func)
    assert loops and all(not isinstance(s.extent, n.Const) for s in loops)


@pytest.mark.parametrize("m", [0, 1, 5, 6, 7, 16, 191, 192, 193, 205])
def test_default_matmul_exact_around_the_blocks(m):
    rng = np.random.default_rng(m)
    mm = kd.kernel(lambda A, B: A @ B)
    A = rng.standard_normal((m, 37)).astype(np.float32)
    B = rng.standard_normal((37, 70)).astype(np.float32)
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(mm(A, B, backend="cpu"), want, rtol=1e-4, atol=1e-4)
    As = rng.standard_normal((m, 2 * 37)).astype(np.float32)[:, ::2]   # strided view
    np.testing.assert_allclose(mm(As, B, backend="cpu"), As.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
