"""numpy's protocols on traced arrays: ``np.exp(x)``, ``np.sum(x, axis=1)``...

Supported ufuncs and functions map to kdsl ops; anything else raises a
KernelError that names the numpy function.
"""
from __future__ import annotations

import numpy as np

from ..errors import KernelError
from . import linalg, ops, reduce, ufuncs

_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                 "logical_and": "all", "logical_or": "any"}
#: ``np.<ufunc>.accumulate`` -> the scan that computes it (axis 0 by default, as numpy)
def _unsupported(what: str):
    raise KernelError(f"numpy {what} is not supported inside kdsl kernels",
                      hint="use the operations listed in kdsl's docs/kernels.md (kd.exp, kd.where, x.sum(axis=...), "
                           "@, ...) or pass precomputed values as arguments")


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """numpy ufunc dispatch for traced arrays (the ufuncs themselves: ``ufuncs.SUPPORTED``)."""
    name = ufunc.__name__
    if kwargs.get("out") is not None or kwargs.get("where", True) is not True:
        from . import ufunc_keywords     # out= / where=: rebinds a fresh out array
        return ufunc_keywords.call_with_out(array_ufunc, self, ufunc, method, inputs, kwargs)
    dtype = kwargs.pop("dtype", None)
    if dtype is not None and method == "__call__":
        from . import ufunc_keywords
        ufunc_keywords.check_input_casts(name, inputs, dtype)
    for k, default in (("out", None), ("where", True), ("casting", "same_kind"), ("order", "K"),
                       ("subok", True)):
        if kwargs.get(k, default) == default:
            kwargs.pop(k, None)
    if method == "reduce" and name in _UFUNC_REDUCE:
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        if kwargs:
            _unsupported(f"np.{name}.reduce with {', '.join(kwargs)}")
        return reduce.reduce_np(_UFUNC_REDUCE[name], inputs[0], axis, keepdims, dtype)
    if method == "accumulate":
        from . import scan
        if name not in scan.ACCUMULATE:
            _unsupported(f"np.{name}.accumulate (associative ufuncs only: "
                         f"{', '.join(sorted(scan.ACCUMULATE))})")
        axis = kwargs.pop("axis", 0)
        if kwargs:
            _unsupported(f"np.{name}.accumulate with {', '.join(kwargs)}")
        return scan.accumulate(name, inputs[0], axis, dtype)
    if method != "__call__":
        _unsupported(f"np.{name}.{method}")
    if kwargs:
        _unsupported(f"np.{name} with {', '.join(sorted(kwargs))}=")
    if name == "matmul":
        return linalg.matmul(*inputs, dtype=dtype)
    if dtype is not None:        # numpy computes in the requested type (the loop it selects)
        inputs = tuple(ops.astype(x, dtype) for x in inputs)
    out = ufuncs.call(name, inputs)
    if dtype is None:
        return out
    return tuple(ops.astype(o, dtype) for o in out) if isinstance(out, tuple) else ops.astype(out, dtype)


def _np_sum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return reduce.reduce_np("sum", a, axis, keepdims, dtype, out=out, **kw)


def _np_prod(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return reduce.reduce_np("prod", a, axis, keepdims, dtype, out=out, **kw)


def _np_mean(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return reduce.reduce_np("mean", a, axis, keepdims, dtype, out=out, **kw)


def _kind(k):
    return lambda a, axis=None, out=None, keepdims=False, **kw: reduce.reduce_np(
        k, a, axis, keepdims, out=out, **kw)


def _transpose(a, axes=None):
    return ops.asarray(a).transpose(axes)


def _reshape(a, *args, **kwargs):
    shape = kwargs.pop("newshape", kwargs.pop("shape", args[0] if args else None))
    return ops.asarray(a).reshape(shape, **kwargs)


def _dot(a, b, out=None):
    a, b = ops.asarray(a), ops.asarray(b)
    if a.ndim > 2 or b.ndim > 2:
        _unsupported("np.dot on arrays of more than 2 dimensions")
    if a.ndim == 0 or b.ndim == 0:
        return ops.binary("multiply", a, b, strong=True)
    return linalg.matmul(a, b, out=out)


_FUNCTIONS = {
    np.sum: _np_sum, np.prod: _np_prod, np.mean: _np_mean,
    np.max: _kind("max"), np.min: _kind("min"), np.amax: _kind("max"), np.amin: _kind("min"),
    np.any: _kind("any"), np.all: _kind("all"),
    np.argmax: lambda a, axis=None, out=None, *, keepdims=False: reduce.reduce_np(
        "argmax", a, axis, keepdims, out=out),
    np.argmin: lambda a, axis=None, out=None, *, keepdims=False: reduce.reduce_np(
        "argmin", a, axis, keepdims, out=out),
    np.where: ops.where, np.clip: lambda a, a_min=None, a_max=None, out=None, **kw:
        ops.clip(a, a_min, a_max) if out is None and not kw else _unsupported("np.clip(out=...)"),
    np.transpose: _transpose, np.reshape: _reshape, np.dot: _dot,
    np.matmul: lambda a, b, **kw: linalg.matmul(a, b, **kw),
    np.shape: lambda a: ops.asarray(a).shape, np.ndim: lambda a: ops.asarray(a).ndim,
}


def array_function(self, func, types, args, kwargs):
    """numpy function dispatch (``np.sum(x)``...) for traced arrays."""
    impl = _FUNCTIONS.get(func)
    if impl is None:
        _unsupported(f"function np.{getattr(func, '__name__', func)}")
    return impl(*args, **kwargs)
