"""Reductions: numpy style (int axes) and index style (reduce-axis proxies).

``kd.sum(x, axis=1)`` / ``x.sum(axis=1)`` make a stage named after the op with
axes ``i0, i1, ...`` and ``r0, r1, ...``; ``kd.sum(A[i, k], axis=k)`` builds a
``Reduce`` expression for ``kd.compute``.  ``kd.reducer`` (reducer.py) makes
user-defined commutative reductions usable both ways.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as dt
from ..errors import KernelError, KernelValueError, ShapeError, user_location
from ..ir import make as mk
from ..ir import nodes as n
from ..graph import Constraint
from . import context, reduce_empty
from .array import Array, from_tensor, norm_axis
from .ops import _truth, asarray, astype, cast_to, elementwise, _as_dtype
from .stages import make_stage, new_axis

B, U, C = n.BinOp, n.UnOp, n.CmpOp
_INT64_MAX = 2 ** 63 - 1


# ------------------------------------------------------------------ combiners
def _extreme(d: dt.DType, low: bool):
    if d.is_float:
        return n.const(-np.inf if low else np.inf, d)
    if d.is_bool:
        return n.const(not low, d)
    info = np.iinfo(d.np)
    return n.const(int(info.min if low else info.max), d)


_SIMPLE = {
    # kind: (op on non-bool, op on bool, identity(d))
    "sum": (B.ADD, B.OR, lambda d: n.const(0, d)),
    "prod": (B.MUL, B.AND, lambda d: n.const(1, d)),
    "max": (B.MAX, B.OR, lambda d: _extreme(d, True)),
    "min": (B.MIN, B.AND, lambda d: _extreme(d, False)),
    "any": (B.OR, B.OR, lambda d: n.const(False, d)),
    "all": (B.AND, B.AND, lambda d: n.const(True, d)),
}
_CACHE: dict = {}


def combiner(kind: str, d: dt.DType) -> n.Combiner:
    """The (cached) Combiner of a built-in reduction ``kind`` over dtype ``d``."""
    key = (kind, d)
    if key not in _CACHE:
        _CACHE[key] = _argcombiner(kind, d) if kind in ("argmax", "argmin") else _simple(kind, d)
    return _CACHE[key]


def _simple(kind, d):
    op, op_bool, ident = _SIMPLE[kind]
    x, y = n.var("x", d), n.var("y", d)
    return n.Combiner(kind, (x,), (y,), (mk.binary(op_bool if d.is_bool else op, x, y),), (ident(d),),
                      n.CombinerKind(kind))


def _argcombiner(kind, d):
    """(index, value) pairs: the better value wins, ties and NaNs go to the smallest index."""
    li, ri = n.var("i", dt.index), n.var("j", dt.index)
    lv, rv = n.var("x", d), n.var("y", d)
    better = mk.compare(C.GT if kind == "argmax" else C.LT, rv, lv)
    tie = mk.binary(B.AND, mk.compare(C.EQ, rv, lv), mk.compare(C.LT, ri, li))
    if d.is_float:
        rn, ln = mk.unary(U.ISNAN, rv), mk.unary(U.ISNAN, lv)
        not_ln = mk.unary(U.NOT, ln)
        first_nan = mk.binary(B.AND, rn, not_ln)
        both_nan = mk.binary(B.AND, mk.binary(B.AND, rn, ln), mk.compare(C.LT, ri, li))
        take = mk.binary(B.OR, mk.binary(B.OR, first_nan, mk.binary(B.AND, not_ln, better)),
                         mk.binary(B.OR, tie, both_nan))
    else:
        take = mk.binary(B.OR, better, tie)
    return n.Combiner(kind, (li, lv), (ri, rv), (mk.select(take, ri, li), mk.select(take, rv, lv)),
                      (n.const(_INT64_MAX, dt.index), _extreme(d, kind == "argmax")), n.CombinerKind(kind))


# ------------------------------------------------------------------ dtypes
def _dtypes(kind: str, xd: dt.DType, dtype):
    """(accumulator dtype, result dtype) of a numpy-style reduction."""
    if kind in ("any", "all"):
        return dt.bool_, dt.bool_
    if kind in ("max", "min"):
        return xd, xd
    if kind in ("argmax", "argmin"):
        return dt.index, dt.index
    if dtype is not None:
        res = _as_dtype(dtype)
        return (res.compute if kind != "mean" or res.is_float else dt.float64), res
    if kind == "mean":
        res = xd if xd.is_float else dt.float64
        return res.compute, res
    if xd.is_bool or xd.is_int:     # numpy: integer sums widen to the platform (u)int
        wide = dt.uint64 if xd.kind == "u" else dt.int64
        return wide, wide
    return xd.compute, xd


def _norm_axes(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(norm_axis(a, ndim) for a in axis)
        if len(set(axes)) != len(axes):
            raise KernelValueError(f"duplicate value in 'axis': {tuple(axis)}",
                                   hint="name each axis once")
        return tuple(sorted(axes))
    return (norm_axis(axis, ndim),)


def _is_axis_proxy(a) -> bool:
    return isinstance(a, Array) and a.iv is not None


def _index_style(axis) -> bool:
    if _is_axis_proxy(axis):
        return True
    return isinstance(axis, (tuple, list)) and builtins.any(_is_axis_proxy(a) for a in axis)


# ------------------------------------------------------------------ numpy style
def _require_nonempty(ctx, kind, dims, loc):
    """max/min/argmax/argmin have no identity: like numpy, an empty reduction is an error
    (at trace time for static sizes, else a call-time check)."""
    size = mk.as_expr(1)
    for d in dims:
        axes = reduce_empty.axes_of(ctx, [d])
        if axes:    # a ragged range (its length uses other axes): a question about every point
            reduce_empty.require_nonempty_ragged(ctx, kind, d, axes, loc)
        else:
            size = mk.mul(size, d)
    msg = (f"{kind} over an empty axis has no identity (numpy raises here too)")
    hint = "guard the call on the size, or use a reduction with an identity (sum, prod, kd.reducer)"
    if isinstance(size, n.Const):
        if size.value == 0:
            raise ShapeError(msg, loc=loc, hint=hint)
        return
    ctx.constraints.append(Constraint(mk.compare(n.CmpOp.GT, size, 0), n.const(True), msg, loc,
                                      hint=hint))


def reduction_axes(ctx, dims, axes, keepdims):
    """The axes of a numpy-style reduction of an array of ``dims`` over ``axes``: (spatial
    IterVars of the result, the index of the source at each point, the reduce IterVars)."""
    spatial, idx, rax, k = [], [], [], 0
    for j, d in enumerate(dims):
        if j in axes:
            r = new_axis(ctx, f"r{len(rax)}", d, n.IterKind.REDUCE)
            rax.append(r)
            idx.append(r.var)
            if keepdims:
                spatial.append(new_axis(ctx, f"i{k}", 1))
                k += 1
        else:
            ax = new_axis(ctx, f"i{k}", d)
            spatial.append(ax)
            idx.append(ax.var)
            k += 1
    return spatial, idx, rax


def reduce_np(kind: str, x, axis=None, keepdims=False, dtype=None, *, comb=None, name=None,
              out=None, where=None) -> Array:
    """A numpy-style reduction stage (``kind`` names it unless ``name`` is given)."""
    if out is not None:
        raise KernelError(f"{kind}(out=...) is not supported inside kernels",
                          hint="return the result instead")
    if where is not None:
        raise KernelError(f"{kind}(where=...) is not supported", hint="use kd.where(mask, x, identity) first")
    if kind in ("argmax", "argmin") and isinstance(axis, (tuple, list)):
        raise KernelError(f"{kind}: axis must be an int or None, got {type(axis).__name__} "
                          f"{tuple(axis)!r} (numpy raises TypeError here too)",
                          hint=f"one axis, or None for the index into the flattened array; for "
                               f"several axes reshape them into one first (x.reshape(...).{kind}"
                               f"(axis=...))")
    x = asarray(x)
    ctx = context.current()
    axes = _norm_axes(axis, x.ndim)
    if comb is not None:
        acc = res = x.dtype
    else:
        acc, res = _dtypes(kind, x.dtype, dtype)
    if not axes:
        if kind in ("argmax", "argmin"):
            return elementwise(kind, [x], lambda e: n.const(0, dt.index), dt.index)
        if kind in ("any", "all"):
            return elementwise(kind, [x], _truth, dt.bool_)
        return astype(x, res) if res is not x.dtype or x.weak else x
    loc = user_location()
    if comb is None and kind in ("max", "min", "argmax", "argmin"):
        _require_nonempty(ctx, kind, [x.dims[j] for j in axes], loc)
    spatial, idx, rax = reduction_axes(ctx, x.dims, axes, keepdims)
    val = x.at(tuple(idx))
    if kind in ("argmax", "argmin"):
        flat = mk.as_expr(0)
        for j, r in zip(axes, rax):
            flat = mk.add(mk.mul(flat, x.dims[j]), r.var)
        vd = dt.uint8 if x.dtype.is_bool else x.dtype
        body = n.Reduce(dt.index, combiner(kind, vd), (flat, cast_to(val, vd)), tuple(rax))
    else:
        src = _truth(val) if kind in ("any", "all") else cast_to(val, acc)
        c = comb if comb is not None else combiner("sum" if kind == "mean" else kind, acc)
        body = n.Reduce(acc, c, (src,), tuple(rax))
    base = name or ("sum" if kind == "mean" else kind)
    t = make_stage(ctx, ctx.unique(base), base, tuple(spatial), body, loc)
    out_arr = from_tensor(t)
    if kind == "mean":
        count = mk.as_expr(1)
        for j in axes:
            count = mk.mul(count, x.dims[j])
        cnt = cast_to(count, acc)
        out_arr = elementwise("mean", [out_arr], lambda e: cast_to(mk.binary(B.DIV, e, cnt), res), res)
    elif res is not acc:
        out_arr = elementwise(kind, [out_arr], lambda e: cast_to(e, res), res)
    return out_arr


# ------------------------------------------------------------------ index style
def reduce_index(kind: str, expr, axis, dtype=None, where=None, *, comb=None) -> Array:
    """``Reduce`` over reduce-axis proxies: ``kd.sum(A[i, k], axis=k)`` (a 0-d value)."""
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    ivs = []
    for a in axes:
        if not _is_axis_proxy(a):
            raise KernelError("index-style reductions take reduce axes (kd.reduce_axis) as axis, "
                              f"got {type(a).__name__}", hint="axis=k or axis=(di, dj) with "
                              "k = kd.reduce_axis(extent)")
        if a.iv.kind is not n.IterKind.REDUCE:
            raise KernelValueError(f"cannot reduce over the spatial axis {a.iv.name!r}",
                                   hint="reduce over axes made by kd.reduce_axis(extent)")
        ivs.append(a.iv)
    e = asarray(expr)
    if e.ndim != 0:
        raise ShapeError(f"an index-style {kind} reduces a 0-d expression, got a {e.ndim}-d array",
                         hint="index every dimension, e.g. kd.sum(A[i, k], axis=k)")
    if comb is None:
        d = dt.bool_ if kind in ("any", "all") else _as_dtype(dtype) if dtype is not None else e.dtype
        comb = combiner(kind, d)
        if where is None and kind in ("max", "min", "argmax", "argmin"):   # issue 24 item 5
            _require_nonempty(context.current(), kind, [v.dom.extent for v in ivs], user_location())
    d = comb.lhs[0].dtype
    src = _truth(e.at(())) if d.is_bool else cast_to(e.at(()), d)
    cond = None if where is None else _truth(asarray(where).at(()))
    r = n.Reduce(d, comb, (src,), tuple(ivs), cond)
    return Array((), d, lambda _idx: r, op=kind, size=e.size_est + 1, depth=e.depth + 1)


def _dispatch(kind):
    def f(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
        if _index_style(axis):
            if keepdims:
                raise KernelError("keepdims has no meaning for index-style reductions",
                                  hint="drop keepdims")
            return reduce_index(kind, a, axis, dtype, where)
        return reduce_np(kind, a, axis, keepdims, dtype, out=out, where=where)
    f.__name__ = kind
    f.__doc__ = (f"``{kind}`` over int axes (numpy style, makes a stage) or over reduce axes "
                 "(index style, inside kd.compute).")
    return f


def _nodtype(kind):
    def f(a, axis=None, out=None, keepdims=False, where=None):
        if _index_style(axis):
            return reduce_index(kind, a, axis, None, where)
        return reduce_np(kind, a, axis, keepdims, out=out, where=where)
    f.__name__ = kind
    f.__doc__ = f"``{kind}`` over int axes (numpy style) or reduce axes (index style)."
    return f


sum = _dispatch("sum")  # noqa: A001
prod = _dispatch("prod")
max = _nodtype("max")  # noqa: A001
min = _nodtype("min")  # noqa: A001
any = _nodtype("any")  # noqa: A001
all = _nodtype("all")  # noqa: A001


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """numpy's mean: a sum stage, then a lazy division by the count."""
    return reduce_np("mean", a, axis, keepdims, dtype, out=out, where=where)


def argmax(a, axis=None, out=None, *, keepdims=False):
    """Index of the first maximum (NaN counts as the maximum, like numpy)."""
    return reduce_np("argmax", a, axis, keepdims, out=out)


def argmin(a, axis=None, out=None, *, keepdims=False):
    """Index of the first minimum (NaN counts as the minimum, like numpy)."""
    return reduce_np("argmin", a, axis, keepdims, out=out)


def install_methods(cls) -> None:
    """numpy's reduction methods on traced arrays."""
    cls.sum = lambda self, axis=None, dtype=None, out=None, keepdims=False: reduce_np(
        "sum", self, axis, keepdims, dtype, out=out)
    cls.prod = lambda self, axis=None, dtype=None, out=None, keepdims=False: reduce_np(
        "prod", self, axis, keepdims, dtype, out=out)
    cls.mean = lambda self, axis=None, dtype=None, out=None, keepdims=False: reduce_np(
        "mean", self, axis, keepdims, dtype, out=out)
    for kind in ("max", "min", "any", "all"):
        setattr(cls, kind, (lambda k: lambda self, axis=None, out=None, keepdims=False: reduce_np(
            k, self, axis, keepdims, out=out))(kind))
    for kind in ("argmax", "argmin"):
        setattr(cls, kind, (lambda k: lambda self, axis=None, out=None, *, keepdims=False: reduce_np(
            k, self, axis, keepdims, out=out))(kind))


from .reducer import Reducer, reducer  # noqa: E402,F401  (kd.reducer lives in its own module)
