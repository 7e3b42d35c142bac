"""Guard conditions read as a loop pass needs them: the conjuncts of a chain of ands, and the
limit ``N - c`` that a guard ``var + c < N`` puts on a loop variable (tightening loops,
versioning full tiles, vector copies in codegen)."""
from __future__ import annotations

from . import make as mk
from . import nodes as n
from .simplify import Linear, linear
from .visitor import uses_var


def conjuncts(c: n.Expr) -> list:
    """The terms of a chain of logical ands."""
    if type(c) is n.Binary and c.op is n.BinOp.AND and c.dtype.is_bool:
        return conjuncts(c.a) + conjuncts(c.b)
    return [c]


def guard_limit(cond: n.Expr, var: n.Var):
    """``N - c`` when ``cond`` is ``var + c < N`` (``<=``: ``N - c + 1``), else None."""
    if type(cond) is not n.Compare or cond.op not in (n.CmpOp.LT, n.CmpOp.LE):
        return None
    if not cond.a.dtype.is_int or uses_var(cond.b, var):
        return None
    lin = linear(cond.a)
    if lin.terms.get(var) != 1:
        return None
    rest = {t: k for t, k in lin.terms.items() if t is not var}
    if any(uses_var(t, var) for t in rest):
        return None
    c = Linear(lin.dtype, rest, lin.const).to_expr()
    lim = mk.sub(cond.b, c)
    return mk.add(lim, 1) if cond.op is n.CmpOp.LE else lim


__all__ = ["conjuncts", "guard_limit"]
