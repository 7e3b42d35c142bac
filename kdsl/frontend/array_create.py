"""Arrays made inside a kernel: ``arange``, ``linspace``, ``eye``/``identity``/``tri``,
``zeros``/``ones``/``full``/``empty`` (and ``*_like``), of static or symbolic sizes,
and numpy arrays captured from Python (``np.arange(4)`` written in the kernel).

They are lazy index expressions (no stage, no memory): ``arange``'s element i is
numpy's ``start + i * delta``; ``linspace`` follows numpy's formula (``stop``
exactly at the end).  ``np.arange(n)`` of a traced size cannot reach kdsl (numpy
converts its arguments first): write ``kd.arange(n)`` or ``np.arange(n, like=x)``.
A numpy array built while tracing (``np.arange(4)``, ``np.linspace(0, 1, 5)``) or
captured from Python becomes a compile-time constant when it is a 1-D arithmetic
progression (any length, exact to the bit) or has at most ``MAX_CAPTURED``
elements; its values are frozen when the kernel is traced.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .. import dtypes as dt
from ..errors import KernelError, KernelValueError, _is_internal
from ..ir import make as mk
from ..ir import nodes as n
from .array import Array, index_expr
from .ops import _as_dtype, asarray, cast_to

C = n.CmpOp
#: captured numpy arrays up to this many elements become constants (a select tree)
MAX_CAPTURED = 64


def _const_array(dims, dtype, fn, op) -> Array:
    return Array(tuple(dims), dtype, fn, op=op)


def _shape(shape):
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = tuple(index_expr(s, "size") for s in shape)
    for d in dims:
        if isinstance(d, n.Const) and d.value < 0:
            raise KernelValueError("negative dimensions are not allowed", hint="sizes are >= 0")
    return dims


def _no_order(order, like=None):
    if order not in ("C", "K", "A", None):
        raise KernelError("only C order is supported inside kernels", hint="drop order=")


# ------------------------------------------------------------------ constant fills
def full(shape, fill_value, dtype=None, order="C", *, like=None, device=None):
    """numpy's ``full`` (a lazy constant; the dtype of ``fill_value`` by default)."""
    _no_order(order)
    v = asarray(fill_value)
    if v.ndim != 0:
        raise KernelError("full: fill_value must be a scalar inside kernels",
                          hint="broadcast an array with np.broadcast_to")
    d = _as_dtype(dtype) if dtype is not None else dt.promote(v.dtype)
    e = cast_to(v.at(()), d)
    return _const_array(_shape(shape), d, lambda idx: e, "full")


def zeros(shape, dtype=float, order="C", *, like=None, device=None):
    """numpy's ``zeros`` (float64 by default)."""
    return full(shape, 0, dtype if dtype is not None else float, order)


def ones(shape, dtype=float, order="C", *, like=None, device=None):
    """numpy's ``ones`` (float64 by default)."""
    return full(shape, 1, dtype if dtype is not None else float, order)


def empty(shape, dtype=float, order="C", *, like=None, device=None):
    """numpy's ``empty``: its values are unspecified; kdsl gives zeros."""
    return zeros(shape, dtype, order)


def _like(fill):
    def f(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        a = asarray(a)
        return full(a.shape if shape is None else shape, fill, dtype if dtype is not None else a.dtype)
    f.__doc__ = f"numpy's ``*_like`` filled with {fill}."
    return f


zeros_like, ones_like, empty_like = _like(0), _like(1), _like(0)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, device=None):
    """numpy's ``full_like``."""
    a = asarray(a)
    return full(a.shape if shape is None else shape, fill_value,
                dtype if dtype is not None else a.dtype)


# ------------------------------------------------------------------ eye / tri
def eye(N, M=None, k=0, dtype=float, order="C", *, like=None, device=None):
    """numpy's ``eye``: ones on the k-th diagonal."""
    _no_order(order)
    d = _as_dtype(dtype if dtype is not None else float)
    kk = index_expr(k, "k")
    one, zero = n.const(1, d), n.const(0, d)
    dims = _shape((N, N if M is None else M))
    return _const_array(dims, d, lambda idx: mk.select(
        mk.compare(C.EQ, mk.sub(idx[1], idx[0]), kk), one, zero), "eye")


def identity(n_, dtype=None, *, like=None):
    """numpy's ``identity``."""
    return eye(n_, dtype=dtype)


def tri(N, M=None, k=0, dtype=float, *, like=None):
    """numpy's ``tri``: ones at and below the k-th diagonal."""
    d = _as_dtype(dtype if dtype is not None else float)
    kk = index_expr(k, "k")
    dims = _shape((N, N if M is None else M))
    return _const_array(dims, d, lambda idx: mk.select(
        mk.compare(C.LE, mk.sub(idx[1], idx[0]), kk), n.const(1, d), n.const(0, d)), "tri")


# ------------------------------------------------------------------ arange / linspace
def _pyval(x):
    if isinstance(x, Array):
        return x.pyvalue
    if isinstance(x, np.generic):
        return x.item()
    return x


def arange(start, stop=None, step=None, dtype=None, *, like=None, device=None):
    """numpy's ``arange`` of static or traced integer bounds (static float bounds too)."""
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    vals = [asarray(v) for v in (start, stop, step)]
    for v in vals:
        if v.ndim != 0:
            raise KernelError("arange: start, stop and step must be scalars",
                              hint="np.arange(n) or np.arange(lo, hi, step)")
    res = _as_dtype(dtype) if dtype is not None else dt.promote(
        *[(_pyval(v) if v.weak and _pyval(v) is not None else v.dtype) for v in vals])
    st = _pyval(vals[2])
    if st is None:
        raise KernelError("arange: the step must be a static number", hint="pass a Python int or float")
    if st == 0:
        raise KernelValueError("arange: step must not be zero (numpy raises here too)",
                               hint="pass a nonzero step")
    py = [_pyval(v) for v in vals]
    if all(p is not None for p in py) and res is not dt.bfloat16:
        # static: numpy's own values, embedded exactly (an arithmetic progression)
        out = captured(np.arange(*py, dtype=res.np))
        if out is not None:
            out.op = "arange"
            return out
    if any(p is None for p in py):
        if not all((v.dtype.is_int or v.dtype.is_bool) for v in vals):
            raise KernelError("arange with traced float bounds has a length not known while "
                              "tracing", hint="use integer bounds (kd.arange(n) * step + start)")
        lo, hi = index_expr(vals[0], "start"), index_expr(vals[1], "stop")
        s = int(st)
        span = mk.sub(hi, lo) if s > 0 else mk.sub(lo, hi)
        length = mk.max_(mk.floordiv(mk.add(span, abs(s) - 1), abs(s)), 0)
    else:
        length = mk.as_expr(len(np.arange(*py)))
    wd = res if not res.is_float else res.compute
    if res.is_float:
        first = cast_to(vals[0].at(()), wd)
        second = mk.binary(n.BinOp.ADD, first, cast_to(vals[2].at(()), wd))
        delta = mk.binary(n.BinOp.SUB, second, first)
    else:
        first, delta = cast_to(vals[0].at(()), wd), cast_to(vals[2].at(()), wd)

    def fn(idx):
        return cast_to(mk.binary(n.BinOp.ADD, first,
                                 mk.binary(n.BinOp.MUL, cast_to(idx[0], wd), delta)), res)
    return _const_array((length,), res, fn, "arange")


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """numpy's ``linspace`` of scalar bounds and a static or traced ``num``."""
    s0, s1 = asarray(start), asarray(stop)
    if s0.ndim or s1.ndim:
        raise KernelError("linspace: array start/stop are not supported inside kernels",
                          hint="use scalar bounds")
    num_e = index_expr(num, "num")
    if isinstance(num_e, n.Const) and num_e.value < 0:
        raise KernelValueError(f"Number of samples, {num_e.value}, must be non-negative.",
                               hint="num >= 0")
    res = _as_dtype(dtype) if dtype is not None else dt.promote(
        dt.float64, *[v.dtype for v in (s0, s1) if not v.weak])
    f = dt.float64 if not res.is_float else dt.promote(res, dt.float64)
    a, b = cast_to(s0.at(()), f), cast_to(s1.at(()), f)
    nf = cast_to(num_e, f)
    div = mk.binary(n.BinOp.SUB, nf, n.const(1.0, f)) if endpoint else nf
    delta = mk.binary(n.BinOp.SUB, b, a)
    step = mk.binary(n.BinOp.DIV, delta, div)

    def fn(idx):
        i = cast_to(idx[0], f)
        y = mk.select(mk.compare(C.GT, div, n.const(0.0, f)), mk.binary(n.BinOp.MUL, i, step),
                      mk.binary(n.BinOp.MUL, i, delta))
        y = mk.binary(n.BinOp.ADD, y, a)
        if endpoint:
            last = mk.binary(n.BinOp.AND, mk.compare(C.EQ, idx[0], mk.sub(num_e, 1)),
                             mk.compare(C.GT, num_e, 1))
            y = mk.select(last, b, y)
        if res.is_int:
            y = mk.unary(n.UnOp.FLOOR, y)
        return cast_to(y, res)
    out = _const_array((num_e,), res, fn, "linspace")
    if retstep:
        return out, Array((), f, lambda _i: mk.select(mk.compare(C.GT, div, n.const(0.0, f)), step,
                                                     n.const(float("nan"), f)), op="linspace")
    return out


# ------------------------------------------------------------------ captured numpy arrays
def _named_outside(x) -> bool:
    """``x`` is a global or a closure variable of the user's innermost frame: an array the
    kernel captured from Python (refused: it would be frozen while the user may change it)."""
    f = sys._getframe(1)
    npdir = os.path.dirname(np.__file__)
    while f is not None and (_is_internal(f.f_code.co_filename) or
                             f.f_code.co_filename.startswith(npdir)):
        f = f.f_back
    if f is None:
        return False
    code = f.f_code
    if any(f.f_locals.get(v) is x for v in code.co_freevars):
        return True
    return any(f.f_globals.get(v) is x for v in code.co_names)


def captured(x: np.ndarray):
    """A numpy array made while tracing (``np.arange(4)`` in the kernel's body) as a constant
    Array; None for one captured from Python (a global or closure variable) or too big."""
    if _named_outside(x):
        return None
    try:
        d = _as_dtype(x.dtype)
    except Exception:           # noqa: BLE001  (object, complex, ...: left to asarray's error)
        return None
    x = np.array(x, copy=True)   # frozen: later changes of the user's array are not seen
    if x.ndim == 1 and x.size >= 2 and d is not dt.bool_:
        wd = d.compute if d.is_float else d
        with np.errstate(all="ignore"):
            first = x[:1].astype(wd.np)
            delta = (x[1:2].astype(wd.np) - first)
            cand = (first + np.arange(x.size).astype(wd.np) * delta).astype(x.dtype)
        if cand.tobytes() == x.tobytes():
            f0, dl = n.const(first[0].item(), wd), n.const(delta[0].item(), wd)
            return _const_array((mk.as_expr(x.size),), d, lambda idx: cast_to(mk.binary(
                n.BinOp.ADD, f0, mk.binary(n.BinOp.MUL, cast_to(idx[0], wd), dl)), d), "constant")
    if x.size > MAX_CAPTURED:
        return None
    flat = [n.const(v, d) for v in x.reshape(-1).tolist()]
    shape = x.shape

    def fn(idx):
        k = mk.as_expr(0)
        for j, s in enumerate(shape):
            k = mk.add(mk.mul(k, s), idx[j])
        return _tree(k, flat, 0, len(flat))
    return _const_array(tuple(mk.as_expr(s) for s in shape), d, fn, "constant")


def _tree(k, vals, lo, hi):
    """``vals[k]`` for ``k`` in [lo, hi) as a balanced tree of selects."""
    if hi - lo <= 1:
        return vals[lo] if hi > lo else n.const(0, vals[0].dtype) if vals else n.const(0.0)
    mid = (lo + hi) // 2
    return mk.select(mk.compare(C.LT, k, mid), _tree(k, vals, lo, mid), _tree(k, vals, mid, hi))

