"""A compact infix printer for size expressions in error messages."""
from __future__ import annotations

from ..ir import nodes as n

_PREC = {n.BinOp.ADD: 1, n.BinOp.SUB: 1, n.BinOp.MUL: 2, n.BinOp.FLOORDIV: 2, n.BinOp.MOD: 2,
         n.BinOp.DIV: 2}


def expr_str(e, prec: int = 0) -> str:
    """``n - 2``, ``min(a, b)``... (only what size expressions use; others by class name)."""
    if isinstance(e, n.Const):
        return repr(e.value)
    if isinstance(e, n.Var):
        return e.name
    if isinstance(e, n.Binary):
        p = _PREC.get(e.op)
        if p is None:
            return f"{e.op.value}({expr_str(e.a)}, {expr_str(e.b)})"
        text = f"{expr_str(e.a, p)} {e.op.value} {expr_str(e.b, p + 1)}"
        return f"({text})" if p < prec else text
    if isinstance(e, n.Cast):
        return expr_str(e.a, prec)
    return type(e).__name__
