"""Dead trailing iterations: the first value of a loop variable past which a body does nothing.

A constant-extent chunk loop over register blocks (the packed GEMM's ``MC`` blocks of
``MR`` rows) whose last chunk is partial runs its dead iterations through whole guarded
nests: a local tile's init and its reduction loop test, at every step, rows that are all past
the array's end (M = 16 with MC = 32 blocks of 6 rows: 29 dead blocks, 3.6x slower than
with M known).  The loop's body is a sequence, not one guarded ``if``, so ``tighten_loops``'
rule does not apply; ``dead_from`` proves, statement by statement, that each one does nothing
once ``x >= X``, and ``tighten_loops`` then runs the loop to ``min(extent, X - min)``.

A statement is dead from ``X`` when every store it makes sits under a condition with a
conjunct ``k*x + sum(b_j*y_j) + c < 0`` (or ``<=``, ``>``, ``>=`` rewritten so), ``k > 0``,
``y_j`` loop variables of loops inside the body with constant minimum >= 0 and ``b_j >= 0``,
``c`` free of ``x``, of the body's loop and let variables and of loads: such a conjunct is
false for every ``x >= ceildiv(-c, k)``.  Anything else (a store outside such a guard, a
let, a call) gives None: the loop is left alone.
"""
from __future__ import annotations

from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.conditions import conjuncts
from kdsl.ir.simplify import Linear, linear
from kdsl.ir.visitor import collect, free_vars, uses_var

_FLIP = {n.CmpOp.GT: n.CmpOp.LT, n.CmpOp.GE: n.CmpOp.LE}


def _false_from(cond: n.Expr, var: n.Var, inner: set):
    """X such that ``cond`` is false for every ``var >= X`` (given ``inner`` vars >= 0), or None."""
    if type(cond) is not n.Compare or not cond.a.dtype.is_int or not cond.a.dtype.is_signed:
        return None
    a, b, op = cond.a, cond.b, cond.op
    if op in _FLIP:
        a, b, op = b, a, _FLIP[op]
    if op not in (n.CmpOp.LT, n.CmpOp.LE) or a.dtype != b.dtype:
        return None
    d = linear(a).add(linear(b), -1)          # cond: d < 0  (LE: d <= 0, i.e. d - 1 < 0)
    if op is n.CmpOp.LE:
        d = d.add(Linear(d.dtype, const=1), -1)
    k = d.terms.get(var)
    if not isinstance(k, int) or k <= 0:
        return None
    rest = {}
    for t, coef in d.terms.items():
        if t is var:
            continue
        if t in inner:
            if coef < 0:
                return None
            continue                        # >= 0: dropping it only lowers d
        if uses_var(t, var) or free_vars(t) & inner or collect(t, lambda e: isinstance(e, n.Load)):
            return None
        rest[t] = coef
    c = Linear(d.dtype, rest, d.const).to_expr()
    return mk.ceildiv(mk.sub(mk.as_expr(0, c.dtype), c), k)


def _join(a, b):
    if a is None or b is None:
        return None
    return b if a is True else a if b is True else mk.max_(a, b)


def dead_from(s: n.Stmt, var: n.Var, inner: set = frozenset()):
    """X (an Expr) such that ``s`` has no effect when ``var >= X``; True when it never has
    one; None when no such X is found (see the module docstring)."""
    t = type(s)
    if t is n.Seq:
        out = True
        for x in s.stmts:
            out = _join(out, dead_from(x, var, inner))
            if out is None:
                return None
        return out
    if t is n.For:
        if s.kind is n.ForKind.BOUND or not (isinstance(s.min, n.Const) and s.min.value >= 0):
            return None
        return dead_from(s.body, var, inner | {s.var})
    if t is n.Allocate:
        return dead_from(s.body, var, inner)
    if t is n.IfThenElse:
        then = None
        for c in conjuncts(s.cond):
            then = _false_from(c, var, inner)
            if then is not None:
                break
        if then is None:
            then = dead_from(s.then, var, inner)
        other = True if s.otherwise is None else dead_from(s.otherwise, var, inner)
        return _join(then, other)
    return None        # stores, lets, calls, barriers: effects this proof does not follow
