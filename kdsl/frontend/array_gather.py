"""Gathers: numpy's ``take`` and ``take_along_axis`` on traced index arrays.

The element read is ``a[..., idx, ...]`` with numpy's index rule (``mode='raise'``:
a negative index counts from the end; one outside ``[-n, n)`` is an
``IndexError``: kdsl.frontend.access checks the data before the kernel runs, as
for every data-dependent read), ``mode='wrap'`` (modulo ``n``) or
``mode='clip'`` (clamped into ``[0, n)``; negative indices clip to 0, as numpy's).
Lazy: no stage of its own.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import KernelError, KernelValueError
from ..ir import make as mk
from ..ir import nodes as n
from .array import Array, norm_axis
from .ops import asarray, broadcast_dims, cast_to

C = n.CmpOp
_MODES = ("raise", "wrap", "clip")


def _indices(indices, what) -> Array:
    if isinstance(indices, (list, tuple)):      # numpy accepts lists: a constant made here
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu" and indices.size:
            raise KernelError(f"{what}: indices must be integers, got {indices.dtype}",
                              hint="pass ints")
        indices = indices.astype(np.int64)
    ind = asarray(indices)
    if not (ind.dtype.is_int and not ind.dtype.is_bool):
        raise KernelError(f"{what}: indices must be integers, got {ind.dtype.name}",
                          hint="cast them with .astype(kd.int64)")
    return ind


def _source(i: n.Expr, d: n.Expr, mode: str) -> n.Expr:
    """The position read for index value ``i`` along a dimension of size ``d``."""
    i = cast_to(i, dt.index)
    if mode == "wrap":
        return mk.mod(i, d)
    if mode == "clip":
        return mk.min_(mk.max_(i, 0), mk.sub(d, 1))
    return mk.select(mk.compare(C.LT, i, 0), mk.add(i, d), i)


def _mode(mode, what):
    if mode not in _MODES:
        raise KernelValueError(f"{what}: mode must be one of {', '.join(_MODES)}, got {mode!r}",
                               hint="mode='raise' (the default), 'wrap' or 'clip'")


def take(a, indices, axis=None, out=None, mode="raise"):
    """numpy's ``take``: ``a`` indexed by the integer array ``indices`` along ``axis``."""
    if out is not None:
        raise KernelError("take(out=...) is not supported inside kernels", hint="return the result")
    _mode(mode, "take")
    a, ind = asarray(a), _indices(indices, "take")
    if axis is None:
        a, ax = a.reshape(-1), 0
    else:
        ax = norm_axis(axis, a.ndim)
    k = ind.ndim
    dims = a.dims[:ax] + ind.dims + a.dims[ax + 1:]

    def fn(idx):
        i = ind.at(tuple(idx[ax:ax + k]))
        return a.at(tuple(idx[:ax]) + (_source(i, a.dims[ax], mode),) + tuple(idx[ax + k:]))

    return Array(dims, a.dtype, fn, op="take", size=1 + a.size_est + ind.size_est,
                 depth=1 + max(a.depth, ind.depth))


def take_along_axis(arr, indices, axis=-1, mode="raise"):
    """numpy's ``take_along_axis``: ``out[..., j, ...] = arr[..., indices[..., j, ...], ...]``
    (the other dims broadcast; ``axis=None`` works on the flattened array)."""
    _mode(mode, "take_along_axis")
    a, ind = asarray(arr), _indices(indices, "take_along_axis")
    if axis is None:
        if ind.ndim != 1:
            raise KernelValueError("take_along_axis: when axis=None, indices must be 1-d",
                                   hint="pass 1-D indices")
        a, ax = a.reshape(-1), 0
    else:
        ax = norm_axis(axis, a.ndim)
    if ind.ndim != a.ndim:
        raise KernelValueError("take_along_axis: `indices` and `arr` must have the same number of "
                               "dimensions", hint="add size-1 dims with [..., None]")
    a_dims = list(a.dims)
    a_dims[ax] = mk.as_expr(1)
    dims, (ma, mi) = broadcast_dims([tuple(a_dims), ind.dims], "take_along_axis")

    def fn(idx):
        i = ind.at(mi(idx))
        src = list(ma(idx))
        src[ax] = _source(i, a.dims[ax], mode)
        return a.at(tuple(src))

    return Array(dims, a.dtype, fn, op="take_along_axis", size=1 + a.size_est + ind.size_est,
                 depth=1 + max(a.depth, ind.depth))
