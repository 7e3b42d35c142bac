"""numpy's array functions inside kernels: the dispatch table, the ``kd.<name>`` names
and the array methods (issue 25 item 2).

The implementations live by topic: einsum.py (contractions), array_shape.py (joins,
pads, flips, rolls, triangles, views), array_math.py (var/std, round, nan_to_num,
diff, clip, cumsum), array_gather.py (take), sorting.py (sort, argsort),
array_create.py (arange, linspace, eye,
constant fills, captured numpy arrays).  A few small ones are here: ``repeat``,
``tile``, ``meshgrid``, ``broadcast_arrays``, ``unstack``, ``count_nonzero``,
``cumulative_sum``/``cumulative_prod``.  ``FUNCTIONS`` is merged into numpy_api's
its table (``_register`` at the end); functions that stay refused say why in ``REFUSED``.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import KernelError, KernelValueError
from ..ir import make as mk
from ..ir import nodes as n
from . import array_create as cr
from . import array_gather as ga
from . import array_math as am
from . import array_shape as sh
from . import einsum as es
from . import sorting as so
from .array import Array, index_expr, norm_axis
from .ops import asarray, astype, broadcast_dims, elementwise
from .reduce import reduce_np


# ------------------------------------------------------------------ small ones
def repeat(a, repeats, axis=None):
    """numpy's ``repeat`` with one static or traced count for every element."""
    a = asarray(a)
    if isinstance(repeats, (list, tuple, np.ndarray)) or (isinstance(repeats, Array) and
                                                          repeats.ndim):
        raise KernelError("repeat: per-element counts give a data-dependent shape",
                          hint="pass one int count")
    if axis is None:
        a, axis = a.reshape(-1), 0
    ax = norm_axis(axis, a.ndim)
    r = index_expr(repeats, "repeats")
    dims = list(a.dims)
    dims[ax] = mk.mul(dims[ax], r)
    return Array(tuple(dims), a.dtype, lambda idx: a.at(
        idx[:ax] + (mk.floordiv(idx[ax], r),) + idx[ax + 1:]), op="repeat", weak=a.weak,
        size=a.size_est, depth=a.depth + 1)


def tile(a, reps):
    """numpy's ``tile`` with static or traced repetitions."""
    a = asarray(a)
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    nd = max(a.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    src_dims = (mk.as_expr(1),) * (nd - a.ndim) + a.dims
    dims = tuple(mk.mul(d, index_expr(r, "reps")) for d, r in zip(src_dims, reps))
    off = nd - a.ndim
    return Array(dims, a.dtype, lambda idx: a.at(tuple(
        mk.mod(idx[off + j], a.dims[j]) for j in range(a.ndim))), op="tile", weak=a.weak,
        size=a.size_est, depth=a.depth + 1)


def broadcast_arrays(*args):
    """numpy's ``broadcast_arrays`` (lazy views)."""
    arrs = [asarray(x) for x in args]
    dims, _ = broadcast_dims([x.dims for x in arrs], "broadcast_arrays")
    return tuple(sh.broadcast_to(x, dims_shape(dims)) for x in arrs)


def dims_shape(dims):
    from .array import size_value
    return tuple(size_value(d) for d in dims)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """numpy's ``meshgrid`` of 1-D arrays (``indexing='xy'`` or ``'ij'``, ``sparse``)."""
    if indexing not in ("xy", "ij"):
        raise KernelValueError("meshgrid: indexing must be 'xy' or 'ij'", hint="indexing='ij'")
    xs = [asarray(x).reshape(-1) for x in xi]
    nd = len(xs)
    out = []
    for k, x in enumerate(xs):
        shape = [1] * nd
        shape[k] = x.shape[0]
        out.append(x.reshape(tuple(shape)))
    if indexing == "xy" and nd > 1:
        out = [sh.swapaxes(o, 0, 1) for o in out]
    if not sparse:
        out = list(broadcast_arrays(*out))
    return tuple(out)


def unstack(x, axis=0):
    """numpy's ``unstack``: a tuple of the slices along a static-length axis."""
    x = asarray(x)
    ax = norm_axis(axis, x.ndim)
    size = x.shape[ax]
    if isinstance(size, Array):
        raise KernelError("unstack needs a static length along the axis",
                          hint="@kd.kernel(specialize=True), or index the slices you need")
    return tuple(x[(slice(None),) * ax + (j,)] for j in range(size))


def count_nonzero(a, axis=None, *, keepdims=False):
    """numpy's ``count_nonzero`` (an int64 count)."""
    a = asarray(a)
    nz = elementwise("count_nonzero", [a], lambda e: mk.cast(
        e if e.dtype.is_bool else mk.compare(n.CmpOp.NE, e, n.const(0, e.dtype)), dt.int64),
        dt.int64)
    return reduce_np("sum", nz, axis, keepdims, dt.int64, name="count_nonzero")


def _cumulative(kind):
    def f(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        x = asarray(x)
        if axis is None:
            if x.ndim > 1:
                raise KernelValueError(f"cumulative_{kind}: axis must be given for arrays of more "
                                       "than one dimension", hint="pass axis=")
            axis = 0
        scan = am.cumsum if kind == "sum" else am.cumprod
        r = scan(x, axis, dtype, out)
        if include_initial:
            ax = norm_axis(axis, x.ndim)
            pw = [(1, 0) if j == ax else (0, 0) for j in range(x.ndim)]
            r = sh.pad(r, pw, constant_values=0 if kind == "sum" else 1)
        return r
    f.__name__ = f"cumulative_{kind}"
    f.__doc__ = f"numpy's ``cumulative_{kind}`` (array API), on the sequential scan (kd.scan)."
    return f


cumulative_sum, cumulative_prod = _cumulative("sum"), _cumulative("prod")


def _asarray(a, dtype=None, order=None, *, copy=None, like=None, device=None):
    a = asarray(a)
    return a if dtype is None else astype(a, dtype)


def _astype(x, dtype, /, *, copy=True, device=None):
    return astype(x, dtype)


# ------------------------------------------------------------------ tables
FUNCTIONS = {
    np.einsum: es.einsum, np.tensordot: es.tensordot, np.inner: es.inner, np.vdot: es.vdot,
    np.outer: es.outer, np.dot: es.dot,
    np.var: am.var, np.std: am.std, np.round: am.round_, np.around: am.round_,
    np.nan_to_num: am.nan_to_num, np.diff: lambda a, n=1, axis=-1, prepend=None, append=None:
        am.diff(a, n, axis, prepend, append),
    np.clip: am.clip, np.where: am.where, np.cumsum: am.cumsum, np.cumprod: am.cumprod,
    np.cumulative_sum: cumulative_sum, np.cumulative_prod: cumulative_prod,
    np.concatenate: sh.concatenate, np.concat: sh.concatenate, np.stack: sh.stack,
    np.hstack: sh.hstack, np.vstack: sh.vstack, np.pad: sh.pad, np.roll: sh.roll,
    np.flip: sh.flip, np.fliplr: sh.fliplr, np.flipud: sh.flipud, np.tril: sh.tril,
    np.triu: sh.triu, np.expand_dims: sh.expand_dims, np.squeeze: sh.squeeze,
    np.moveaxis: sh.moveaxis, np.swapaxes: sh.swapaxes, np.broadcast_to: sh.broadcast_to,
    np.ravel: sh.ravel, np.permute_dims: lambda a, axes=None: asarray(a).transpose(axes),
    np.matrix_transpose: lambda x: sh.swapaxes(x, -1, -2),
    np.take: ga.take, np.take_along_axis: ga.take_along_axis,
    np.arange: cr.arange, np.eye: cr.eye, np.identity: cr.identity, np.tri: cr.tri,
    np.linspace: cr.linspace, np.zeros: cr.zeros, np.ones: cr.ones, np.full: cr.full,
    np.empty: cr.empty, np.zeros_like: cr.zeros_like, np.ones_like: cr.ones_like,
    np.empty_like: cr.empty_like, np.full_like: cr.full_like,
    np.repeat: repeat, np.tile: tile, np.broadcast_arrays: broadcast_arrays,
    np.meshgrid: meshgrid, np.unstack: unstack, np.count_nonzero: count_nonzero,
    np.asarray: _asarray, np.astype: _astype, np.sort: so.sort, np.argsort: so.argsort,
}

#: refused, with the reason (data-dependent result shapes)
REFUSED = {f: am.data_dependent(f.__name__) for f in (
    np.nonzero, np.argwhere, np.flatnonzero, np.unique, np.unique_values, np.unique_counts,
    np.unique_inverse, np.unique_all, np.extract, np.compress)}
_SORT = ("it needs a selection or a search that kdsl does not have yet (np.sort/np.argsort "
         "along a static axis do work)", "sort with np.sort inside, or compute it outside the "
         "kernel (docs/kernels.md lists what kernels support)")
REFUSED.update({f: am.refused(f.__name__, *_SORT) for f in (
    np.partition, np.argpartition, np.median, np.percentile, np.quantile,
    np.nanmedian, np.nanpercentile, np.nanquantile, np.searchsorted, np.lexsort)})

#: ``kd.<name>`` (numpy's spelling)
KD_NAMES = {
    "einsum": es.einsum, "tensordot": es.tensordot, "inner": es.inner, "vdot": es.vdot,
    "outer": es.outer, "dot": es.dot, "var": am.var, "std": am.std, "round": am.round_,
    "around": am.round_, "nan_to_num": am.nan_to_num, "diff": am.diff, "cumsum": am.cumsum,
    "cumprod": am.cumprod, "cumulative_sum": cumulative_sum, "cumulative_prod": cumulative_prod,
    "concatenate": sh.concatenate, "concat": sh.concatenate, "stack": sh.stack,
    "hstack": sh.hstack, "vstack": sh.vstack, "pad": sh.pad, "roll": sh.roll, "flip": sh.flip,
    "fliplr": sh.fliplr, "flipud": sh.flipud, "tril": sh.tril, "triu": sh.triu,
    "expand_dims": sh.expand_dims, "squeeze": sh.squeeze, "moveaxis": sh.moveaxis,
    "swapaxes": sh.swapaxes, "broadcast_to": sh.broadcast_to, "ravel": sh.ravel,
    "take": ga.take, "take_along_axis": ga.take_along_axis, "arange": cr.arange,
    "linspace": cr.linspace, "eye": cr.eye, "identity": cr.identity, "tri": cr.tri,
    "zeros": cr.zeros, "ones": cr.ones, "full": cr.full, "empty": cr.empty,
    "zeros_like": cr.zeros_like, "ones_like": cr.ones_like, "full_like": cr.full_like,
    "empty_like": cr.empty_like, "repeat": repeat, "tile": tile,
    "broadcast_arrays": broadcast_arrays, "meshgrid": meshgrid, "unstack": unstack,
    "count_nonzero": count_nonzero, "sort": so.sort, "argsort": so.argsort,
}


def install_methods(cls) -> None:
    """numpy's ndarray methods for these functions on traced arrays."""
    cls.var = lambda self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw: am.var(
        self, axis, dtype, out, ddof, keepdims, **kw)
    cls.std = lambda self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw: am.std(
        self, axis, dtype, out, ddof, keepdims, **kw)
    cls.round = lambda self, decimals=0, out=None: am.round_(self, decimals, out)
    cls.clip = lambda self, min=None, max=None, out=None, **kw: am.clip(self, min, max, out, **kw)
    cls.cumsum = lambda self, axis=None, dtype=None, out=None: am.cumsum(self, axis, dtype, out)
    cls.cumprod = lambda self, axis=None, dtype=None, out=None: am.cumprod(self, axis, dtype, out)
    cls.take = lambda self, indices, axis=None, out=None, mode="raise": ga.take(
        self, indices, axis, out, mode)
    cls.repeat = lambda self, repeats, axis=None: repeat(self, repeats, axis)
    cls.squeeze = lambda self, axis=None: sh.squeeze(self, axis)
    cls.swapaxes = lambda self, a1, a2: sh.swapaxes(self, a1, a2)
    cls.ravel = lambda self, order="C": sh.ravel(self, order)
    cls.flatten = lambda self, order="C": sh.ravel(self, order)
    cls.dot = lambda self, b, out=None: es.dot(self, b, out)
    cls.nonzero = lambda self: am.data_dependent("nonzero")()
    cls.argsort = lambda self, axis=-1, kind=None, order=None, *, stable=None: so.argsort(
        self, axis, kind, order)
    cls.sort = lambda self, *a, **k: am.refused(
        "ndarray.sort", "it sorts in place and traced arrays are immutable",
        "use np.sort(x, axis) (a new array)")()


def _register() -> None:
    """Merge the tables into numpy_api's dispatch and give Array the methods (done here, at the
    end of this module's import, so either import order of array.py and this module works)."""
    from . import numpy_api
    numpy_api._FUNCTIONS.update(FUNCTIONS)
    numpy_api._FUNCTIONS.update(REFUSED)
    install_methods(Array)


_register()
