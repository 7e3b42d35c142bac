"""Interval bounds, access regions and their unions."""
import random

import pytest

from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.bounds import Unbounded, bound, region, union_region
from kdsl.ir.evaluate import eval_expr
from kdsl.ir.printer import format_expr

B = n.BinOp
i, j, k, nv, mv = (n.var(x) for x in ("i", "j", "k", "n", "m"))


def R(lo, ext):
    return n.Range(mk.as_expr(lo), mk.as_expr(ext))


def b(op, x, y):
    return n.Binary(dt.index, op, mk.as_expr(x), mk.as_expr(y))


def fb(e, ranges=None):
    return tuple(format_expr(x) for x in bound(e, ranges))


def test_affine_constant_ranges():
    rng = {i: R(0, 8), j: R(2, 4)}
    assert fb(b(B.ADD, b(B.MUL, i, 4), j), rng) == ("2", "33")
    assert fb(b(B.SUB, j, i), rng) == ("-5", "5")
    assert fb(b(B.MUL, i, -2), rng) == ("-14", "0")
    assert fb(i) == ("i", "i")     # no range: its own bound


def test_symbolic_ranges():
    rng = {i: R(0, nv)}
    assert fb(i, rng) == ("0", "n - 1")
    assert fb(b(B.SUB, i, nv), rng) == ("-n", "-1")
    io, ii = n.var("i.outer"), n.var("i.inner")
    rng = {io: R(0, mk.ceildiv(nv, 32)), ii: R(0, 32)}
    assert fb(b(B.ADD, b(B.MUL, io, 32), ii), rng) == ("0", "ceildiv(n, 32)*32 - 1")
    # a range that mentions another ranged var: eliminated in dependency order
    rng = {i: R(0, 8), k: R(i, 4)}
    assert fb(k, rng) == ("0", "10")
    assert fb(b(B.SUB, k, i), rng) == ("0", "3")


def test_divmod_minmax_select_cast():
    rng = {i: R(0, 10), j: R(-5, 10)}
    assert fb(b(B.FLOORDIV, i, 4), rng) == ("0", "2")
    assert fb(b(B.FLOORDIV, j, 4), rng) == ("-2", "1")
    assert fb(b(B.MOD, i, 4), rng) == ("0", "3")
    assert fb(b(B.MOD, i, 16), rng) == ("0", "9")
    assert fb(b(B.MOD, b(B.ADD, i, 20), 32), rng) == ("20", "29")
    assert fb(b(B.MIN, i, 5), rng) == ("0", "5")
    assert fb(b(B.MAX, j, i), rng) == ("0", "9")
    sel = n.Select(dt.index, mk.lt(i, j), i, b(B.ADD, j, 100))
    assert fb(sel, rng) == ("0", "104")
    assert fb(n.Cast(dt.index, n.Cast(dt.int32, i)), rng) == ("0", "9")
    assert fb(n.Cast(dt.index, mk.lt(i, j)), rng) == ("0", "1")
    assert fb(b(B.MUL, i, j), rng) == ("-45", "36")
    assert fb(n.Unary(dt.index, n.UnOp.ABS, j), rng) == ("0", "5")
    assert fb(b(B.FLOORDIV, i, nv), {i: R(0, 10), nv: (1, None)}) == ("0", "9")


def test_products_with_symbolic_factor():
    assert fb(b(B.MUL, i, mv), {i: R(0, nv), mv: (1, None)}) == ("0", "(n - 1)*m")
    lo, hi = fb(b(B.MUL, i, mv), {i: R(0, nv)})    # sign of m unknown: both corners kept
    assert lo == "min(0, (n - 1)*m)" and hi == "max(0, (n - 1)*m)"


def test_unbounded():
    A = n.Buffer("A", dt.index, (nv,))
    with pytest.raises(Unbounded, match="bound for A"):
        bound(n.Load(dt.index, A, (i,)))
    with pytest.raises(Unbounded):
        bound(b(B.FLOORDIV, i, j), {i: R(0, 4), j: R(-3, 6)})     # divisor sign unknown
    # vars without a range are their own bound, whatever the operator
    assert bound(b(B.FLOORDIV, i, j)) == (b(B.FLOORDIV, i, j),) * 2
    with pytest.raises(ValueError):    # Unbounded is a ValueError too
        bound(n.Cast(dt.index, n.Var(dt.float32, "x")))
    A8 = n.Buffer("A8", dt.uint8, (nv,))
    lo, hi = bound(n.Cast(dt.index, n.Load(dt.uint8, A8, (i,))))
    assert (lo.value, hi.value) == (0, 255)


def test_region_and_union():
    rng = {i: R(0, 4), j: R(0, nv)}
    reg = region((b(B.ADD, i, 1), b(B.MUL, j, 2)), rng)
    assert [(format_expr(r.min), format_expr(r.extent)) for r in reg] == [
        ("1", "4"), ("0", "n*2 - 1")]
    r1, r2 = [R(0, 4), R(nv, 2)], [R(2, 6), R(nv, 3)]
    u = union_region(r1, r2)
    assert [(format_expr(r.min), format_expr(r.extent)) for r in u] == [("0", "8"), ("n", "3")]
    u = union_region([R(0, 4)], [R(mv, 4)])      # unordered: symbolic min/max
    assert format_expr(u[0].min) == "min(0, m)"
    with pytest.raises(ValueError):
        union_region(r1, r2[:1])


@pytest.mark.parametrize("seed", range(3))
def test_random_bounds_contain_values(seed):
    """Soundness: every sampled value lies within the computed bounds."""
    import sys
    import os
    sys.path.insert(0, os.path.dirname(__file__))
    from test_ir_simplify import RANGES, _Gen, _envs
    rnd = random.Random(100 + seed)
    gen = _Gen(rnd)
    checked = 0
    for _ in range(100):
        e = gen.expr(3)
        try:
            lo, hi = bound(e, RANGES)
        except Unbounded:
            continue
        checked += 1
        for env in _envs(rnd, 10):
            v = eval_expr(e, env)
            assert eval_expr(lo, env) <= v <= eval_expr(hi, env), (
                f"{format_expr(e)} in [{format_expr(lo)}, {format_expr(hi)}] at "
                f"{({x.name: y for x, y in env.items()})} = {v}")
    assert checked > 50
