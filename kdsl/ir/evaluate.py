"""Evaluate scalar expressions over Python numbers (shapes, extents, strides).

Used wherever a concrete value is needed from a symbolic one: output shapes
at call time, constraint checks, the interpreter's index arithmetic.
"""
from __future__ import annotations

import math

from ..errors import InternalCompilerError
from . import nodes as n

_BIN = {
    n.BinOp.ADD: lambda a, b: a + b,
    n.BinOp.SUB: lambda a, b: a - b,
    n.BinOp.MUL: lambda a, b: a * b,
    n.BinOp.FLOORDIV: lambda a, b: a // b,
    n.BinOp.MOD: lambda a, b: a % b,
    n.BinOp.MIN: min,
    n.BinOp.MAX: max,
    n.BinOp.DIV: lambda a, b: a / b,
    n.BinOp.POW: lambda a, b: a ** b,
    n.BinOp.AND: lambda a, b: a & b,
    n.BinOp.OR: lambda a, b: a | b,
    n.BinOp.XOR: lambda a, b: a ^ b,
    n.BinOp.SHL: lambda a, b: a << b,
    n.BinOp.SHR: lambda a, b: a >> b,
}
_CMP = {
    n.CmpOp.EQ: lambda a, b: a == b,
    n.CmpOp.NE: lambda a, b: a != b,
    n.CmpOp.LT: lambda a, b: a < b,
    n.CmpOp.LE: lambda a, b: a <= b,
    n.CmpOp.GT: lambda a, b: a > b,
    n.CmpOp.GE: lambda a, b: a >= b,
}


def eval_expr(e: n.Expr, env: dict):
    """The Python value of a scalar expression without loads (``env``: Var -> value)."""
    t = type(e)
    if t is n.Const:
        return e.value
    if t is n.Var:
        try:
            return env[e]
        except KeyError:
            raise InternalCompilerError(f"no value for variable {e.name}") from None
    if t is n.Binary:
        return _BIN[e.op](eval_expr(e.a, env), eval_expr(e.b, env))
    if t is n.Compare:
        return _CMP[e.op](eval_expr(e.a, env), eval_expr(e.b, env))
    if t is n.Select:
        return eval_expr(e.t, env) if eval_expr(e.cond, env) else eval_expr(e.f, env)
    if t is n.Cast:
        v = eval_expr(e.a, env)
        if e.dtype.is_bool:
            return bool(v)
        return int(v) if e.dtype.is_int else float(v)
    if t is n.Unary and e.op is n.UnOp.NEG:
        return -eval_expr(e.a, env)
    if t is n.Unary and e.op is n.UnOp.ABS:
        return abs(eval_expr(e.a, env))
    if t is n.Unary and e.op in (n.UnOp.FLOOR, n.UnOp.CEIL):
        f = math.floor if e.op is n.UnOp.FLOOR else math.ceil
        return float(f(eval_expr(e.a, env)))
    raise InternalCompilerError(f"cannot evaluate {t.__name__} as a scalar")
