"""Conditions on stage axes written with Python operators (for ``set_store_predicate``).

``C.set_store_predicate(C.axes[0] * 2 + C.axes[1] < 10)``: arithmetic on
IterVars (``+ - * // %`` with ints, index expressions and other axes),
comparisons (``< <= > >=``; ``== !=`` once one side is an expression, since
``==`` between two IterVars compares the objects) and ``& | ~`` on conditions
build an ``AxisExpr``, which wraps the index expression it stands for.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import ScheduleError
from . import make as mk
from . import nodes as n

_EXAMPLE = "e.g. C.set_store_predicate(lambda i, j: i * 2 + j < 10, C.axes[0], C.axes[1])"


def _operand(x, what: str) -> n.Expr:
    """The index expression of ``x`` (an axis, an AxisExpr, an int or an index expression)."""
    if isinstance(x, AxisExpr):
        return x.expr
    if isinstance(x, n.IterVar):
        return x.var
    if isinstance(x, n.Expr) and (x.dtype.is_int or x.dtype.is_bool):
        return x
    if isinstance(x, bool):
        raise ScheduleError(f"an axis condition got the Python bool {x} next to {what}: == and != between an "
                            "axis and a number compare the objects", hint=_EXAMPLE.replace("<", "=="))
    if isinstance(x, int):
        return n.const(x, dt.index)
    raise ScheduleError(f"an axis condition cannot use {what} with {type(x).__name__} {x!r}: axes are integers",
                        hint=f"combine axes with ints only, {_EXAMPLE}")


def _int(e: n.Expr, what: str) -> n.Expr:
    if not e.dtype.is_int:
        raise ScheduleError(f"{what} takes integer axis expressions, not a condition",
                            hint=f"combine conditions with & | ~, {_EXAMPLE}")
    return e if e.dtype is dt.index else mk.cast(e, dt.index)


def _bool(e: n.Expr, what: str) -> n.Expr:
    if not e.dtype.is_bool:
        raise ScheduleError(f"{what} combines conditions; got an integer axis expression",
                            hint=f"compare it first, {_EXAMPLE}")
    return e


def arith(op: n.BinOp, a, b) -> "AxisExpr":
    """``a op b`` on index expressions (either may be an IterVar, an AxisExpr or an int)."""
    if op is n.BinOp.DIV:
        raise ScheduleError("/ on axes is true division; axes are integers", hint="use // (floor division)")
    return AxisExpr(mk.binary(op, _int(_operand(a, op.value), op.value), _int(_operand(b, op.value), op.value)))


def compare(op: n.CmpOp, a, b) -> "AxisExpr":
    return AxisExpr(mk.compare(op, _int(_operand(a, op.value), op.value), _int(_operand(b, op.value), op.value)))


def logical(op: n.BinOp, a, b) -> "AxisExpr":
    return AxisExpr(n.Binary(dt.bool_, op, _bool(_operand(a, op.value), op.value), _bool(_operand(b, op.value),
                                                                                          op.value)))


class AxisExpr:
    """An index expression or condition over stage axes (``.expr``), built with operators."""

    __slots__ = ("expr",)

    def __init__(self, expr: n.Expr):
        self.expr = expr

    def __invert__(self):
        return AxisExpr(n.Unary(dt.bool_, n.UnOp.NOT, _bool(self.expr, "~")))

    __hash__ = None

    def __bool__(self):
        raise ScheduleError("an axis condition has no Python truth value (and/or/not and chained comparisons "
                            "such as 0 < i < 4 ask for one)", hint=f"use & | ~ and parentheses, {_EXAMPLE}")

    def __repr__(self) -> str:
        return f"AxisExpr({self.expr!r})"


_BUILDERS = {"arith": arith, "compare": compare, "logical": logical}
#: what only expressions have: == and != (on IterVars they stay identity), & | on conditions
_EXPR_ONLY = {"__eq__": ("compare", n.CmpOp.EQ, False), "__ne__": ("compare", n.CmpOp.NE, False),
              "__and__": ("logical", n.BinOp.AND, False), "__rand__": ("logical", n.BinOp.AND, True),
              "__or__": ("logical", n.BinOp.OR, False), "__ror__": ("logical", n.BinOp.OR, True)}


def _method(how, op, swap):
    build = _BUILDERS[how]
    if swap:
        return lambda self, o=0: build(op, o, self)
    return lambda self, o: build(op, self, o)


for _name, _spec in {**n.AXIS_OPERATORS, **_EXPR_ONLY}.items():
    setattr(AxisExpr, _name, _method(*_spec))
