"""The ``out=`` argument of a kernel call: overlap rules, validation and casting.

numpy's ufunc rules, which kdsl follows on every backend:

- an ``out=`` array that shares memory with an input (or another output), or whose own
  elements overlap (a zero stride: ``np.broadcast_to`` made writeable, ``as_strided``), gets
  the result as if computed into a fresh array and then copied (``overlaps``);
- an ``out=`` of another dtype receives the result cast with numpy's ``same_kind`` rule (the
  default ``casting=`` of ``np.add(a, b, out=o)``); a cast that rule forbids (a float result
  into an integer array) is refused with numpy's message (``check_out``).
"""
from __future__ import annotations

import sys

import numpy as np

from ..errors import ArgumentError, user_location
from .arrays import array_info
from .signature import MASKED_HINT, masked_message


def self_overlapping(o: np.ndarray) -> bool:
    """Whether two elements of ``o`` may share memory (a zero or too-small stride).  Cheap and
    conservative: a layout it cannot prove disjoint counts as overlapping (it only costs a copy)."""
    if o.flags.c_contiguous or o.flags.f_contiguous:
        return False
    dims = sorted((abs(s), n) for s, n in zip(o.strides, o.shape) if n > 1)
    if not dims or 0 in o.shape:
        return False
    span = o.itemsize
    for stride, n in dims:
        if stride < span:
            return True
        span = stride * n
    return False


def overlaps(out, args) -> bool:
    """Does an ``out=`` array share memory with an argument, with another out array, or with
    itself?  (Such calls compute into fresh arrays and copy, as numpy does.)"""
    t = type(out)
    if t is not np.ndarray and t is not tuple and not isinstance(out, np.ndarray):
        return False     # a device array: its backend checks (the numpy rule below is host-only)
    outs = out if isinstance(out, tuple) else (out,)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    for k, o in enumerate(outs):
        if not isinstance(o, np.ndarray):
            return False     # the normal path reports the bad out= argument
        if not o.flags.c_contiguous and self_overlapping(o):
            return True
        if any(np.may_share_memory(o, a) for a in arrays) or any(
                np.may_share_memory(o, p) for p in outs[k + 1:] if isinstance(p, np.ndarray)):
            return True
    return False


def check_out(name: str, graph, out) -> tuple:
    """Validate ``out=`` against the traced results; returns per output whether its dtype
    differs from the result's (then the result is cast into it with numpy's same_kind rule)."""
    from ..dtypes import as_dtype
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(graph.outputs):
        raise ArgumentError(f"{name} returns {len(graph.outputs)} array(s) but out= gives "
                            f"{len(outs)}", hint="pass one array per result (a tuple for several)")
    casts = []
    for j, (o, t) in enumerate(zip(outs, graph.outputs)):
        which = f"out= array {j}" if isinstance(out, tuple) else "the out= array"
        if "numpy.ma" in sys.modules and isinstance(o, np.ma.MaskedArray):   # (lazy: ~50 ms)
            raise ArgumentError(f"{name}: {masked_message(which)}", hint=MASKED_HINT)
        info = array_info(o)
        if info is None:
            raise ArgumentError(f"out= entry {j} must be an array, got {type(o).__name__}",
                                hint="pass a numpy array (np.empty(shape, dtype)) or a device "
                                     "array of the backend")
        try:
            d = as_dtype(info[0])
        except TypeError:
            d = None
        cast = d is not t.dtype
        if cast and not (isinstance(o, np.ndarray) and np.can_cast(t.dtype.np, info[0],
                                                                    "same_kind")):
            rule = ("numpy's out= rule (casting='same_kind') forbids it" if isinstance(
                o, np.ndarray) else "a cast into a device array is not supported")
            raise ArgumentError(f"{name}: cannot cast the result from dtype {t.dtype.name} to "
                                f"{which}'s dtype {info[0]}: {rule}",
                                hint=f"allocate out with dtype {t.dtype.name}, or cast the "
                                     f"result yourself: r.astype({info[0]})")
        if len(info[1]) != len(t.shape):
            raise ArgumentError(f"{name}: {which} has {len(info[1])} dims, but the result has "
                                f"{len(t.shape)}", hint="allocate out with the result's shape")
        flags = getattr(o, "flags", None)
        if flags is not None and not getattr(flags, "writeable", True):
            raise ArgumentError(f"{name}: {which} is read-only; the result is written into it, so "
                                "it must be writeable",
                                hint="pass a writeable array (np.empty(...), or a copy: "
                                     "out.copy()), or drop out= to get a new array")
        casts.append(cast)
    return tuple(casts)


def casting_launcher(name: str, plain, tuple_mode: bool):
    """A launcher for an ``out=`` of another dtype: ``plain`` (the launcher without out=)
    computes the result, which is then cast into out (numpy's same_kind rule)."""
    def launch(args, out, stream):
        res = plain(args, None, stream)
        outs, rs = (out, res) if tuple_mode else ((out,), (res,))
        for j, (o, r) in enumerate(zip(outs, rs)):
            if tuple(o.shape) != tuple(r.shape):
                raise ArgumentError(f"{name}: out= array {j} has shape {tuple(o.shape)}, but the "
                                    f"result has shape {tuple(r.shape)}",
                                    hint="allocate out with the result's shape",
                                    loc=user_location())
            np.copyto(o, r, casting="same_kind")
        return out
    return launch
