"""Elementwise ops on traced arrays: numpy's broadcasting and dtype rules.

Result dtypes come from numpy's own ufunc type resolution (NEP 50: Python
scalars, scalar arguments and index values are weak), bfloat16 through
``dtypes.promote``.  Operands of an IR Binary share a dtype: casts are
inserted here.  Nothing here makes a stage except ``materialize``, used when
an expression tree grows too big and at the kernel's return.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import dtypes as dt
from .spec import user_dtype as _as_dtype
from ..errors import (DTypeError, IntegerOverflowError, KernelError, KernelValueError, ShapeError,
                      user_location)
from ..graph import Constraint
from ..ir import make as mk
from ..ir import nodes as n
from . import context
from .array import MAX_TREE, Array, from_tensor, scalar
from .stages import make_stage, new_axis

B, U, C = n.BinOp, n.UnOp, n.CmpOp


# ------------------------------------------------------------------ operands
def asarray(x) -> Array:
    """A traced array for ``x``: Python scalars are weak, numpy scalars strong."""
    if isinstance(x, Array):
        return x
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        # (np.float64 subclasses float, but is a strong float64 in numpy 2)
        d = dt.bool_ if isinstance(x, bool) else dt.int64 if isinstance(x, int) else dt.float64
        if d is dt.int64 and not dt.can_cast_value(x, dt.int64):
            if not dt.can_cast_value(x, dt.uint64):
                raise IntegerOverflowError(f"Python integer {x} does not fit in int64 or uint64",
                                           hint="use a smaller value, or a float")
            d = dt.uint64   # still weak: only a uint64 operand can take it (numpy's rule)
        return scalar(n.const(x, d), weak=True, op="scalar", pyvalue=x)
    if isinstance(x, (np.generic, np.ndarray)) and np.ndim(x) == 0:
        v = np.asarray(x)
        d = _as_dtype(v.dtype)
        return scalar(n.const(v.item(), d), op="scalar")
    if isinstance(x, np.ndarray):
        raise KernelError("a numpy array captured from Python cannot be used inside a kernel",
                          hint="pass it as an argument of the kernel instead")
    raise KernelError(f"cannot use a value of type {type(x).__name__} in a kernel",
                      hint="use traced arrays, Python scalars or numpy scalars")


def _token(a: Array):
    if a.weak:
        return "w" + ("b" if a.dtype.is_bool else "i" if a.dtype.is_int else "f")
    return a.dtype


_WEAK_VALUE = {"wb": True, "wi": 1, "wf": 1.0}


@lru_cache(maxsize=None)
def _resolve(ufunc, tokens: tuple) -> dt.DType:
    """numpy's result dtype of ``ufunc`` on operands described by ``tokens``."""
    if any(t is dt.bfloat16 for t in tokens):
        res = dt.promote(*[_WEAK_VALUE.get(t, t) if isinstance(t, str) else t for t in tokens])
        if ufunc in _FLOAT_UFUNCS and not res.is_float:
            res = dt.float64
        return res
    args = [_WEAK_VALUE[t] if isinstance(t, str) else np.ones(1, t.np) for t in tokens]
    with np.errstate(all="ignore"):
        return dt.as_dtype(ufunc(*args).dtype)


def result_dtype(ufunc, arrays, what: str) -> dt.DType:
    try:
        d = _resolve(ufunc, tuple(_token(a) for a in arrays))
    except TypeError:
        names = ", ".join(("Python " if a.weak else "") + a.dtype.name for a in arrays)
        raise DTypeError(f"{what} is not supported for operands of type {names}",
                         hint="cast the operands with .astype(...) to a type that supports it") from None
    for a in arrays:
        if isinstance(a.pyvalue, int) and not isinstance(a.pyvalue, bool) and d.is_int and \
                not dt.can_cast_value(a.pyvalue, d):
            raise IntegerOverflowError(f"Python integer {a.pyvalue} out of bounds for {d.name} "
                                       f"(in {what}; numpy raises OverflowError here too)",
                                       hint="cast the array to a wider type first "
                                            "(.astype(kd.int64))")
        if d.is_int and d is not dt.int64:
            _require_fits(a, d, what)
    return d


def _runtime_int(a: Array):
    """The expression of a weak integer known only at call time (a scalar argument or a size),
    or None: such a value must fit the integer type it meets, as a Python int must in numpy."""
    if not (a.weak and a.pyvalue is None and a.iv is None and a.ndim == 0 and a.dtype.is_int):
        return None
    e = a.at(())
    return e if isinstance(e, n.Var) else None


def _require_fits(a: Array, d: dt.DType, what: str) -> None:
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


def common_dtype(arrays) -> dt.DType:
    """``np.result_type`` of the operands (weak ones as Python scalars)."""
    if all(a.weak for a in arrays):
        return dt.promote(*[_WEAK_VALUE[_token(a)] for a in arrays])
    return dt.promote(*[_WEAK_VALUE[_token(a)] if a.weak else a.dtype for a in arrays])


def cast_to(e: n.Expr, d: dt.DType) -> n.Expr:
    """``e`` as dtype ``d`` (constants are re-typed directly)."""
    if e.dtype is d:
        return e
    if isinstance(e, n.Const) and not (e.dtype.is_float and not d.is_float):
        return n.const(e.value, d)
    return mk.cast(e, d)


# ------------------------------------------------------------------ broadcasting
def _is_one(ctx, d) -> bool:
    r = ctx.resolve(d)
    return isinstance(r, n.Const) and r.value == 1


def _dims_str(ctx, dims) -> str:
    from ..ir.printer import format_expr as expr_str
    parts = [expr_str(ctx.resolve(d)) for d in dims]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def broadcast_dims(dim_lists: list, what: str):
    """numpy broadcasting of several shapes: (result dims, per-operand index mappers)."""
    ctx = context.current()
    nd = max((len(d) for d in dim_lists), default=0)
    out, bcast = [], [set() for _ in dim_lists]
    for j in range(nd):
        entries = [(k, len(dl) - nd + j) for k, dl in enumerate(dim_lists) if len(dl) - nd + j >= 0]
        non1 = [(k, p) for k, p in entries if not _is_one(ctx, dim_lists[k][p])]
        if not non1:
            out.append(mk.as_expr(1))
            continue
        rep = dim_lists[non1[0][0]][non1[0][1]]
        for k, p in non1[1:]:
            d = dim_lists[k][p]
            ra, rb = ctx.resolve(rep), ctx.resolve(d)
            if ra == rb:
                continue
            if isinstance(ra, n.Const) and isinstance(rb, n.Const):
                shapes = " ".join(_dims_str(ctx, dl) for dl in dim_lists)
                raise ShapeError(f"operands could not be broadcast together with shapes {shapes} "
                                 f"(in {what})", hint="make the sizes equal, or 1 to broadcast")
            rep = ctx.unify(rep, d, f"broadcasting in {what}")
        out.append(rep)
        for k, p in entries:
            if _is_one(ctx, dim_lists[k][p]):
                bcast[k].add(p)

    def mapper(k):
        dl, b = dim_lists[k], bcast[k]
        off = nd - len(dl)
        zero = mk.as_expr(0)
        return lambda idx: tuple(zero if p in b else idx[off + p] for p in range(len(dl)))

    return tuple(out), [mapper(k) for k in range(len(dim_lists))]


def materialize(a: Array, name: str | None = None, loc=None) -> Array:
    """Compute ``a`` into a stage of its own (named after its last op) and read that."""
    ctx = context.current()
    if a.materialized is not None and name is None:
        return a.materialized
    axes = tuple(new_axis(ctx, f"i{j}", d) for j, d in enumerate(a.dims))
    body = a.at(tuple(ax.var for ax in axes))
    base = name or a.op
    t = make_stage(ctx, ctx.unique(base), base, axes, body, loc or a.loc)
    out = from_tensor(t)
    if name is None:
        a.materialized = out
    return out


def elementwise(name: str, arrays: list, build, dtype: dt.DType, weak: bool = False) -> Array:
    """An elementwise lazy result: ``build(*operand element exprs)`` with broadcasting."""
    arrays = [a if a.materialized is None else a.materialized for a in arrays]
    if 1 + sum(a.size_est for a in arrays) > MAX_TREE:
        arrays = [materialize(a) if a.size_est > 16 and a.tensor is None else a for a in arrays]
    size = 1 + sum(a.size_est for a in arrays)
    dims, maps = broadcast_dims([a.dims for a in arrays], name)
    pairs = list(zip(arrays, maps))

    def fn(idx):
        return build(*[a.at(m(idx)) for a, m in pairs])

    return Array(dims, dtype, fn, op=name, weak=weak, size=size)


# ------------------------------------------------------------------ binary ops
def _bool_or(op_bool, op_other):
    return lambda x, y: mk.binary(op_bool if x.dtype.is_bool else op_other, x, y)


_BINARY = {
    # name: (numpy ufunc, builder on operands already in the op's dtype, what)
    "add": (np.add, _bool_or(B.OR, B.ADD), "+"),
    "subtract": (np.subtract, lambda x, y: mk.binary(B.SUB, x, y), "-"),
    "multiply": (np.multiply, _bool_or(B.AND, B.MUL), "*"),
    "divide": (np.true_divide, lambda x, y: mk.binary(B.DIV, x, y), "/"),
    "floor_divide": (np.floor_divide, lambda x, y: mk.binary(B.FLOORDIV, x, y), "//"),
    "remainder": (np.remainder, lambda x, y: mk.binary(B.MOD, x, y), "%"),
    "power": (np.power, lambda x, y: mk.binary(B.POW, x, y), "**"),
    "maximum": (np.maximum, _bool_or(B.OR, B.MAX), "maximum"),
    "minimum": (np.minimum, _bool_or(B.AND, B.MIN), "minimum"),
    "bitwise_and": (np.bitwise_and, lambda x, y: mk.binary(B.AND, x, y), "&"),
    "bitwise_or": (np.bitwise_or, lambda x, y: mk.binary(B.OR, x, y), "|"),
    "bitwise_xor": (np.bitwise_xor, lambda x, y: mk.binary(B.XOR, x, y), "^"),
}
_COMPARE = {"equal": C.EQ, "not_equal": C.NE, "less": C.LT, "less_equal": C.LE,
            "greater": C.GT, "greater_equal": C.GE}
_LOGICAL = {"logical_and": B.AND, "logical_or": B.OR, "logical_xor": B.XOR}


def binary(name: str, a, b) -> Array:
    """numpy's ``name`` ufunc (add, multiply, less, logical_and, ...) on traced operands."""
    if name in _COMPARE:
        return compare(name, a, b)
    a, b = asarray(a), asarray(b)
    weak = a.weak and b.weak
    if name in _LOGICAL:
        op = _LOGICAL[name]
        return elementwise(name, [a, b], lambda x, y: mk.binary(op, _truth(x), _truth(y)), dt.bool_)
    ufunc, build, what = _BINARY[name]
    d = result_dtype(ufunc, [a, b], f"'{what}'")
    if name == "power":
        special = _power_special(a, b, d)
        if special is not None:
            return special
        if d.is_signed and b.pyvalue is None and (b.dtype.is_signed or b.weak):
            _nonnegative_exponent(b)
    return elementwise(name, [a, b], lambda x, y: build(cast_to(x, d), cast_to(y, d)), d, weak)


# ------------------------------------------------------------------ comparisons
#: the result of ``x op v`` for every x when v lies above (True) / below (False) x's range
_OUTSIDE = {True: {C.LT: True, C.LE: True, C.NE: True, C.GT: False, C.GE: False, C.EQ: False},
            False: {C.LT: False, C.LE: False, C.NE: True, C.GT: True, C.GE: True, C.EQ: False}}
_SWAP = {C.LT: C.GT, C.LE: C.GE, C.GT: C.LT, C.GE: C.LE, C.EQ: C.EQ, C.NE: C.NE}


def compare(name: str, a, b) -> Array:
    """numpy 2's comparison ufuncs: an integer array meets a Python integer by value
    (``uint8_array < -1`` is all False, ``== 300`` too), never through a wrapped value."""
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
    d = common_dtype([a, b])
    return elementwise(name, [a, b], lambda x, y: mk.compare(op, cast_to(x, d), cast_to(y, d)),
                       dt.bool_)


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
    value is known only at call time (a scalar argument, a size, an index)."""
    if ct is not dt.uint64:      # int64 holds both: compare there, exactly
        return elementwise(name, [s, w], lambda x, y: mk.compare(
            op, cast_to(x, dt.int64), cast_to(y, dt.int64)), dt.bool_)
    below = _OUTSIDE[False][op]  # w < 0: below every uint64

    def build(x, y):
        neg = mk.compare(C.LT, y, n.const(0, y.dtype))
        return mk.select(neg, n.const(below, dt.bool_), mk.compare(op, x, cast_to(y, dt.uint64)))
    return elementwise(name, [s, w], build, dt.bool_)


def _truth(e: n.Expr) -> n.Expr:
    if e.dtype.is_bool:
        return e
    return mk.compare(C.NE, e, n.const(0, e.dtype))


def _nonnegative_exponent(b: Array) -> None:
    """numpy raises ValueError for an integer to a negative integer power.  A scalar argument
    (or a size) as the exponent is checked at every call.  An exponent that is array data is
    not checked yet: it needs a run-time check over the stage's domain; until then such an
    element gives the C-like result every backend computes: 1 for base 1, +-1 for base -1
    (by parity), 0 otherwise.  This function is the one place to add that check."""
    e = _runtime_int(b)
    if e is not None:
        _call_check(mk.compare(C.GE, e, n.const(0, e.dtype)),
                    f"integers to negative integer powers are not allowed ({e.name} < 0; numpy "
                    f"raises ValueError); cast the base to a float type first", KernelValueError)


def _power_special(a: Array, b: Array, d: dt.DType):
    v = b.pyvalue
    if v is None or isinstance(v, bool):
        return None
    if d.is_int and isinstance(v, int) and v < 0:
        raise KernelValueError("integers to negative integer powers are not allowed",
                               hint="cast the base to a float type first")
    if v == 1 or v == 2:
        def build(x, _y):
            x = cast_to(x, d)
            return x if v == 1 else mk.binary(B.MUL, x, x)
        return elementwise("power", [a, b], build, d, a.weak and b.weak)
    if v == 0.5 and d.is_float:
        return elementwise("power", [a, b], lambda x, _y: mk.unary(U.SQRT, cast_to(x, d)), d,
                           a.weak and b.weak)
    return None


# ------------------------------------------------------------------ unary ops
_UNARY = {
    "negative": (np.negative, U.NEG), "absolute": (np.absolute, U.ABS),
    "invert": (np.invert, U.NOT), "exp": (np.exp, U.EXP), "log": (np.log, U.LOG),
    "sqrt": (np.sqrt, U.SQRT), "rsqrt": (np.sqrt, U.RSQRT), "sin": (np.sin, U.SIN),
    "cos": (np.cos, U.COS), "tanh": (np.tanh, U.TANH), "erf": (np.exp, U.ERF),
    "sigmoid": (np.exp, U.SIGMOID), "floor": (np.floor, U.FLOOR), "ceil": (np.ceil, U.CEIL),
}
_FLOAT_UFUNCS = (np.true_divide, np.exp, np.log, np.sqrt, np.sin, np.cos, np.tanh)


def unary(name: str, x) -> Array:
    """A unary ufunc (math functions follow numpy: ints give float64, float16 stays)."""
    x = asarray(x)
    if name == "logical_not":
        return elementwise(name, [x], lambda e: mk.unary(U.NOT, _truth(e)), dt.bool_)
    if name == "isnan":
        return elementwise(name, [x], lambda e: mk.unary(U.ISNAN, e) if e.dtype.is_float
                           else n.const(False, dt.bool_), dt.bool_)
    ufunc, op = _UNARY[name]
    d = result_dtype(ufunc, [x], name)
    if op in (U.ABS, U.FLOOR, U.CEIL) and not d.is_float and not d.is_signed:
        return elementwise(name, [x], lambda e: cast_to(e, d), d, x.weak)
    if op in (U.FLOOR, U.CEIL) and not d.is_float:
        return elementwise(name, [x], lambda e: cast_to(e, d), d, x.weak)
    return elementwise(name, [x], lambda e: mk.unary(op, cast_to(e, d)), d, x.weak)


# ------------------------------------------------------------------ others
def astype(x, dtype) -> Array:
    """``x`` converted to ``dtype`` (a lazy cast)."""
    x = asarray(x)
    d = _as_dtype(dtype)
    if d is x.dtype and not x.weak:
        return x
    return elementwise("astype", [x], lambda e: cast_to(e, d), d)


def where(cond, x=None, y=None) -> Array:
    """``x`` where ``cond`` else ``y`` (both evaluated; no data-dependent branches)."""
    if x is None or y is None:
        raise KernelError("kd.where needs three arguments (cond, x, y)",
                          hint="the one-argument form (indices of nonzeros) has a data-dependent "
                               "shape and is not supported")
    c, x, y = asarray(cond), asarray(x), asarray(y)
    d = common_dtype([x, y])
    # np.where returns an array: strong even when both values are Python scalars
    return elementwise("where", [c, x, y],
                       lambda ce, xe, ye: mk.select(_truth(ce), cast_to(xe, d), cast_to(ye, d)), d)


def maximum(a, b) -> Array:
    """Elementwise maximum (NaN propagates, like numpy)."""
    return binary("maximum", a, b)


def minimum(a, b) -> Array:
    """Elementwise minimum (NaN propagates, like numpy)."""
    return binary("minimum", a, b)


def clip(a, a_min=None, a_max=None) -> Array:
    """``minimum(maximum(a, a_min), a_max)``; either bound may be None.

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
        _call_check(ok, f"{e.name} is out of bounds for {d.name} (a clip {'maximum' if upper else 'minimum'} "
                        f"beyond the type's {'minimum' if upper else 'maximum'}; numpy raises "
                        "OverflowError); pass a bound inside the type's range",
                    IntegerOverflowError)
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


def _math(name):
    def f(x):
        return unary(name, x)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (numpy's dtype rules: integers give float64)."
    return f


exp, log, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid = (
    _math(k) for k in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid"))
floor, ceil, isnan = _math("floor"), _math("ceil"), _math("isnan")


def abs(x) -> Array:  # noqa: A001  (kd.abs, like np.abs)
    """Elementwise absolute value."""
    return unary("absolute", x)


# ------------------------------------------------------------------ operators
def _rev(name):
    return lambda self, other: binary(name, other, self)


def _fwd(name):
    return lambda self, other: binary(name, self, other)


def _cmp(name):
    def f(self, other):
        try:
            return binary(name, self, other)
        except KernelError:
            if isinstance(other, (Array, bool, int, float, np.generic)):
                raise
            return NotImplemented
    return f


def install_operators(cls) -> None:
    """Give the Array class numpy's operators and methods."""
    from . import linalg, numpy_api, reduce
    for dunder, name in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                         ("truediv", "divide"), ("floordiv", "floor_divide"), ("mod", "remainder"),
                         ("pow", "power"), ("and", "bitwise_and"), ("or", "bitwise_or"),
                         ("xor", "bitwise_xor")):
        setattr(cls, f"__{dunder}__", _fwd(name))
        setattr(cls, f"__r{dunder}__", _rev(name))
    for dunder, name in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"),
                         ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal")):
        setattr(cls, f"__{dunder}__", _cmp(name))
    cls.__neg__ = lambda self: unary("negative", self)
    cls.__pos__ = lambda self: self
    cls.__abs__ = lambda self: unary("absolute", self)
    cls.__invert__ = lambda self: unary("invert", self)
    cls.__matmul__ = lambda self, other: linalg.matmul(self, other)
    cls.__rmatmul__ = lambda self, other: linalg.matmul(other, self)
    cls.clip = lambda self, a_min=None, a_max=None: clip(self, a_min, a_max)
    reduce.install_methods(cls)
    cls.__array_ufunc__ = numpy_api.array_ufunc
    cls.__array_function__ = numpy_api.array_function

