"""numpy 2's value-based rules for Python integers meeting integer arrays.

NEP 50 makes Python ints weak: ``uint8_array + 3`` stays uint8, and a Python
int the type cannot hold is an OverflowError, never a wrapped value.  Here:

- comparisons are by value (``uint8_array < -1`` is all False, ``== 300`` too),
  for literals at trace time and for values known at call time (scalar
  arguments, sizes, indices) by comparing in a type that holds both;
- ``np.clip`` drops an integer bound beyond the type on the side where it
  clips nothing (``clip(uint8_array, -1, 3)``);
- a scalar argument or size that meets a narrower integer type is checked at
  every call (``require_fits``), as numpy checks the Python int it would be;
- an integer to a negative integer power is a ValueError: checked at every
  call for a scalar-argument exponent (``nonnegative_exponent``).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import IntegerOverflowError, KernelValueError, user_location
from ..graph import Constraint
from ..ir import make as mk
from ..ir import nodes as n
from . import context
from .array import Array
from .ops import _COMPARE, asarray, cast_to, common_dtype, elementwise, maximum, minimum

B, C = n.BinOp, n.CmpOp


# ------------------------------------------------------------------ call-time checks
def _runtime_int(a: Array):
    """The expression of a weak integer known only at call time (a scalar argument or a size),
    or None: such a value must fit the integer type it meets, as a Python int must in numpy."""
    if not (a.weak and a.pyvalue is None and a.iv is None and a.ndim == 0 and a.dtype.is_int):
        return None
    e = a.at(())
    return e if isinstance(e, n.Var) else None


def require_fits(a: Array, d: dt.DType, what: str) -> None:
    """A call-time check that the runtime weak int ``a`` fits ``d`` (numpy: OverflowError)."""
    e = _runtime_int(a)
    if e is None:
        return
    info = np.iinfo(d.np)
    lo, hi = int(info.min), min(int(info.max), dt.INT64_MAX)
    ok = mk.compare(C.GE, e, n.const(lo, e.dtype))
    if hi < dt.INT64_MAX:
        ok = mk.binary(B.AND, ok, mk.compare(C.LE, e, n.const(hi, e.dtype)))
    _call_check(ok, f"{e.name} is out of bounds for {d.name} (in {what}; numpy raises "
                    f"OverflowError for a Python integer that does not fit); pass a value in "
                    f"[{lo}, {int(info.max)}] or cast the array to a wider type first",
                IntegerOverflowError)


def _call_check(ok: n.Expr, message: str, error) -> None:
    """Check ``ok`` (over scalar arguments and sizes) at every call of the kernel."""
    ctx = context.current()
    ctx.constraints.append(Constraint(ok, n.const(True), message, user_location(), error))



# ------------------------------------------------------------------ comparisons
#: the result of ``x op v`` for every x when v lies above (True) / below (False) x's range
_OUTSIDE = {True: {C.LT: True, C.LE: True, C.NE: True, C.GT: False, C.GE: False, C.EQ: False},
            False: {C.LT: False, C.LE: False, C.NE: True, C.GT: True, C.GE: True, C.EQ: False}}
_SWAP = {C.LT: C.GT, C.LE: C.GE, C.GT: C.LT, C.GE: C.LE, C.EQ: C.EQ, C.NE: C.NE}


def compare(name: str, a, b, strong: bool = True) -> Array:
    """numpy 2's comparison ufuncs: an integer array meets a Python integer by value
    (``uint8_array < -1`` is all False, ``== 300`` too), never through a wrapped value.
    ``strong=False`` (an operator): two weak operands give a weak bool, like Python's."""
    op = _COMPARE[name]
    for lit, other, flip in ((b, a, False), (a, b, True)):
        v = _literal_int(lit)
        if v is not None:
            arr = asarray(other)
            ct = _int_compare_type(arr)
            if ct is not None and not dt.can_cast_value(v, ct):
                if arr.dtype.is_bool:   # numpy compares bools with ints in int64
                    raise IntegerOverflowError(f"Python integer {v} out of bounds for int64 (in "
                                               f"'{op.value}' with a bool array; numpy raises "
                                               "OverflowError here too)",
                                               hint="compare with a value int64 holds")
                res = _OUTSIDE[v > 0][_SWAP[op] if flip else op]
                return elementwise(name, [arr], lambda _x: n.const(res, dt.bool_), dt.bool_)
    a, b = asarray(a), asarray(b)
    for w, s, flip in ((b, a, False), (a, b, True)):
        ct = _int_compare_type(s)
        if ct is not None and ct is not dt.int64 and w.weak and w.pyvalue is None \
                and w.dtype.is_int:
            return _compare_runtime(name, _SWAP[op] if flip else op, s, w, ct)
    for u, s_, flip in ((a, b, False), (b, a, True)):
        # uint64 against a signed integer array: numpy 2 compares exactly, by value (their
        # common type float64 would round: 2**53 + 1 > 2**53 must be True)
        if u.dtype is dt.uint64 and not u.weak and s_.dtype.is_int and s_.dtype.is_signed:
            return _compare_runtime(name, _SWAP[op] if flip else op, u, s_, dt.uint64)
    d = common_dtype([a, b])
    return elementwise(name, [a, b], lambda x, y: mk.compare(op, cast_to(x, d), cast_to(y, d)),
                       dt.bool_, a.weak and b.weak and not strong)


def _literal_int(x):
    """The value of a Python int literal (raw or traced), else None."""
    v = x.pyvalue if isinstance(x, Array) else x
    if isinstance(v, int) and not isinstance(v, (bool, np.generic)):
        return v
    return None


def _int_compare_type(a: Array):
    """The integer type a strong integer/bool array compares with a weak int in, else None."""
    if a.weak or not (a.dtype.is_int or a.dtype.is_bool):
        return None
    return dt.int64 if a.dtype.is_bool else a.dtype


def _compare_runtime(name, op, s: Array, w: Array, ct: dt.DType) -> Array:
    """``s op w`` by value, for a strong integer array ``s`` and a weak int64 ``w`` whose
    value is known only at call time (a scalar argument, a size, an index), or a strong
    uint64 ``s`` and a signed integer array ``w``."""
    if ct is not dt.uint64:      # int64 holds both: compare there, exactly
        return elementwise(name, [s, w], lambda x, y: mk.compare(
            op, cast_to(x, dt.int64), cast_to(y, dt.int64)), dt.bool_)
    below = _OUTSIDE[False][op]  # w < 0: below every uint64

    def build(x, y):
        neg = mk.compare(C.LT, y, n.const(0, y.dtype))
        return mk.select(neg, n.const(below, dt.bool_), mk.compare(op, x, cast_to(y, dt.uint64)))
    return elementwise(name, [s, w], build, dt.bool_)



# ------------------------------------------------------------------ powers
def nonnegative_exponent(b: Array) -> None:
    """numpy raises ValueError for an integer to a negative integer power.  A scalar argument
    (or a size) as the exponent is checked at every call, here.  An exponent that is array
    data is checked over the domain where the power is evaluated, on the data, before the
    kernel runs (kdsl.frontend.access ``_int_power``)."""
    e = _runtime_int(b)
    if e is not None:
        _call_check(mk.compare(C.GE, e, n.const(0, e.dtype)),
                    f"integers to negative integer powers are not allowed ({e.name} < 0; numpy "
                    f"raises ValueError); cast the base to a float type first", KernelValueError)



# ------------------------------------------------------------------ np.clip
def clip(a, a_min=None, a_max=None) -> Array:
    """``np.clip``: ``minimum(maximum(a, a_min), a_max)``; either bound may be None.

    Like ``np.clip``, an integer bound beyond the array's integer type on the side where
    it clips nothing (``clip(uint8_array, -1, 3)``) is dropped; one beyond it on the other
    side raises IntegerOverflowError (numpy: OverflowError).
    """
    if a_min is None and a_max is None:
        raise KernelValueError("kd.clip needs a_min or a_max", hint="give at least one bound")
    out = asarray(a)
    strong_int = not out.weak and out.dtype.is_int
    if strong_int:
        info = np.iinfo(out.dtype.np)
        if _literal_int(a_min) is not None and _literal_int(a_min) <= info.min:
            a_min = None
        if _literal_int(a_max) is not None and _literal_int(a_max) >= info.max:
            a_max = None
    for bound, upper in ((a_min, False), (a_max, True)):
        if bound is None:
            continue
        b = asarray(bound)
        if strong_int and out.dtype is not dt.int64 and _runtime_int(b) is not None:
            out = _clip_runtime(out, b, upper)
        else:
            out = minimum(out, b) if upper else maximum(out, b)
    if out is asarray(a):
        out = elementwise("clip", [out], lambda e: e, out.dtype, out.weak)
    out.op = "clip"
    return out


def _clip_runtime(x: Array, b: Array, upper: bool) -> Array:
    """One side of ``np.clip`` for an integer array and a bound known at call time: a bound
    beyond the type on the harmless side clips nothing, on the other side it is an error."""
    d = x.dtype
    info = np.iinfo(d.np)
    e = _runtime_int(b)
    dmin, dmax = int(info.min), min(int(info.max), dt.INT64_MAX)
    if upper and dmin > -dt.INT64_MAX - 1 or not upper and dmax < dt.INT64_MAX:
        edge = dmin if upper else dmax
        ok = mk.compare(C.GE if upper else C.LE, e, n.const(edge, e.dtype))
        side = ("maximum", "minimum") if upper else ("minimum", "maximum")
        _call_check(ok, f"{e.name} is out of bounds for {d.name} (a clip {side[0]} beyond the "
                        f"type's {side[1]}; numpy raises OverflowError); pass a bound inside "
                        "the type's range", IntegerOverflowError)
    op = B.MIN if upper else B.MAX
    # the harmless side: a bound at or beyond the type's edge leaves every value as it is
    noop_edge = n.const(int(info.max) if upper else dmin, e.dtype) if not (
        upper and int(info.max) > dt.INT64_MAX) else None

    def build(xe, be):
        clipped = mk.binary(op, xe, cast_to(be, d))
        if noop_edge is None:
            return clipped
        beyond = mk.compare(C.GE if upper else C.LE, be, noop_edge)
        return mk.select(beyond, xe, clipped)
    return elementwise("clip", [x, b], build, d)
