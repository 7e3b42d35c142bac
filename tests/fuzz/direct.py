"""The oracle's own check: run a generated numpy-style kernel *as plain numpy code*.

A kernel without index-style computes is ordinary numpy once ``kd.*`` names
mean their numpy counterparts (``kd.exp`` is ``np.exp``, ``kd.kernel`` and
``kd.schedule`` do nothing).  numpy then evaluates it in the kernel's own
dtypes: its result must have the dtype the oracle predicts and lie within the
oracle's error bound wherever the oracle says the value is determined.  This
checks the oracle (dtype rules, bounds, masks) against numpy itself.
"""
from __future__ import annotations

import math
import types

import numpy as np

from . import fdtypes as fd


def _erf(x):
    x = np.asarray(x)
    d = np.exp(np.zeros(1, x.dtype)).dtype      # numpy's type rule for math functions
    f = np.vectorize(math.erf, otypes=[np.float64])
    return (f(x) if x.size else np.zeros(x.shape)).astype(d)


class _Reducer:
    def __init__(self, combine, identity, name=None):
        self.combine, self.identity = combine, identity

    def __call__(self, a, axis=None, keepdims=False):
        a = np.asarray(a)
        # which ufunc the combine function is: compare them on two pairs of values
        probe = [self.combine(np.array([2], a.dtype), np.array([3], a.dtype))]
        for uf in (np.add, np.multiply, np.maximum, np.minimum, np.bitwise_and, np.bitwise_or,
                   np.bitwise_xor):
            try:
                if np.array_equal(uf(np.array([2], a.dtype), np.array([3], a.dtype)), probe[0]) and \
                        np.array_equal(uf(np.array([5], a.dtype), np.array([1], a.dtype)),
                                       self.combine(np.array([5], a.dtype), np.array([1], a.dtype))):
                    with np.errstate(all="ignore"):
                        return uf.reduce(a, axis=axis, keepdims=keepdims, dtype=a.dtype,
                                         initial=np.asarray(self.identity).astype(a.dtype)[()])
            except TypeError:
                continue
        raise NotImplementedError("reducer")


def shim():
    """A stand-in ``kd`` module whose names are numpy's."""
    kd = types.SimpleNamespace()
    kd.kernel = lambda fn=None, **kw: fn if fn is not None else (lambda f: f)
    kd.schedule = lambda *a, **kw: (lambda f: f)
    for name in ("exp", "log", "sqrt", "sin", "cos", "tanh", "maximum", "minimum", "where", "clip",
                 "sum", "prod", "max", "min", "mean", "any", "all", "argmax", "argmin", "matmul"):
        setattr(kd, name, getattr(np, name))
    for name, fn in vars(np).items():      # kd.<ufunc> is numpy's (kd.tan, kd.gcd...)
        if isinstance(fn, np.ufunc) and not hasattr(kd, name):
            setattr(kd, name, fn)
    kd.cummax = lambda x, axis=None: np.maximum.accumulate(x, axis=0 if axis is None else axis)
    kd.cummin = lambda x, axis=None: np.minimum.accumulate(x, axis=0 if axis is None else axis)
    for name in ("einsum", "tensordot", "var", "std", "cumsum", "cumprod", "concatenate", "stack",
                 "take", "take_along_axis", "sort", "argsort"):
        setattr(kd, name, getattr(np, name))
    kd.erf = _erf
    def sigmoid(x):
        x = np.asarray(x)
        x = x.astype(np.exp(np.zeros(1, x.dtype)).dtype)     # (uint8: no wrapping negation)
        return 1 / (1 + np.exp(-x))
    kd.sigmoid = sigmoid
    kd.rsqrt = lambda x: 1 / np.sqrt(x)
    for d in fd.ARRAY_DTYPES:
        setattr(kd, d if d != "bool" else "bool_", np.dtype(d).type)
    kd.reducer = _Reducer
    return kd


def applicable(case) -> bool:
    """numpy can run this kernel itself (numpy style only, no bfloat16)."""
    from .case import render
    src = render(case, None, "numpy")
    if any(w in src for w in ("kd.compute", "kd.reducer", "reduce_axis", "bfloat16", "kd.random",
                              "kd.arange")):
        return False
    if any(p.kind == "scalar" for p in case.builder.params):
        return False     # traced scalars are arrays to kdsl but Python values to plain numpy
    def walk(node, seen):
        if id(node) in seen or node is None:
            return True
        seen.add(id(node))
        if node.op in ("compute", "read", "ired", "axis", "size"):
            return False
        if node.op == "cast" and node.attrs["dtype"] == "bfloat16":
            return False
        if node.op == "red" and node.attrs.get("reducer") is not None:
            return False
        return all(walk(a, seen) for a in node.args)
    return all(walk(o.node, set()) for o in case.outputs)


def run(case, call):
    """numpy's own result of ``case``'s kernel for ``call`` (a list), or the exception."""
    from .case import render
    src = render(case, None, "numpy").replace("import kdsl as kd\n", "")
    ns = {"kd": shim(), "np": np}
    exec(compile(src, "<direct>", "exec"), ns)
    args = [np.array(a) if isinstance(a, np.ndarray) else a for a in call.args]
    try:
        with np.errstate(all="ignore"):
            out = ns["kern"](*args)
    except Exception as e:
        return e
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
