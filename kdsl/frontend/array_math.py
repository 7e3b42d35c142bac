"""numpy's statistics and value functions: ``var``/``std``, ``round``/``around``,
``nan_to_num``, ``diff``, ``clip``, ``cumsum``/``cumprod``, and the one-argument
``where`` refused.

``var`` is two passes (numpy's): a mean stage, then a sum of squared deviations,
both in the accumulation type (float32 for 16-bit floats, float64 for ints and
bools), cast to numpy's result type at the end.  ``round`` is numpy's
``rint(x * 10**d) / 10**d`` with round-half-even.  ``cumsum``/``cumprod`` are
``kd.scan``s (kdsl/frontend/scan.py): one sequential pass along the axis, the other
axes in parallel.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import KernelError, KernelValueError
from ..ir import make as mk
from ..ir import nodes as n
from .array import Array, norm_axis, size_value
from .ops import _as_dtype, asarray, astype, binary, cast_to, elementwise
from .reduce import _norm_axes, reduce_np

B, U, C = n.BinOp, n.UnOp, n.CmpOp


# ------------------------------------------------------------------ var / std
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """numpy's ``var``: mean of squared deviations from the mean, divided by ``N - ddof``."""
    if out is not None or where is not None or mean is not None:
        raise KernelError("var/std: out=, where= and mean= are not supported inside kernels",
                          hint="return the result; mask with kd.where before the call")
    if correction is not None:
        ddof = correction
    a = asarray(a)
    res = _as_dtype(dtype) if dtype is not None else (
        a.dtype if a.dtype.is_float else dt.float64)
    if not res.is_float:
        raise KernelError(f"var/std with dtype={res.name}: only float results are supported",
                          hint="use a float dtype")
    acc = res.compute
    axes = _norm_axes(axis, a.ndim)
    x = astype(a, acc)
    count = 1
    for j in axes:
        count = count * size_value(a.dims[j])
    mu = reduce_np("mean", x, axes, True, acc)
    dev = x - mu
    ss = reduce_np("sum", dev * dev, axes, keepdims, acc)
    n_ = binary("maximum", astype(count, acc) - ddof, 0, strong=True)
    return astype(ss / astype(n_, acc), res)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """numpy's ``std``: the square root of ``var``."""
    v = var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction)
    return elementwise("std", [v], lambda e: mk.unary(U.SQRT, e), v.dtype)


# ------------------------------------------------------------------ round
def _rint(e: n.Expr) -> n.Expr:
    """Round half to even (numpy's ``rint``) from ``floor``; keeps the sign of zero."""
    d = e.dtype
    r = mk.unary(U.FLOOR, e)
    f = mk.binary(B.SUB, e, r)                     # exact: floor is within 1 of e
    half, one, two = n.const(0.5, d), n.const(1.0, d), n.const(2.0, d)
    odd = mk.compare(C.NE, mk.binary(B.MUL, mk.unary(U.FLOOR, mk.binary(B.DIV, r, two)), two), r)
    up = mk.binary(B.OR, mk.compare(C.GT, f, half), mk.binary(B.AND, mk.compare(C.EQ, f, half), odd))
    out = mk.select(up, mk.binary(B.ADD, r, one), r)
    zero = n.const(0.0, d)
    return mk.select(mk.compare(C.EQ, out, zero), mk.binary(B.MUL, e, zero), out)


def round_(a, decimals=0, out=None):
    """numpy's ``round``/``around``: half to even, ``decimals`` may be negative."""
    if out is not None:
        raise KernelError("round(out=...) is not supported inside kernels", hint="return the result")
    if isinstance(decimals, Array) or not isinstance(decimals, (int, np.integer)) or \
            isinstance(decimals, bool):
        raise KernelError("round: decimals must be a static int", hint="pass a Python int")
    a = asarray(a)
    d = int(decimals)
    res = dt.as_dtype(np.round(np.ones(1, a.dtype.np if a.dtype is not dt.bfloat16 else np.float32))
                      .dtype) if a.dtype is not dt.bfloat16 else dt.bfloat16
    if not res.is_float:
        if d >= 0:
            return a if not a.weak else astype(a, res)
        f = float(10 ** -d)        # numpy: in float64, then back to the integer type

        def build(e):
            y = mk.binary(B.DIV, cast_to(e, dt.float64), n.const(f, dt.float64))
            return cast_to(mk.binary(B.MUL, _rint(y), n.const(f, dt.float64)), res)
        return elementwise("round", [a], build, res)
    f = float(10.0 ** abs(d))

    def build(e):
        x = cast_to(e, res)
        c = n.const(f, res)
        if d == 0:
            return _rint(x)
        if d > 0:
            return mk.binary(B.DIV, _rint(mk.binary(B.MUL, x, c)), c)
        return mk.binary(B.MUL, _rint(mk.binary(B.DIV, x, c)), c)
    return elementwise("round", [a], build, res)


# ------------------------------------------------------------------ nan_to_num
def _finfo(d: dt.DType):
    try:
        import ml_dtypes
        return ml_dtypes.finfo(d.np)
    except ImportError:
        return np.finfo(d.np)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """numpy's ``nan_to_num``: NaN to ``nan``, +-inf to the given or the largest finite values."""
    x = asarray(x)
    if not x.dtype.is_float:
        return x
    d = x.dtype
    fi = _finfo(d)
    vals = [cast_to(asarray(v if v is not None else dflt).at(()), d) for v, dflt in
            ((nan, 0.0), (posinf, float(fi.max)), (neginf, float(fi.min)))]

    def build(e):
        inf = n.const(float("inf"), d)
        out = mk.select(mk.compare(C.EQ, e, inf), vals[1], e)
        out = mk.select(mk.compare(C.EQ, e, mk.unary(U.NEG, inf)), vals[2], out)
        return mk.select(mk.unary(U.ISNAN, e), vals[0], out)
    return elementwise("nan_to_num", [x], build, d)


# ------------------------------------------------------------------ diff
def diff(a, n_=1, axis=-1, prepend=None, append=None):
    """numpy's ``diff``: ``n`` times ``a[1:] - a[:-1]`` along ``axis`` (``!=`` for bools)."""
    from .array_shape import broadcast_to, concatenate
    a = asarray(a)
    if isinstance(n_, Array) or not isinstance(n_, (int, np.integer)) or n_ < 0:
        raise KernelValueError(f"diff: order must be a static int >= 0, got {n_!r}",
                               hint="pass a Python int")
    if n_ == 0:
        return a
    if a.ndim == 0:
        raise KernelValueError("diff requires input that is at least one dimensional",
                               hint="pass an array")
    ax = norm_axis(axis, a.ndim)
    parts = []
    for v in (prepend, a, append):
        if v is None:
            continue
        v = asarray(v)
        if v is not a and v.ndim == 0:
            shape = list(a.shape)
            shape[ax] = 1
            v = broadcast_to(v, tuple(shape))
        parts.append(v)
    if len(parts) > 1:
        a = concatenate(parts, ax)
    hi = tuple(slice(1, None) if j == ax else slice(None) for j in range(a.ndim))
    lo = tuple(slice(None, -1) if j == ax else slice(None) for j in range(a.ndim))
    for _ in range(int(n_)):
        op = "not_equal" if a.dtype.is_bool else "subtract"
        a = binary(op, a[hi], a[lo], strong=True)
    return a


# ------------------------------------------------------------------ clip / where
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):  # noqa: A002
    """numpy's ``clip`` (``min=``/``max=`` are numpy 2.1's names for the bounds)."""
    from .ops import clip as _clip
    if out is not None or kw:
        raise KernelError("clip: out= and ufunc keywords are not supported inside kernels",
                          hint="return the result")
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if lo is None and hi is None:       # numpy >= 2.1: no bounds, a copy
        a = asarray(a)
        return astype(a, a.dtype) if a.weak else a
    return _clip(a, lo, hi)


_WHERE1 = ("np.where(cond) with one argument returns the indices of the nonzero elements "
           "(np.nonzero): how many there are depends on the data, so the result's shape is not "
           "known while tracing")


def where(condition, x=None, y=None):
    """numpy's three-argument ``where``; the one-argument form is refused (data-dependent shape)."""
    from .ops import where as _where
    if x is None and y is None:
        raise KernelError(_WHERE1 + "; it is not supported inside kernels",
                          hint="select values with np.where(cond, x, y), count them with "
                               "np.sum(cond), or compute the indices outside the kernel")
    if x is None or y is None:
        raise KernelValueError("either both or neither of x and y should be given",
                               hint="np.where(cond, x, y)")
    return _where(condition, x, y)


def data_dependent(name):
    """A refusal for functions whose result shape depends on the data."""
    return refused(name, "its result has a data-dependent shape, which is not known while "
                   "tracing", "select values with np.where(cond, x, y), or compute it outside "
                   "the kernel (docs/kernels.md lists what kernels support)")


def refused(name, why, hint):
    """A function that raises KernelError saying why ``np.<name>`` is not supported."""
    def f(*args, **kwargs):
        raise KernelError(f"np.{name} is not supported inside kernels: {why}", hint=hint)
    f.__name__ = name
    return f


# ------------------------------------------------------------------ scans
def _scan(kind, a, axis, dtype):
    """numpy's cumsum/cumprod as a sequential scan along ``axis`` (kd.scan: O(n) work in
    numpy's order of additions, parallel over the other axes)."""
    from . import scan as sc
    return (sc.cumsum if kind == "sum" else sc.cumprod)(a, axis, dtype)


def cumsum(a, axis=None, dtype=None, out=None):
    """numpy's ``cumsum``: a sequential scan along the axis (``kd.cumsum``)."""
    if out is not None:
        raise KernelError("cumsum(out=...) is not supported inside kernels", hint="return the result")
    return _scan("sum", a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    """numpy's ``cumprod``, as ``cumsum``."""
    if out is not None:
        raise KernelError("cumprod(out=...) is not supported inside kernels", hint="return the result")
    return _scan("prod", a, axis, dtype)
