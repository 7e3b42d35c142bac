"""Expression constructors with dtype checks and light constant folding.

The frontend decides dtypes (numpy promotion) and inserts casts; these
helpers only check that operands agree and fold what is obviously constant,
so that lowered index arithmetic stays readable.  Index helpers (``add``,
``mul``...) accept Python ints.
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import InternalCompilerError
from . import nodes as n


def as_expr(x, dtype: dt.DType | None = None) -> n.Expr:
    if isinstance(x, n.Expr):
        return x if dtype is None or x.dtype is dtype else cast(x, dtype)
    return n.const(x, dtype)


def is_const(e, value=None) -> bool:
    return isinstance(e, n.Const) and (value is None or e.value == value)


def _fold(op: n.BinOp, a, b, dtype):
    if op is n.BinOp.ADD:
        return a + b
    if op is n.BinOp.SUB:
        return a - b
    if op is n.BinOp.MUL:
        return a * b
    if op is n.BinOp.MIN:
        return min(a, b)
    if op is n.BinOp.MAX:
        return max(a, b)
    if dtype.is_int and b != 0:
        if op is n.BinOp.FLOORDIV:
            return a // b
        if op is n.BinOp.MOD:
            return a % b
    return None


def binary(op: n.BinOp, a, b) -> n.Expr:
    """``a op b``; operands must share a dtype (the result's)."""
    a = as_expr(a, b.dtype if isinstance(b, n.Expr) and not isinstance(a, n.Expr) else None)
    b = as_expr(b, a.dtype)
    if a.dtype is not b.dtype:
        raise InternalCompilerError(f"binary {op.value} on {a.dtype} and {b.dtype}")
    if isinstance(a, n.Const) and isinstance(b, n.Const) and (a.dtype.is_int or a.dtype.is_bool):
        v = _fold(op, a.value, b.value, a.dtype)
        if v is not None:
            return n.const(v, a.dtype)
    if a.dtype.is_int:
        if op is n.BinOp.ADD:
            if is_const(a, 0):
                return b
            if is_const(b, 0):
                return a
        elif op is n.BinOp.SUB and is_const(b, 0):
            return a
        elif op is n.BinOp.MUL:
            if is_const(a, 1):
                return b
            if is_const(b, 1):
                return a
            if is_const(a, 0) or is_const(b, 0):
                return n.const(0, a.dtype)
        elif op is n.BinOp.FLOORDIV and is_const(b, 1):
            return a
        elif op is n.BinOp.MOD and is_const(b, 1):
            return n.const(0, a.dtype)
    return n.Binary(a.dtype, op, a, b)


def compare(op: n.CmpOp, a, b) -> n.Expr:
    a = as_expr(a, b.dtype if isinstance(b, n.Expr) and not isinstance(a, n.Expr) else None)
    b = as_expr(b, a.dtype)
    if a.dtype is not b.dtype:
        raise InternalCompilerError(f"compare {op.value} on {a.dtype} and {b.dtype}")
    return n.Compare(dt.bool_, op, a, b)


def unary(op: n.UnOp, a: n.Expr) -> n.Expr:
    return n.Unary(dt.bool_ if op is n.UnOp.ISNAN else a.dtype, op, a)


def select(cond, t, f) -> n.Expr:
    if t.dtype is not f.dtype:
        raise InternalCompilerError(f"select between {t.dtype} and {f.dtype}")
    if isinstance(cond, n.Const):
        return t if cond.value else f
    return n.Select(t.dtype, cond, t, f)


def cast(e: n.Expr, dtype: dt.DType) -> n.Expr:
    if e.dtype is dtype:
        return e
    if isinstance(e, n.Const):
        v = e.value
        if dtype.is_bool:
            return n.const(bool(v), dtype)
        if dtype.is_int and not (isinstance(v, float) and not math.isfinite(v)):
            if e.dtype.is_float:
                return n.Cast(dtype, e)
            return n.const(int(v), dtype) if dt.can_cast_value(int(v), dtype) else n.Cast(dtype, e)
        if dtype.is_float and dtype.bits == 64:
            return n.const(float(v), dtype)
    return n.Cast(dtype, e)


def logical_and(a, b) -> n.Expr:
    if a is None:
        return b
    if b is None:
        return a
    if is_const(a, True):
        return b
    if is_const(b, True):
        return a
    return n.Binary(dt.bool_, n.BinOp.AND, a, b)


def all_of(conds) -> n.Expr | None:
    out = None
    for c in conds:
        out = logical_and(out, c)
    return out


# index arithmetic shorthands
def add(a, b):
    return binary(n.BinOp.ADD, a, b)


def sub(a, b):
    return binary(n.BinOp.SUB, a, b)


def mul(a, b):
    return binary(n.BinOp.MUL, a, b)


def floordiv(a, b):
    return binary(n.BinOp.FLOORDIV, a, b)


def mod(a, b):
    return binary(n.BinOp.MOD, a, b)


def min_(a, b):
    return binary(n.BinOp.MIN, a, b)


def max_(a, b):
    return binary(n.BinOp.MAX, a, b)


def ceildiv(a, b):
    """ceil(a / b) for b > 0, as floordiv(a + b - 1, b)."""
    if is_const(b, 1):
        return as_expr(a)
    return floordiv(add(a, sub(b, 1)), b)


def lt(a, b):
    return compare(n.CmpOp.LT, a, b)


def eq(a, b):
    return compare(n.CmpOp.EQ, a, b)
