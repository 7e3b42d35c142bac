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
from ..errors import DTypeError, IntegerOverflowError, KernelError, KernelValueError, ShapeError
from ..ir import make as mk
from ..ir import nodes as n
from . import context
from .array import MAX_TREE, Array, from_tensor, scalar
from ..ir.visitor import substitute
from .stages import free_axes, make_stage, new_axis

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
        from .array_create import captured   # made while tracing (np.arange(4)): a constant
        if (c := captured(x)) is not None:
            return c
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
            by_value.require_fits(a, d, what)
    return d


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


def spill(a: Array) -> Array:
    """``a`` computed into a stage of its own, as a proxy with ``a``'s dims, dtype and weakness.

    Unlike ``materialize`` (the kernel's results), ``a`` may depend on index-style axes (a
    value inside a ``kd.compute`` lambda): the stage then also ranges over those axes and the
    proxy reads it at them, as ``stages._Hoist`` does for reductions.
    """
    ctx = context.current()
    axes = tuple(new_axis(ctx, f"i{j}", d) for j, d in enumerate(a.dims))
    body = a.at(tuple(ax.var for ax in axes))
    extra, mapping, reads = [], {}, []
    for v in free_axes(ctx, body, [ax.var for ax in axes]):
        iv = ctx.ivs[v]
        ax = new_axis(ctx, v.name, iv.dom.extent)
        extra.append(ax)
        mapping[v] = mk.add(ax.var, iv.dom.min)
        reads.append(mk.sub(v, iv.dom.min))
    if mapping:
        body = substitute(body, mapping)
    t = make_stage(ctx, ctx.unique(a.op), a.op, axes + tuple(extra), body, a.loc)
    reads = tuple(reads)
    return Array(a.dims, a.dtype, lambda idx: n.TensorRead(t.dtype, t, tuple(idx) + reads),
                 op=a.op, weak=a.weak, tensor=None if reads else t, depth=1)


def elementwise(name: str, arrays: list, build, dtype: dt.DType, weak: bool = False) -> Array:
    """An elementwise lazy result: ``build(*operand element exprs)`` with broadcasting."""
    arrays = [a if a.materialized is None else a.materialized for a in arrays]
    if 1 + sum(a.size_est for a in arrays) > MAX_TREE:
        arrays = [_spilled(a) if a.size_est > 16 and a.tensor is None else a for a in arrays]
    size = 1 + sum(a.size_est for a in arrays)
    dims, maps = broadcast_dims([a.dims for a in arrays], name)
    pairs = list(zip(arrays, maps))

    def fn(idx):
        return build(*[a.at(m(idx)) for a, m in pairs])

    # past MAX_DEPTH the new Array spills itself (Array.__init__): one stage per MAX_DEPTH ops
    return Array(dims, dtype, fn, op=name, weak=weak, size=size,
                 depth=1 + max([a.depth for a in arrays], default=0))


def _spilled(a: Array) -> Array:
    """``spill(a)``, once per value (later uses read the same stage)."""
    if a.materialized is None:
        a.materialized = spill(a)
    return a.materialized


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


def binary(name: str, a, b, strong: bool = False) -> Array:
    """numpy's ``name`` ufunc (add, multiply, less, logical_and, ...) on traced operands.

    An operator of two weak values is weak (``s * s`` is a Python int); ``strong``: the
    call of a function (``np.multiply(s, s)``, ``kd.maximum``), strong like numpy 2's
    result of a ufunc on Python scalars (NEP 50)."""
    if name in _COMPARE:
        return by_value.compare(name, a, b, strong)
    a, b = asarray(a), asarray(b)
    weak = a.weak and b.weak and not strong
    if weak and name in _PY_ARITH:     # Python: True + True == 2 (numpy's add: True)
        a, b = _py_int(a), _py_int(b)
    if name in _LOGICAL:
        op = _LOGICAL[name]
        return elementwise(name, [a, b], lambda x, y: mk.binary(op, _truth(x), _truth(y)), dt.bool_)
    ufunc, build, what = _BINARY[name]
    d = result_dtype(ufunc, [a, b], f"'{what}'")
    if d.is_float and name.startswith("bitwise_"):     # bfloat16 skips numpy's type check
        raise DTypeError(f"'{what}' is not supported for operands of type {a.dtype.name}, "
                         f"{b.dtype.name}", hint="bitwise operators take integer or bool arrays; "
                                                 "x.view(kd.int16) gives a float16's bits")
    if name == "power":
        special = _power_special(a, b, d, weak)
        if special is not None:
            return special
        if d.is_signed and b.pyvalue is None and (b.dtype.is_signed or b.weak):
            by_value.nonnegative_exponent(b)
    return elementwise(name, [a, b], lambda x, y: build(cast_to(x, d), cast_to(y, d)), d, weak)


#: operators that Python applies to bools as ints
_PY_ARITH = {"add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power"}


def _py_int(a: Array) -> Array:
    """A weak bool as the weak int Python's arithmetic makes of it (``-True == -1``)."""
    if not (a.weak and a.dtype.is_bool):
        return a
    out = elementwise("int", [a], lambda e: cast_to(e, dt.int64), dt.int64, True)
    out.pyvalue = None if a.pyvalue is None else int(a.pyvalue)
    return out


def _truth(e: n.Expr) -> n.Expr:
    if e.dtype.is_bool:
        return e
    return mk.compare(C.NE, e, n.const(0, e.dtype))


def _power_special(a: Array, b: Array, d: dt.DType, weak: bool):
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
        return elementwise("power", [a, b], build, d, weak)
    if v == 0.5 and d.is_float:
        return elementwise("power", [a, b], lambda x, _y: mk.unary(U.SQRT, cast_to(x, d)), d, weak)
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


def unary(name: str, x, strong: bool = False) -> Array:
    """A unary ufunc (math functions follow numpy: ints give float64, float16 stays).

    An operator (``-s``, ``abs(s)``) keeps a weak operand weak; ``strong``: a function call
    (``np.exp(s)``, ``kd.exp(2.0)``), strong like numpy 2's ufuncs of Python scalars."""
    x = asarray(x)
    weak = x.weak and not strong
    if weak and name in ("negative", "invert", "absolute"):
        x = _py_int(x)                 # Python: -True == -1, ~True == -2, abs(True) == 1
    if name == "logical_not":
        return elementwise(name, [x], lambda e: mk.unary(U.NOT, _truth(e)), dt.bool_)
    if name == "isnan":
        return elementwise(name, [x], lambda e: mk.unary(U.ISNAN, e) if e.dtype.is_float
                           else n.const(False, dt.bool_), dt.bool_)
    ufunc, op = _UNARY[name]
    d = result_dtype(ufunc, [x], name)
    if d.is_float and op is U.NOT:
        raise DTypeError(f"~ is not supported for {d.name} values",
                         hint="~ takes integer or bool arrays")
    if op in (U.ABS, U.FLOOR, U.CEIL) and not d.is_float and not d.is_signed:
        return elementwise(name, [x], lambda e: cast_to(e, d), d, weak)
    if op in (U.FLOOR, U.CEIL) and not d.is_float:
        return elementwise(name, [x], lambda e: cast_to(e, d), d, weak)
    return elementwise(name, [x], lambda e: mk.unary(op, cast_to(e, d)), d, weak)


# ------------------------------------------------------------------ others
def astype(x, dtype) -> Array:
    """``x`` converted to ``dtype`` (a lazy cast)."""
    x = asarray(x)
    d = _as_dtype(dtype)
    if d is x.dtype and not x.weak:
        return x
    return elementwise("astype", [x], lambda e: cast_to(e, d), d)


def view(x, dtype=None, type=None) -> Array:  # noqa: A002  (numpy's keyword)
    """``x.view(dtype)``: the same bits as another dtype of the same item size (a bitcast)."""
    x = asarray(x)
    if type is not None or dtype is None:
        raise KernelError("x.view() inside a kernel takes one dtype (x.view(kd.int32))",
                          hint="views as other array classes have no meaning while tracing")
    d = _as_dtype(dtype)
    if d is x.dtype:
        return x
    for t in (x.dtype, d):
        if t.is_bool or t is dt.bfloat16:
            raise DTypeError(f"x.view({d.name}) of a {x.dtype.name} array is not supported "
                             f"({t.name} has no bit pattern kdsl exposes)",
                             hint="view between float16/32/64 and the integer types of the "
                                  "same size; for bool use x != 0 or .astype")
    if d.itemsize != x.dtype.itemsize:
        raise DTypeError(f"x.view({d.name}) of a {x.dtype.name} array changes the item size "
                         f"({x.dtype.itemsize} -> {d.itemsize} bytes), which kdsl does not support",
                         hint="view as a type of the same size (float32 <-> int32/uint32, "
                              "float64 <-> int64/uint64, float16 <-> int16/uint16)")
    return elementwise("view", [x], lambda e: n.Unary(d, U.BITCAST, e), d)


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
    """Elementwise maximum (NaN propagates, like numpy); strong like ``np.maximum``."""
    return binary("maximum", a, b, strong=True)


def minimum(a, b) -> Array:
    """Elementwise minimum (NaN propagates, like numpy); strong like ``np.minimum``."""
    return binary("minimum", a, b, strong=True)


def clip(a, a_min=None, a_max=None) -> Array:
    """``minimum(maximum(a, a_min), a_max)``; either bound may be None (numpy's rules for
    integer bounds beyond the array's type: ``by_value.clip``)."""
    return by_value.clip(a, a_min, a_max)


def _math(name):
    def f(x):
        return unary(name, x, strong=True)
    f.__name__ = name
    f.__doc__ = (f"Elementwise {name} (numpy's dtype rules: integers give float64; of a Python "
                 f"scalar, a strong value like numpy 2's np.{name})")
    return f


exp, log, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid = (
    _math(k) for k in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid"))
floor, ceil, isnan = _math("floor"), _math("ceil"), _math("isnan")


def abs(x) -> Array:  # noqa: A001  (kd.abs, like np.abs)
    """Elementwise absolute value (strong like ``np.abs``; the builtin ``abs(x)`` keeps a
    Python scalar weak)."""
    return unary("absolute", x, strong=True)


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


def _shift(name, a, b):
    from . import ufuncs     # (imported late: ufuncs builds on this module)
    return ufuncs.SUPPORTED[name](a, b)


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
    for dunder, name in (("lshift", "left_shift"), ("rshift", "right_shift")):
        setattr(cls, f"__{dunder}__", lambda self, other, k=name: _shift(k, self, other))
        setattr(cls, f"__r{dunder}__", lambda self, other, k=name: _shift(k, other, self))
    cls.__neg__ = lambda self: unary("negative", self)
    cls.__pos__ = lambda self: _py_int(self)
    cls.__abs__ = lambda self: unary("absolute", self)
    cls.__invert__ = lambda self: unary("invert", self)
    cls.__matmul__ = lambda self, other: linalg.matmul(self, other)
    cls.__rmatmul__ = lambda self, other: linalg.matmul(other, self)
    cls.clip = lambda self, a_min=None, a_max=None: clip(self, a_min, a_max)
    reduce.install_methods(cls)
    cls.__array_ufunc__ = numpy_api.array_ufunc
    cls.__array_function__ = numpy_api.array_function


from . import by_value  # noqa: E402  (numpy's value-based rules for Python ints; uses this module)
