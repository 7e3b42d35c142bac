"""The ``out=``, ``where=`` and ``dtype=`` keywords of numpy ufuncs inside kernels.

Traced arrays are values, so ``out=`` cannot write memory; what it can mean, and does:

- ``np.f(..., out=c)`` makes ``c`` hold the result from then on, and returns ``c`` (numpy
  returns ``out`` too).  The result is cast to ``c``'s dtype (numpy's ``same_kind`` rule:
  ``np.add(float, float, out=int_array)`` is a DTypeError, as numpy raises) and broadcast
  to ``c``'s shape (a result that does not fit it is a ShapeError, as numpy raises).
- ``where=mask`` (with ``out=``) keeps ``c``'s earlier values where ``mask`` is False:
  the idiom ``r = np.zeros_like(x); np.divide(a, b, out=r, where=b != 0)``.  Without
  ``out=``, numpy leaves those elements uninitialised: refused, with the kd.where spelling.
- ``c`` must be an array the kernel made and nothing has read yet: a fill
  (``np.zeros``/``ones``/``full``/``empty`` and their ``*_like``) or an elementwise
  result (``x * 2``, an earlier ``out=``).  Rebinding a kernel argument would write the
  caller's array (kernels return their results); a view (``y[1:]``, ``y.T``) would have
  to write through to ``y``; and a value some other expression already used would change
  under it (numpy computed that expression before the write).  These are refused, each
  with what to write instead.  (Whether anything else holds ``c`` is asked of Python's
  garbage collector: any reference besides the call's own, a local variable excepted,
  counts as a use.)

``dtype=`` selects the loop as numpy does: the inputs are cast to it, checked with
``same_kind`` like numpy (``np.add(float_array, 1, dtype=np.int32)`` raises).
"""
from __future__ import annotations

import gc
import types

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, KernelError, ShapeError
from ..ir import make as mk
from .array import Array  # noqa: I001  (array first: it completes ops' import cycle)
from . import context, ops

#: ops whose arrays are fresh values in numpy (not views, not arguments)
_FILL_OPS = ("full", "astype")


def _np_dtype(d: dt.DType):
    return np.dtype("float16" if d is dt.bfloat16 else d.name)


def check_input_casts(name: str, inputs, dtype) -> None:
    """numpy's ``same_kind`` check of the inputs against a ``dtype=`` loop."""
    d = _np_dtype(ops._as_dtype(dtype))
    for x in inputs:
        x = ops.asarray(x)
        if x.weak:
            continue
        if not np.can_cast(_np_dtype(x.dtype), d, "same_kind"):
            raise DTypeError(f"np.{name}(dtype={d.name}): cannot cast input of type "
                             f"{x.dtype.name} to {d.name} with casting rule 'same_kind' "
                             "(numpy raises too)",
                             hint=f"cast the input first (x.astype(np.{d.name})) or drop dtype=")


def _fresh(c: Array, allowed: set, inputs: tuple) -> str | None:
    """Why ``c`` cannot be an ``out=`` target, or None."""
    if c.tensor is not None and c.tensor.is_input:
        return "it is a kernel argument, and kernels return their results instead of writing them"
    ufuncs = {u.__name__ for u in vars(np).values() if isinstance(u, np.ufunc)}
    if c.op not in _FILL_OPS and c.op not in ufuncs:
        return (f"it is not an array the kernel made with np.zeros/ones/full/empty(_like) or an "
                f"elementwise operation (it comes from {c.op!r}, which may be a view of another "
                "array, and a traced value cannot write through to it)")
    for r in gc.get_referrers(c):
        if id(r) in allowed or isinstance(r, types.FrameType):
            continue
        if type(r) is tuple and len(r) >= len(inputs) and all(
                a is b for a, b in zip(r[len(r) - len(inputs):], inputs)) and (
                len(r) == len(inputs) or (len(r) == len(inputs) + 3 and isinstance(r[1], np.ufunc))):
            continue      # the call's own arguments: np.f(*inputs), __array_ufunc__(self, f, m, *inputs)
        return ("another value already uses it (numpy computed that value before this write, "
                "and traced values are lazy)")
    return None


def _refuse(name: str, why: str):
    raise KernelError(f"np.{name}(out=...): the out array cannot be written here: {why}",
                      hint=f"return the result instead (y = np.{name}(...)), or write into a fresh "
                           "array: r = np.zeros_like(x); np.{0}(..., out=r)".format(name))


def _fits(res: Array, c: Array, name: str) -> None:
    ctx = context.current()
    dims, _ = ops.broadcast_dims([c.dims, res.dims], f"np.{name}(out=...)")
    same = len(dims) == len(c.dims) and all(
        ctx.resolve(a) == ctx.resolve(b) or a is b for a, b in zip(dims, c.dims))
    if not same:
        raise ShapeError(f"np.{name}(out=...): the result does not fit the out array's shape "
                         "(numpy: non-broadcastable output operand)",
                         hint="give an out array of the full broadcast shape of the inputs")


def _snapshot(c: Array) -> Array:
    """A new traced value equal to ``c`` now (what the result and the masked-out elements
    read, so that rebinding ``c`` cannot feed its new value back into them)."""
    s = Array(c.dims, c.dtype, c._fn, op=c.op, weak=c.weak, size=c.size_est, tensor=c.tensor,
              iv=c.iv, pyvalue=c.pyvalue, depth=c.depth)
    s._memo, s.materialized = c._memo, c.materialized
    return s


def _write(name: str, c: Array, old: Array, res: Array, mask) -> Array:
    """``c`` rebound to ``res`` (cast, broadcast, masked by ``mask`` where given; ``old`` is
    ``c``'s snapshot)."""
    if not np.can_cast(_np_dtype(res.dtype), _np_dtype(c.dtype), "same_kind") and not res.weak:
        raise DTypeError(f"np.{name}(out=...): cannot cast the {res.dtype.name} result to the "
                         f"out array's {c.dtype.name} with casting rule 'same_kind' (numpy raises too)",
                         hint=f"use an out array of type {res.dtype.name}, or cast the result: "
                              f"r = np.{name}(...).astype(...)")
    _fits(res, c, name)
    d = c.dtype        # (the lambdas must not hold c itself: a later out=c would see a use)
    if mask is None:
        new = ops.elementwise(name, [old, res], lambda o, v: ops.cast_to(v, d), d)
    else:
        m = ops.asarray(mask)
        _fits(m, c, name)
        new = ops.elementwise(name, [old, res, m], lambda o, v, k: mk.select(
            ops._truth(k), ops.cast_to(v, d), o), d)
    # rebind the traced value in place (nothing else holds it: checked by _fresh)
    c._fn, c._memo, c.tensor, c.materialized = new._fn, {}, new.tensor, None
    c.size_est, c.depth, c.op, c.weak, c.pyvalue = new.size_est, new.depth, name, False, None
    return c


def call_with_out(array_ufunc, self, ufunc, method, inputs, kwargs):
    """``np.<ufunc>(*inputs, out=..., where=...)`` (``array_ufunc``: the plain dispatch)."""
    name = ufunc.__name__
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    if method != "__call__":
        raise KernelError(f"np.{name}.{method}(out=...) is not supported inside kernels",
                          hint="return the result instead of writing into an array")
    outs = out if isinstance(out, tuple) else (out,)
    if out is None or all(o is None for o in outs):
        raise KernelError(f"np.{name}(where=...) is not supported inside kernels without out= "
                          "(numpy leaves the masked elements uninitialised)",
                          hint=f"use kd.where(mask, np.{name}(...), other), or give out= an array "
                               "holding the other values")
    allowed = {id(out), id(inputs), id(outs), id(kwargs)}
    for c in outs:
        if c is None:
            continue
        if not isinstance(c, Array):
            raise KernelError(f"np.{name}(out=...): out must be a traced array the kernel made, "
                              f"got {type(c).__name__}",
                              hint="return the result instead of writing into a numpy array")
        why = _fresh(c, allowed, inputs)
        if why:
            _refuse(name, why)
    snaps = {id(c): _snapshot(c) for c in outs if c is not None}
    inputs = tuple(snaps.get(id(x), x) if isinstance(x, Array) else x for x in inputs)
    if isinstance(where, Array) and id(where) in snaps:
        where = snaps[id(where)]
    res = array_ufunc(self if id(self) not in snaps else snaps[id(self)], ufunc, method, *inputs,
                      **kwargs)
    results = res if isinstance(res, tuple) else (res,)
    if len(outs) != len(results):
        raise KernelError(f"np.{name} has {len(results)} outputs but out= gives {len(outs)}",
                          hint=f"pass a tuple of {len(results)} arrays (None for a new one)")
    mask = None if where is True else where
    done = tuple(r if c is None else _write(name, c, snaps[id(c)], r, mask)
                 for c, r in zip(outs, results))
    return done if isinstance(res, tuple) else done[0]
