"""Joining and rearranging arrays: ``concatenate``, ``stack``, ``hstack``, ``vstack``,
``pad``, ``roll``, ``flip``/``fliplr``/``flipud``, ``tril``/``triu``, ``expand_dims``,
``squeeze``, ``moveaxis``, ``swapaxes``, ``broadcast_to``, ``ravel``.

All of them are lazy index arithmetic (no stage): an element of the result is a
``select`` over the parts it may come from (``concatenate``), or a read at a
computed index (``pad``, ``roll``, ``flip``).  Reads in an untaken branch are
clamped by kdsl.frontend.access like any ``kd.where``.  numpy's dtypes: joins
give ``np.result_type`` of the parts; pads and rolls keep the dtype.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import KernelError, KernelValueError, ShapeError, user_location
from ..graph import Constraint
from ..ir import make as mk
from ..ir import nodes as n
from . import context
from .array import Array, index_expr, norm_axis, static_value
from .indexing import expand_dims_at
from .ops import _as_dtype, asarray, broadcast_dims, cast_to

C = n.CmpOp


def _lazy(dims, dtype, fn, parts, op, weak=False) -> Array:
    return Array(tuple(dims), dtype, fn, op=op, weak=weak,
                 size=1 + sum(p.size_est for p in parts), depth=1 + max(p.depth for p in parts))


def _same_dim(ctx, x, y, what):
    rx, ry = ctx.resolve(x), ctx.resolve(y)
    if rx == ry:
        return x
    if isinstance(rx, n.Const) and isinstance(ry, n.Const):
        raise ShapeError(f"{what}: the sizes {rx.value} and {ry.value} differ",
                         hint="all the input array dimensions except for the concatenation "
                              "axis must match exactly")
    return ctx.unify(x, y, what)


def _seq(arrays, what):
    if isinstance(arrays, Array) or not isinstance(arrays, (tuple, list)):
        raise KernelError(f"{what} takes a tuple or list of arrays",
                          hint=f"np.{what}((a, b), ...)")
    if not arrays:
        raise KernelValueError("need at least one array to concatenate", hint="pass one or more arrays")
    return [asarray(a) for a in arrays]


# ------------------------------------------------------------------ joins
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    """numpy's ``concatenate`` (``axis=None`` joins the flattened arrays)."""
    if out is not None:
        raise KernelError("concatenate(out=...) is not supported inside kernels",
                          hint="return the result")
    parts = _seq(arrays, "concatenate")
    if axis is None:
        parts, axis = [p.reshape(-1) for p in parts], 0
    nd = parts[0].ndim
    if nd == 0:
        raise KernelValueError("zero-dimensional arrays cannot be concatenated",
                               hint="use np.stack, or index them with [None]")
    for p in parts:
        if p.ndim != nd:
            raise KernelValueError(f"all the input arrays must have same number of dimensions, "
                                   f"got {nd} and {p.ndim}", hint="reshape them to the same rank")
    ax = norm_axis(axis, nd)
    res = _as_dtype(dtype) if dtype is not None else dt.promote(*[p.dtype for p in parts])
    ctx = context.current()
    dims = list(parts[0].dims)
    for p in parts[1:]:
        for j in range(nd):
            if j != ax:
                dims[j] = _same_dim(ctx, dims[j], p.dims[j], "concatenate")
    # a part known to be empty along the axis has nothing to give (and nothing to read)
    parts = [p for p in parts if static_value(p.dims[ax]) != 0] or parts[:1]
    offs, total = [], mk.as_expr(0)
    for p in parts:
        offs.append(total)
        total = mk.add(total, p.dims[ax])
    dims[ax] = total

    def fn(idx):
        j = idx[ax]
        val = None
        for p, o in zip(parts, offs):
            e = cast_to(p.at(idx[:ax] + (mk.sub(j, o),) + idx[ax + 1:]), res)
            val = e if val is None else mk.select(mk.compare(C.GE, j, o), e, val)
        return val

    return _lazy(dims, res, fn, parts, "concatenate")


def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    """numpy's ``stack``: join equal-shaped arrays along a new axis."""
    parts = _seq(arrays, "stack")
    nd = parts[0].ndim
    for p in parts:
        if p.ndim != nd:
            raise KernelValueError("all input arrays must have the same shape",
                                   hint="stack needs arrays of one shape")
    ax = norm_axis(axis, nd + 1)
    return concatenate([expand_dims_at(p, [ax]) for p in parts], ax, out=out, dtype=dtype)


def _atleast(a: Array, k: int) -> Array:
    if a.ndim >= k:
        return a
    if k == 2:
        return a.reshape(1, -1) if a.ndim == 1 else a.reshape(1, 1)
    return a.reshape((1,) * (k - a.ndim) + tuple(a.shape))


def hstack(tup, dtype=None, casting="same_kind"):
    """numpy's ``hstack``: along axis 1 (axis 0 for 1-D arrays)."""
    parts = [_atleast(p, 1) for p in _seq(tup, "hstack")]
    return concatenate(parts, 0 if parts[0].ndim == 1 else 1, dtype=dtype)


def vstack(tup, dtype=None, casting="same_kind"):
    """numpy's ``vstack``: along axis 0 of the arrays made at least 2-D."""
    return concatenate([_atleast(p, 2) for p in _seq(tup, "vstack")], 0, dtype=dtype)


# ------------------------------------------------------------------ views
def expand_dims(a, axis):
    """numpy's ``expand_dims`` (an int or a tuple of ints)."""
    a = asarray(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = a.ndim + len(axes)
    pos = sorted(norm_axis(x, nd) for x in axes)
    if len(set(pos)) != len(pos):
        raise KernelValueError("repeated axis in expand_dims", hint="name each axis once")
    return expand_dims_at(a, pos)


def squeeze(a, axis=None):
    """numpy's ``squeeze``: drop size-1 dims (all statically 1 ones, or those named)."""
    a = asarray(a)
    if axis is None:
        axes = [j for j, d in enumerate(a.dims) if static_value(d) == 1]
    else:
        axes = [norm_axis(x, a.ndim) for x in (axis if isinstance(axis, (tuple, list)) else (axis,))]
        for j in axes:
            if static_value(a.dims[j]) != 1:
                raise KernelValueError(f"cannot select an axis to squeeze out which has size not "
                                       f"equal to one (axis {j})", hint="squeeze only size-1 axes")
    key = tuple(0 if j in axes else slice(None) for j in range(a.ndim))
    return a[key] if axes else a


def moveaxis(a, source, destination):
    """numpy's ``moveaxis`` (a transpose)."""
    a = asarray(a)
    src = [norm_axis(x, a.ndim) for x in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [norm_axis(x, a.ndim) for x in
           (destination if isinstance(destination, (tuple, list)) else (destination,))]
    if len(src) != len(dst):
        raise KernelValueError("moveaxis: source and destination must have the same number of "
                               "elements", hint="pair each source axis with a destination")
    order = [j for j in range(a.ndim) if j not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(order)


def swapaxes(a, axis1, axis2):
    """numpy's ``swapaxes`` (a transpose)."""
    a = asarray(a)
    p = list(range(a.ndim))
    i, j = norm_axis(axis1, a.ndim), norm_axis(axis2, a.ndim)
    p[i], p[j] = p[j], p[i]
    return a.transpose(p)


def broadcast_to(a, shape):
    """numpy's ``broadcast_to`` (a lazy view)."""
    a = asarray(a)
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    target = tuple(index_expr(s, "size") for s in shape)
    if len(target) < a.ndim:
        raise ShapeError("broadcast_to: the target shape has fewer dimensions than the array",
                         hint="give at least a.ndim sizes")
    dims, (m, _) = broadcast_dims([a.dims, target], "broadcast_to")
    ctx = context.current()
    for d, t in zip(dims, target):
        if ctx.resolve(d) != ctx.resolve(t):
            raise ShapeError("broadcast_to: the array cannot be broadcast to the requested shape",
                             hint="each dimension must equal the target or be 1")
    return _lazy(target, a.dtype, lambda idx: a.at(m(idx)), [a], "broadcast_to", a.weak)


def ravel(a, order="C"):
    """numpy's ``ravel`` (a row-major reshape)."""
    return asarray(a).reshape(-1, order=order)


# ------------------------------------------------------------------ index remaps
def flip(m, axis=None):
    """numpy's ``flip`` (all axes by default)."""
    m = asarray(m)
    if axis is None:
        axes = range(m.ndim)
    else:
        axes = [norm_axis(x, m.ndim) for x in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    key = tuple(slice(None, None, -1) if j in axes else slice(None) for j in range(m.ndim))
    return m[key] if m.ndim else m


def fliplr(m):
    """numpy's ``fliplr`` (axis 1; needs >= 2 dims)."""
    m = asarray(m)
    if m.ndim < 2:
        raise KernelValueError("fliplr: the input must be >= 2-d", hint="use np.flip for 1-D")
    return flip(m, 1)


def flipud(m):
    """numpy's ``flipud`` (axis 0; needs >= 1 dim)."""
    m = asarray(m)
    if m.ndim < 1:
        raise KernelValueError("flipud: the input must be >= 1-d", hint="pass an array")
    return flip(m, 0)


def roll(a, shift, axis=None):
    """numpy's ``roll``: elements leaving one end come back at the other."""
    a = asarray(a)
    if axis is None:
        return roll(a.reshape(-1), shift, 0).reshape(a.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise KernelValueError("roll: 'shift' and 'axis' should be scalars or 1D sequences of the "
                               "same length", hint="one shift per axis")
    total = {}
    for s, x in zip(shifts, axes):
        j = norm_axis(x, a.ndim)
        total[j] = mk.add(total.get(j, mk.as_expr(0)), index_expr(s, "shift"))

    def fn(idx):
        src = list(idx)
        for j, s in total.items():
            d = a.dims[j]
            src[j] = mk.mod(mk.sub(idx[j], s), d)     # Python's sign rule: in [0, d)
        return a.at(tuple(src))

    return _lazy(a.dims, a.dtype, fn, [a], "roll", a.weak)


def _tri(m, k, lower: bool, name):
    m = asarray(m)
    if m.ndim == 0:
        raise KernelValueError(f"{name}: the input must be at least 1-d", hint="pass an array")
    if m.ndim == 1:
        m = broadcast_to(m, (m.shape[0], m.shape[0]))
    kk = index_expr(k, "k")

    def fn(idx):
        i, j = idx[-2], idx[-1]
        diff = mk.sub(j, i)
        keep = mk.compare(C.LE, diff, kk) if lower else mk.compare(C.GE, diff, kk)
        return mk.select(keep, m.at(idx), n.const(0, m.dtype))

    return _lazy(m.dims, m.dtype, fn, [m], name)


def tril(m, k=0):
    """numpy's ``tril``: zero above the k-th diagonal (of the last two axes)."""
    return _tri(m, k, True, "tril")


def triu(m, k=0):
    """numpy's ``triu``: zero below the k-th diagonal (of the last two axes)."""
    return _tri(m, k, False, "triu")


# ------------------------------------------------------------------ pad
_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_widths(pad_width, nd):
    """numpy's pad_width forms as ``nd`` static (before, after) pairs."""
    w = np.asarray(pad_width, dtype=object)
    try:
        w = np.broadcast_to(w, (nd, 2)) if w.ndim <= 2 else None
    except ValueError:
        w = None
    if w is None:
        raise KernelValueError(f"pad: pad_width {pad_width!r} does not fit an array of {nd} "
                               "dimensions", hint="an int, (before, after), or one pair per axis")
    out = []
    for b, a in w.tolist():
        for v in (b, a):
            if isinstance(v, Array) or not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise KernelError("pad: pad widths must be static ints",
                                  hint="pass Python ints (or kd.kernel(constants=...) values)")
            if v < 0:
                raise KernelValueError("pad: index can't contain negative values",
                                       hint="pad widths are >= 0")
        out.append((int(b), int(a)))
    return out


def _pad_src(mode, s, d):
    """The source index of output position ``s`` (already shifted by ``before``) of a pad."""
    one = mk.as_expr(1)
    if mode == "edge":
        return mk.min_(mk.max_(s, 0), mk.sub(d, 1))
    if mode == "wrap":
        return mk.mod(s, d)
    if mode == "symmetric":
        p = mk.mod(s, mk.mul(d, 2))
        return mk.select(mk.compare(C.LT, p, d), p, mk.sub(mk.sub(mk.mul(d, 2), 1), p))
    # reflect: period 2(d - 1); a single element reflects onto itself
    per = mk.max_(mk.mul(mk.sub(d, one), 2), one)
    p = mk.mod(s, per)
    r = mk.select(mk.compare(C.LT, p, d), p, mk.sub(per, p))
    return r if static_value(d) not in (None, 1) else mk.select(mk.compare(C.EQ, d, one),
                                                                mk.as_expr(0), r)


def pad(array, pad_width, mode="constant", **kwargs):
    """numpy's ``pad`` with static widths, modes constant, edge, reflect, symmetric, wrap."""
    a = asarray(array)
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise KernelError(f"pad: mode {mode!r} is not supported inside kernels",
                          hint=f"use one of {', '.join(_PAD_MODES)}")
    cval = kwargs.pop("constant_values", 0)
    if kwargs.pop("reflect_type", "even") != "even":
        raise KernelError("pad: reflect_type='odd' is not supported", hint="use the default 'even'")
    if kwargs:
        raise KernelError(f"pad: unexpected keyword(s) {', '.join(kwargs)}",
                          hint="pad(array, pad_width, mode, constant_values=...)")
    widths = _pad_widths(pad_width, a.ndim)
    if mode != "constant":
        for j, (b, f) in enumerate(widths):
            if not (b or f):
                continue
            msg = f"pad: can't extend empty axis {j} using modes other than 'constant' or 'empty'"
            if static_value(a.dims[j]) == 0:
                raise KernelValueError(msg, hint="use mode='constant'")
            if static_value(a.dims[j]) is None:     # numpy's ValueError, checked at each call
                context.current().constraints.append(Constraint(
                    mk.compare(C.GT, a.dims[j], 0), n.const(True), msg + " (numpy raises here too)",
                    user_location(), KernelValueError, (), "use mode='constant', or guard the call "
                    "on the axis' length"))
    consts = None
    if mode == "constant":
        cv = np.asarray(cval, dtype=object)
        try:
            cv = np.broadcast_to(cv, (a.ndim, 2)).tolist()
        except ValueError:
            raise KernelValueError("pad: constant_values does not fit the array's dimensions",
                                   hint="a scalar, (before, after), or one pair per axis") from None
        consts = [[cast_to(asarray(v).at(()), a.dtype) for v in pair] for pair in cv]
    dims = [mk.add(d, b + f) for d, (b, f) in zip(a.dims, widths)]

    def fn(idx):
        src, outside = [], []
        for j, (d, (b, f)) in enumerate(zip(a.dims, widths)):
            s = mk.sub(idx[j], b) if b else idx[j]
            if not (b or f):
                src.append(s)
                outside.append(None)
            elif mode == "constant":
                src.append(s)
                outside.append((mk.compare(C.LT, s, 0), mk.compare(C.GE, s, d)))
            else:
                src.append(_pad_src(mode, s, d))
                outside.append(None)
        # an axis known to be empty: every position is padding, there is nothing to read
        empty = any(static_value(d) == 0 for d in a.dims)
        val = n.const(0, a.dtype) if empty else a.at(tuple(src))
        if mode == "constant":      # numpy pads axis after axis: a later axis' value wins corners
            for j, o in enumerate(outside):
                if o is not None:
                    val = mk.select(o[0], consts[j][0], mk.select(o[1], consts[j][1], val))
        return val

    return _lazy(dims, a.dtype, fn, [a], "pad")
