"""The simplifier: one test per rule, identity when unchanged, and a randomized value check."""
import random

import numpy as np
import pytest

from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.evaluate import eval_expr
from kdsl.ir.printer import format_expr, format_stmt
from kdsl.ir.simplify import prove, simplify, simplify_stmt

B, C = n.BinOp, n.CmpOp
i, j, k, nv, mv = (n.var(x) for x in ("i", "j", "k", "n", "m"))
io, ii = n.var("i.outer"), n.var("i.inner")
Z = n.const(0)


def R(lo, ext):
    return n.Range(mk.as_expr(lo), mk.as_expr(ext))


def b(op, x, y, d=dt.index):
    return n.Binary(d, op, mk.as_expr(x, d), mk.as_expr(y, d))


def s(e, ranges=None):
    return format_expr(simplify(e, ranges))


# ----------------------------------------------------------------- linear form
def test_linear_merge_and_cancel():
    assert s(b(B.SUB, b(B.ADD, b(B.ADD, i, j), 5), b(B.ADD, j, i))) == "5"
    assert s(b(B.ADD, b(B.MUL, i, 2), b(B.MUL, i, 3))) == "i*5"
    assert s(b(B.MUL, b(B.ADD, i, 1), 4)) == "i*4 + 4"
    assert s(b(B.ADD, b(B.SUB, Z, i), nv)) == "n - i"
    assert s(b(B.SUB, Z, i)) == "-i"
    assert s(b(B.SUB, 5, b(B.ADD, i, j))) == "5 - i - j"
    assert s(b(B.SUB, b(B.SUB, Z, i), 3)) == "-i - 3"
    # structurally equal non-linear terms merge too
    assert s(b(B.ADD, b(B.MUL, i, j), b(B.MUL, i, j))) == "i*j*2"
    assert s(b(B.SUB, b(B.FLOORDIV, i, nv), b(B.FLOORDIV, i, nv))) == "0"


def test_unchanged_returns_same_object():
    for e in (b(B.ADD, b(B.MUL, io, 32), ii), b(B.FLOORDIV, i, 4), b(B.MOD, i, nv),
              mk.lt(b(B.ADD, b(B.MUL, io, 32), ii), nv), b(B.MIN, i, j), nv, n.const(3),
              n.Load(dt.float32, n.Buffer("A", dt.float32, (nv,)), (i,)),
              b(B.ADD, n.Var(dt.float32, "x"), 1.0, dt.float32)):
        assert simplify(e) is e, format_expr(e)
    rng = {io: R(0, mk.ceildiv(nv, 32)), ii: R(0, 32)}
    g = mk.lt(b(B.ADD, b(B.MUL, io, 32), ii), nv)
    assert simplify(g, rng) is g


def test_deterministic():
    e = b(B.ADD, b(B.MOD, b(B.ADD, j, i), 4), b(B.MUL, b(B.FLOORDIV, b(B.ADD, j, i), 4), 4))
    texts = {s(e) for _ in range(3)}
    assert texts == {"j + i"}


# ----------------------------------------------------------------- floordiv / mod
def test_floordiv_mod_split_multiple():
    rng = {ii: R(0, 32)}
    idx = b(B.ADD, b(B.MUL, io, 32), ii)
    assert s(b(B.FLOORDIV, idx, 32), rng) == "i.outer"
    assert s(b(B.MOD, idx, 32), rng) == "i.inner"
    # without a range the remainder stays, exactly
    assert s(b(B.FLOORDIV, idx, 32)) == "i.outer + i.inner // 32"
    assert s(b(B.MOD, idx, 32)) == "i.inner % 32"


def test_floordiv_mod_in_range():
    rng = {i: R(0, 8)}
    assert s(b(B.FLOORDIV, i, 8), rng) == "0"
    assert s(b(B.MOD, i, 8), rng) == "i"
    assert s(b(B.FLOORDIV, i, 4), rng) == "i // 4"
    assert s(b(B.FLOORDIV, b(B.ADD, i, 8), 8), rng) == "1"
    assert s(b(B.MOD, b(B.ADD, i, 8), 8), rng) == "i"
    # symbolic divisor: i in [0, n)
    assert s(b(B.FLOORDIV, i, nv), {i: R(0, nv)}) == "0"
    assert s(b(B.MOD, i, nv), {i: R(0, nv)}) == "i"


def test_floordiv_mod_constant_multiples():
    assert s(b(B.MOD, b(B.MUL, i, 8), 8)) == "0"
    assert s(b(B.MOD, b(B.MUL, i, 16), 8)) == "0"
    assert s(b(B.FLOORDIV, b(B.MUL, i, 16), 8)) == "i*2"
    assert s(b(B.FLOORDIV, b(B.ADD, b(B.MUL, i, 6), 4), 8)) == "(i*3 + 2) // 4"
    assert s(b(B.MOD, b(B.ADD, b(B.MUL, i, 8), 11), 8)) == "3"
    assert s(b(B.FLOORDIV, 17, 5)) == "3" and s(b(B.MOD, -7, 3)) == "2"
    assert s(b(B.FLOORDIV, i, 1)) == "i" and s(b(B.MOD, i, 1)) == "0"


def test_nested_divisions():
    assert s(b(B.FLOORDIV, b(B.FLOORDIV, i, 4), 8)) == "i // 32"
    assert s(b(B.MOD, b(B.MOD, i, 16), 8)) == "i % 8"
    assert s(b(B.MOD, b(B.MOD, i, 8), 16)) == "i % 8"   # bounds: i % 8 < 16
    assert s(b(B.FLOORDIV, b(B.MOD, i, 8), 8)) == "0"


def test_fused_index_recombines():
    f = n.var("f")
    assert s(b(B.ADD, b(B.MUL, b(B.FLOORDIV, f, 8), 8), b(B.MOD, f, 8))) == "f"
    assert s(b(B.ADD, b(B.MUL, b(B.FLOORDIV, f, mv), mv), b(B.MOD, f, mv))) == "f"


def test_negative_divisor_left_alone():
    e = b(B.FLOORDIV, i, -4)
    assert simplify(e) is e


# ----------------------------------------------------------------- min / max / compare
def test_min_max():
    rng = {i: R(0, 8)}
    assert s(b(B.MIN, i, 8), rng) == "i"
    assert s(b(B.MAX, i, 8), rng) == "8"
    assert s(b(B.MIN, i, 4), rng) == "min(i, 4)"
    assert s(b(B.MIN, i, i)) == "i"
    assert s(b(B.MAX, b(B.ADD, i, 1), i)) == "i + 1"
    assert s(b(B.MIN, i, nv), {i: R(0, nv)}) == "i"


def test_compare_by_bounds():
    rng = {io: R(0, mk.ceildiv(nv, 32)), ii: R(0, 32), i: R(0, 32)}
    assert s(mk.lt(i, 32), rng) == "True"
    assert s(mk.lt(i, 31), rng) == "i < 31"
    assert s(n.Compare(dt.bool_, C.GE, i, Z), rng) == "True"
    assert s(mk.lt(i, 0), rng) == "False"
    assert s(mk.eq(b(B.ADD, i, 1), b(B.ADD, 1, i))) == "True"
    assert s(n.Compare(dt.bool_, C.NE, i, b(B.ADD, i, 1))) == "True"
    assert s(mk.lt(b(B.ADD, b(B.MUL, io, 32), ii), nv), rng) == "i.outer*32 + i.inner < n"
    assert s(mk.lt(j, nv), {j: R(0, nv)}) == "True"
    assert s(n.Compare(dt.bool_, C.GT, j, mv), {j: R(0, nv)}) == "j > m"


def test_prove():
    rng = {i: R(0, 32)}
    assert prove(mk.lt(i, 32), rng) is True
    assert prove(mk.lt(i, 0), rng) is False
    assert prove(mk.lt(i, nv), rng) is None
    assert prove(mk.lt(i, nv), {i: R(0, nv)}) is True
    assert prove(mk.lt(i, nv), {i: (0, b(B.SUB, nv, 1))}) is True
    assert prove(mk.lt(i, 5), {i: (None, 4)}) is True
    assert prove(n.Compare(dt.bool_, C.GE, i, Z), {i: (None, 4)}) is None


# ----------------------------------------------------------------- logic, select, casts, folding
def test_logic():
    t, f = n.const(True), n.const(False)
    c = mk.lt(i, j)
    land = lambda x, y: n.Binary(dt.bool_, B.AND, x, y)  # noqa: E731
    lor = lambda x, y: n.Binary(dt.bool_, B.OR, x, y)  # noqa: E731
    assert simplify(land(c, t)) is c and simplify(land(t, c)) is c
    assert s(land(c, f)) == "False" and s(lor(c, t)) == "True"
    assert simplify(lor(f, c)) is c
    assert s(n.Unary(dt.bool_, n.UnOp.NOT, c)) == "i >= j"
    assert s(n.Unary(dt.bool_, n.UnOp.NOT, n.Unary(dt.bool_, n.UnOp.NOT, c))) == "i < j"
    assert s(land(c, c)) == "i < j"


def test_select():
    x, y = n.Var(dt.float32, "x"), n.Var(dt.float32, "y")
    assert simplify(n.Select(dt.float32, n.const(True), x, y)) is x
    assert simplify(n.Select(dt.float32, mk.lt(i, 8), x, y), {i: R(0, 8)}) is x
    assert simplify(n.Select(dt.float32, mk.lt(i, j), x, x)) is x
    e = n.Select(dt.float32, mk.lt(i, j), x, y)
    assert simplify(e) is e


def test_cast_constants():
    assert s(n.Cast(dt.int8, n.const(3))) == "int8(3)"
    assert s(n.Cast(dt.float32, n.const(3))) == "3.0f"
    assert s(n.Cast(dt.int32, n.const(-2.7))) == "int32(-2)"    # truncation, as numpy
    assert s(n.Cast(dt.int8, n.const(300))) == "int8(300)"      # not representable: kept
    assert s(n.Cast(dt.float32, n.const(0.1))) == repr(float(np.float32(0.1))) + "f"
    assert s(n.Cast(dt.bool_, n.const(2))) == "True"
    assert simplify(n.Cast(dt.index, i)) is i


def test_float_folding_exact_only():
    f32 = dt.float32
    assert s(b(B.ADD, 0.1, 0.2, f32)) == repr(float(np.float32(0.1) + np.float32(0.2))) + "f"
    assert s(b(B.ADD, 0.1, 0.2, dt.float64)) == repr(0.1 + 0.2)
    assert s(b(B.DIV, 1.0, 3.0, f32)) == repr(float(np.float32(1) / np.float32(3))) + "f"
    x = n.Var(f32, "x")
    e = b(B.ADD, b(B.ADD, x, 1.0, f32), 2.0, f32)   # never reassociated
    assert simplify(e) is e
    e = b(B.DIV, 1.0, 0.0, f32)                      # division by zero stays
    assert simplify(e) is e
    e = n.Unary(f32, n.UnOp.EXP, n.const(1.0, f32))  # libm results are not folded
    assert simplify(e) is e
    assert s(n.Unary(f32, n.UnOp.NEG, n.const(2.0, f32))) == "-2.0f"
    assert s(n.Unary(dt.index, n.UnOp.ABS, n.const(-2))) == "2"
    assert s(n.Compare(dt.bool_, C.LT, n.const(1.0, f32), n.const(2.0, f32))) == "True"


def test_narrow_int_overflow_not_folded():
    e = b(B.ADD, 100, 100, dt.int8)
    assert simplify(e) is e
    assert s(b(B.ADD, 100, 20, dt.int8)) == "int8(120)"
    assert s(n.Unary(dt.uint8, n.UnOp.NOT, n.const(0, dt.uint8))) == "uint8(255)"


def test_loads_and_children_simplified():
    A = n.Buffer("A", dt.float32, (nv, nv))
    e = n.Load(dt.float32, A, (b(B.ADD, i, 0), b(B.SUB, b(B.ADD, j, 1), 1)))
    assert s(e) == "A[i, j]"


# ----------------------------------------------------------------- randomized: values never change
class _Gen:
    """Random integer index expressions over vars with (possibly symbolic) ranges."""

    def __init__(self, rnd):
        self.r = rnd
        self.vars = [i, j, k, nv]

    def leaf(self):
        if self.r.random() < 0.7:
            return self.r.choice(self.vars)
        return n.const(self.r.randint(-9, 9))

    def expr(self, depth):
        r = self.r
        if depth == 0 or r.random() < 0.2:
            return self.leaf()
        choice = r.random()
        a = self.expr(depth - 1)
        if choice < 0.25:
            return b(r.choice([B.ADD, B.SUB]), a, self.expr(depth - 1))
        if choice < 0.4:
            return b(B.MUL, a, r.choice([n.const(r.randint(-4, 8)), self.leaf()]))
        if choice < 0.65:
            c = n.const(r.randint(1, 9)) if r.random() < 0.85 else nv
            return b(r.choice([B.FLOORDIV, B.MOD]), a, c)
        if choice < 0.75:
            return b(r.choice([B.MIN, B.MAX]), a, self.expr(depth - 1))
        if choice < 0.85:
            cond = n.Compare(dt.bool_, r.choice(list(C)), a, self.expr(depth - 1))
            return n.Select(dt.index, cond, self.expr(depth - 1), self.expr(depth - 1))
        if choice < 0.9:
            return n.Unary(dt.index, n.UnOp.NEG, a)
        return b(B.ADD, b(B.MUL, b(B.FLOORDIV, a, 4), 4), b(B.MOD, a, 4))


RANGES = {i: R(0, 8), j: R(-3, nv), k: R(i, 5)}


def _envs(rnd, count):
    for _ in range(count):
        env = {nv: rnd.randint(1, 12)}
        env[i] = rnd.randint(0, 7)
        env[j] = rnd.randint(-3, -3 + env[nv] - 1)
        env[k] = rnd.randint(env[i], env[i] + 4)
        yield env


@pytest.mark.parametrize("seed", range(4))
def test_random_expressions_keep_their_value(seed):
    rnd = random.Random(seed)
    gen = _Gen(rnd)
    for _ in range(120):
        e = gen.expr(4)
        if rnd.random() < 0.3:
            e = n.Compare(dt.bool_, rnd.choice(list(C)), e, gen.expr(2))
        got = simplify(e, RANGES)
        for env in _envs(rnd, 12):
            want = eval_expr(e, env)
            have = eval_expr(got, env)
            assert have == want, (f"{format_expr(e)}  ->  {format_expr(got)}\n"
                                  f"env {({v.name: x for v, x in env.items()})}: {want} != {have}")


# ----------------------------------------------------------------- statements
A = n.Buffer("A", dt.float32, (nv,), param=True)


def store(idx, value=1.0):
    return n.Store(A, (mk.as_expr(idx),), n.const(value, dt.float32))


def loop(v, ext, body, kind=n.ForKind.SERIAL, thread=None, lo=0):
    return n.For(v, mk.as_expr(lo), mk.as_expr(ext), kind, body, thread)


def test_stmt_if_pruning():
    t = n.IfThenElse(n.const(True), store(i))
    assert format_stmt(simplify_stmt(t)) == "A[i] = 1.0f"
    f = n.IfThenElse(n.const(False), store(i), store(j))
    assert format_stmt(simplify_stmt(f)) == "A[j] = 1.0f"
    assert simplify_stmt(n.IfThenElse(n.const(False), store(i))) == n.Seq(())
    empty_then = n.IfThenElse(mk.lt(i, j), n.Seq((n.Seq(()),)), store(j))
    assert format_stmt(simplify_stmt(empty_then)) == "if i >= j:\n  A[j] = 1.0f"


def test_stmt_loop_ranges_decide_guards():
    body = loop(i, 32, n.IfThenElse(mk.lt(i, 32), store(i)))
    assert format_stmt(simplify_stmt(body)) == "for i in range(32):\n  A[i] = 1.0f"
    body = loop(i, nv, n.IfThenElse(mk.lt(i, nv), store(i), store(j)))
    assert format_stmt(simplify_stmt(body)) == "for i in range(n):\n  A[i] = 1.0f"
    # the loop var's range does not leak outside its loop
    after = n.Seq((loop(i, 4, store(i)), n.IfThenElse(mk.lt(i, 4), store(i))))
    assert simplify_stmt(after) is after


def test_stmt_loops_extent_zero_and_one():
    assert simplify_stmt(loop(i, 0, store(i))) == n.Seq(())
    assert simplify_stmt(loop(i, b(B.SUB, nv, nv), store(i))) == n.Seq(())
    one = loop(i, 1, store(b(B.ADD, i, 1)), lo=3)
    assert format_stmt(simplify_stmt(one)) == "A[4] = 1.0f"
    bound = loop(i, 1, store(i), n.ForKind.BOUND, n.ThreadTag.THREAD_X)
    assert simplify_stmt(bound) is bound
    bound0 = loop(i, 0, store(i), n.ForKind.BOUND, n.ThreadTag.BLOCK_X)
    assert simplify_stmt(bound0) is bound0
    vec = loop(i, 1, store(i), n.ForKind.VECTORIZED)
    assert format_stmt(simplify_stmt(vec)) == "A[0] = 1.0f"


def test_stmt_nested_loops_of_extent_one_substitute_everywhere():
    """Loops of extent 1 set their var to their min in every expression below (loop bounds,
    guards, indices, a later loop's min, a let), nested ones included; the same as
    substituting into the body first (what the pass did before it substituted lazily)."""
    from kdsl.ir.visitor import substitute
    inner = n.Seq((
        n.IfThenElse(mk.lt(b(B.ADD, i, j), nv), store(b(B.ADD, b(B.MUL, i, 8), j))),
        loop(k, b(B.SUB, nv, j), n.LetStmt(mv, b(B.ADD, k, i), store(b(B.ADD, mv, j))),
             lo=b(B.ADD, i, 1)),
    ))
    nest = loop(i, 1, loop(j, 1, inner, lo=b(B.ADD, i, 2)), lo=b(B.MUL, nv, 2))
    got = simplify_stmt(nest)
    eager = simplify_stmt(substitute(substitute(inner, {i: b(B.MUL, nv, 2)}),
                                     {j: b(B.ADD, b(B.MUL, nv, 2), 2)}))
    assert format_stmt(got) == format_stmt(eager)
    import re
    text = format_stmt(got)
    assert not re.search(r"\b[ij]\b", text), text
    assert "A[n*18 + 2]" in text and "for k in range(n*2 + 1, n - 1)" in text


def test_normal_form_memo_keeps_identity_and_values():
    """Sums already in normal form come back as the caller's own object, for equal trees built
    separately too (the memo of normal forms is per node); others are rewritten each time."""
    def build():
        return b(B.ADD, b(B.ADD, b(B.MUL, i, 8), j), 3)
    e1, e2 = build(), build()
    assert simplify(e1) is e1 and simplify(e1) is e1 and simplify(e2) is e2
    messy = b(B.SUB, b(B.ADD, b(B.MUL, i, 8), b(B.MUL, j, 2)), b(B.ADD, j, i))
    r1, r2 = simplify(messy), simplify(messy)
    assert format_expr(r1) == format_expr(r2) == "i*7 + j"
    rng = random.Random(7)
    for _ in range(20):
        env = {i: rng.randint(-50, 50), j: rng.randint(-50, 50)}
        assert eval_expr(r2, env) == eval_expr(messy, env)


def test_stmt_seq_flatten_and_identity():
    nested = n.Seq((store(0), n.Seq((store(1), n.Seq(()))), n.Seq((n.Seq((store(2),)),))))
    out = simplify_stmt(nested)
    assert type(out) is n.Seq and [format_stmt(x) for x in out.stmts] == [
        "A[0] = 1.0f", "A[1] = 1.0f", "A[2] = 1.0f"]
    assert simplify_stmt(out) is out
    full = n.Allocate(n.Buffer("T", dt.float32, (n.const(4),)),
                      loop(i, 4, loop(j, nv, n.IfThenElse(mk.lt(j, b(B.SUB, nv, i)), store(j)),
                                      n.ForKind.PARALLEL)))
    assert simplify_stmt(full) is full


def test_stmt_let_bounds_used():
    x = n.var("x")
    st = loop(i, 8, n.LetStmt(x, b(B.ADD, i, 2), n.IfThenElse(mk.lt(x, 10), store(x))))
    assert format_stmt(simplify_stmt(st)) == "for i in range(8):\n  let x = i + 2\n  A[x] = 1.0f"


def test_stmt_ranges_argument():
    st = n.IfThenElse(mk.lt(i, nv), store(i))
    assert format_stmt(simplify_stmt(st, {i: R(0, nv)})) == "A[i] = 1.0f"
