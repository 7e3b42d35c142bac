"""Bounded memory for the ``numpy`` backend: grid blocks and reads as views.

The reference backend evaluates each stage over an index grid.  Two things
keep every temporary within the chunk budget, whatever the size of the inputs:

- ``blocks(extents, budget)`` cuts a grid into C-ordered blocks of at most
  ``budget`` points (leading axes one step at a time, one axis cut, trailing
  axes whole), used for a stage's spatial axes and for each reduction's axes;
- ``view_read(arr, indices, env)`` serves a tensor read whose every index is
  ``a * axis + b`` (one grid axis per index, each axis used once, constant
  ``a`` and ``b``) by basic slicing: a view of the argument, so a stride-0
  ``np.broadcast_to`` input is never materialised and no index array is built.
  Anything else, and any read that would leave the array, returns None: the
  evaluator's general read (fancy indexing, with its range checks) handles it.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..ir import nodes as n

#: env key: Var -> (grid position, lo, hi) for every grid axis bound to a block
RANGES = "__ranges__"


def blocks(extents: list, budget: int):
    """Yield ``((lo, hi), ...)`` per axis: blocks of at most ``max(budget, 1)`` points covering
    the grid ``extents`` in C order (each block is one contiguous run of the flattened grid,
    so combining partial results block after block keeps left-to-right order).  An empty
    grid gives one block of the whole (empty) grid."""
    budget = max(int(budget), 1)
    nd = len(extents)
    if nd == 0 or 0 in extents or math.prod(extents) <= budget:
        yield tuple((0, e) for e in extents)
        return
    # the axis to cut: trailing axes fit whole, one more would not
    k, tail = nd - 1, 1
    while tail * extents[k] <= budget:
        tail *= extents[k]
        k -= 1
    step = max(1, budget // tail)
    rest = tuple((0, e) for e in extents[k + 1:])
    for lead in itertools.product(*(range(e) for e in extents[:k])):
        head = tuple((i, i + 1) for i in lead)
        for lo in range(0, extents[k], step):
            yield head + ((lo, min(lo + step, extents[k])),) + rest


# ----------------------------------------------------------------- affine indices
def _scalar(v):
    """An integer bound in the environment (a shape or scalar parameter), or None."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
        return int(v)
    return None


def _fits(d, lo: int, hi: int) -> bool:
    """Whether [lo, hi] fits integer dtype ``d`` (so evaluating in ``d`` does not wrap)."""
    if not d.is_int:
        return False
    bits = d.bits - 1 if d.is_signed else d.bits
    return (-(1 << bits) if d.is_signed else 0) <= lo and hi < (1 << bits)


def _linear(e, env, ranges):
    """``(var or None, a, b)`` with ``e == a * var + b`` for every point of the block, or None
    where ``e`` is not of that form, mixes two grid axes, or some sub-expression's values
    would not fit its dtype (the general read then wraps exactly as the IR says)."""
    t = type(e)
    if t is n.Const:
        v = e.value
        form = (None, 0, v) if isinstance(v, int) and not isinstance(v, bool) else None
    elif t is n.Var:
        if e in ranges:
            form = (e, 1, 0)
        else:
            v = _scalar(env.get(e))
            form = None if v is None else (None, 0, v)
    elif t is n.Cast:
        form = _linear(e.a, env, ranges) if e.a.dtype.is_int else None
    elif t is n.Binary and e.op in (n.BinOp.ADD, n.BinOp.SUB, n.BinOp.MUL):
        x, y = _linear(e.a, env, ranges), _linear(e.b, env, ranges)
        if x is None or y is None:
            return None
        if e.op is n.BinOp.MUL:
            if x[0] is not None and y[0] is not None:
                return None
            if x[0] is None:
                x, y = y, x
            form = (x[0], x[1] * y[2], x[2] * y[2])
        else:
            if x[0] is not None and y[0] is not None and x[0] is not y[0]:
                return None
            sign = 1 if e.op is n.BinOp.ADD else -1
            form = (x[0] if x[0] is not None else y[0], x[1] + sign * y[1], x[2] + sign * y[2])
    else:
        return None
    if form is None:
        return None
    var, a, b = form
    if var is None:
        lo = hi = b
    else:
        _, first, stop = ranges[var]
        ends = (a * first + b, a * (stop - 1) + b)
        lo, hi = min(ends), max(ends)
    return form if _fits(e.dtype, lo, hi) else None


def view_read(arr: np.ndarray, indices: tuple, env: dict, ndim: int):
    """``arr`` read at affine ``indices`` over the grid, as a view shaped for the grid (size-1
    dims where an axis is not used), or None where slicing cannot express the read or an
    index leaves the array (the general read decides what that means)."""
    ranges = env.get(RANGES)
    if not ranges or len(indices) != arr.ndim:
        return None
    key, used = [], []
    for dim, ix in enumerate(indices):
        form = _linear(ix, env, ranges)
        if form is None:
            return None
        var, a, b = form
        size = arr.shape[dim]
        if var is None:
            if not 0 <= b < size:
                return None
            key.append(b)
            continue
        pos, lo, hi = ranges[var]
        if a == 0 or hi <= lo or any(p == pos for p, _ in used):
            return None
        first, last = a * lo + b, a * (hi - 1) + b
        if not (0 <= first < size and 0 <= last < size):
            return None
        stop = last + (1 if a > 0 else -1)
        key.append(slice(first, stop if stop >= 0 else None, a))
        used.append((pos, len(used)))
    view = arr[tuple(key)]
    if not used:
        return view
    used.sort()
    view = view.transpose([k for _, k in used])
    positions = {p for p, _ in used}
    return view[tuple(slice(None) if p in positions else None for p in range(ndim))]


__all__ = ["blocks", "view_read", "RANGES"]
