"""Evaluate a generated kernel's node tree for one call (inputs, scalar values, sizes).

``Evaluator(inputs, sargs, binding, reducers).value(node)`` gives an ``OVal``.
Index-style computes are evaluated over numpy index grids: the spatial axes are
the leading grid dimensions, each index-style reduction appends its reduce axes
as trailing ones and collapses them.  Reads check their indices against the
source's extent (index-style indices are absolute: no wrap-around), but only
when the grid they are read over is not empty.
"""
from __future__ import annotations

import numpy as np

from . import fdtypes as fd
from . import oracle as o
from . import oracle_red as red
from . import oracle_surface as osf
from . import oracle_ufunc as ou
from .model import Idx, Node
from .oracle import OracleRaise, OVal


def _pad(a, level):
    a = np.asarray(a)
    return a.reshape(a.shape + (1,) * (level - a.ndim)) if a.ndim < level else a


def _pad_oval(v: OVal, level) -> OVal:
    if np.ndim(v.val) == 0 or np.ndim(v.val) >= level:
        return v
    return OVal(v.dtype, _pad(v.val, level), None if v.err is None else _pad(v.err, level),
                None if v.mask is None else _pad(v.mask, level), v.weak, v.pyval)


class Evaluator:
    """numpy evaluation of one call of a generated kernel."""

    def __init__(self, inputs: dict, sargs: dict, binding: dict, reducers: dict):
        self.inputs, self.sargs, self.binding, self.reducers = inputs, sargs, binding, reducers
        self.memo = {}

    # -------------------------------------------------------------- outside compute bodies
    def value(self, node: Node) -> OVal:
        key = id(node)
        got = self.memo.get(key)
        if got is None:
            got = self._eval(node, None, 0)
            self.memo[key] = got
        return got

    def _eval(self, node: Node, env, level) -> OVal:
        f = getattr(self, "ev_" + node.op)
        return f(node, env, level)

    def sub(self, node, env, level):
        """A child: memoised when it cannot depend on compute axes."""
        if env is None:
            return self.value(node)
        return _pad_oval(self._eval(node, env, level), level)

    # -------------------------------------------------------------- leaves
    def ev_input(self, node, env, level):
        a = self.inputs[node.attrs["k"]]
        d = a.dtype.name
        if fd.is_float(d):
            return OVal(d, a.astype(np.float64))
        return OVal(d, np.array(a))

    def ev_sarg(self, node, env, level):
        v = self.sargs[node.attrs["k"]]
        kind = "b" if isinstance(v, bool) else "i" if isinstance(v, int) else "f"
        d = {"b": "bool", "i": "int64", "f": "float64"}[kind]
        return OVal(d, np.asarray(v, np.float64 if kind == "f" else None), None, None, kind, v)

    def ev_lit(self, node, env, level):
        v, d = node.attrs["value"], node.attrs.get("dtype")
        if d is None:
            kind = "b" if isinstance(v, bool) else "i" if isinstance(v, int) else "f"
            dd = {"b": "bool", "i": "int64", "f": "float64"}[kind]
            return OVal(dd, np.asarray(v, np.float64 if kind == "f" else None), None, None, kind, v)
        if fd.is_float(d):
            x = np.asarray(v, fd.np_dtype(d)).astype(np.float64)
            return OVal(d, x)
        return OVal(d, np.asarray(v, d))

    def ev_axis(self, node, env, level):
        return _pad_oval(env.vars[node.attrs["name"]], level)

    def ev_size(self, node, env, level):
        v = node.attrs["dim"].eval(self.binding)
        return OVal("int64", np.asarray(v, np.int64), None, None, "i", None)

    # -------------------------------------------------------------- elementwise
    def ev_un(self, node, env, level):
        x = self.sub(node.args[0], env, level)
        return o.unary(node.attrs["op"], x, node.attrs.get("weak_result", False))

    def ev_bin(self, node, env, level):
        a, b = self.sub(node.args[0], env, level), self.sub(node.args[1], env, level)
        return o.binary(node.attrs["op"], a, b, node.attrs.get("weak_result", True))

    def ev_uf(self, node, env, level):
        return ou.ufunc(node.attrs["name"], [self.sub(x, env, level) for x in node.args])

    def ev_afn(self, node, env, level):
        return osf.afn(node.attrs["fn"], [self.value(x) for x in node.args], node.attrs)

    def ev_arange(self, node, env, level):
        return OVal("int64", np.arange(node.attrs["dim"].eval(self.binding), dtype=np.int64))

    def ev_bitview(self, node, env, level):
        return ou.bitview(self.sub(node.args[0], env, level), node.attrs["dtype"])

    def ev_where(self, node, env, level):
        c, a, b = (self.sub(x, env, level) for x in node.args)
        return o.where(c, a, b)

    def ev_cast(self, node, env, level):
        return o.cast(self.sub(node.args[0], env, level), node.attrs["dtype"])

    def ev_clip(self, node, env, level):
        return o.clip(self.sub(node.args[0], env, level), node.attrs["lo"], node.attrs["hi"])

    def ev_view(self, node, env, level):
        x = self.value(node.args[0])
        try:
            return o.view(x, node.attrs["kind"], node.attrs["params"])
        except IndexError as e:
            raise OracleRaise("index", f"numpy indexing: {e}") from None

    # -------------------------------------------------------------- stages
    def ev_red(self, node, env, level):
        x = self.value(node.args[0])
        rid = node.attrs.get("reducer")
        custom = self.reducers[rid].what if rid else None
        return red.reduce_np(node.attrs["kind"], x, node.attrs["axis"], node.attrs["keepdims"],
                             node.attrs.get("dtype"), custom)

    def ev_matmul(self, node, env, level):
        return red.matmul(self.value(node.args[0]), self.value(node.args[1]),
                          node.attrs.get("dtype"))

    def ev_compute(self, node, env, level):
        shape = tuple(d.eval(self.binding) for d in node.attrs["dims"])
        if any(s < 0 for s in shape):
            raise OracleRaise("shape", f"kd.compute shape {shape} has a negative size")
        L = len(shape)
        env = Env({}, shape)
        for j, (name, s) in enumerate(zip(node.attrs["axes"], shape)):
            g = np.arange(s, dtype=np.int64).reshape((1,) * j + (s,) + (1,) * (L - j - 1))
            env.vars[name] = OVal("int64", g, None, None, "i", None)
        body = self._eval(node.args[0], env, L)
        d = body.dtype

        def full(a, fill):
            if a is None:
                return None
            return np.broadcast_to(np.asarray(a), shape).copy() if np.ndim(a) < L or np.shape(a) != shape \
                else np.asarray(a)
        val = full(body.val if body.pyval is None or not fd.is_float(d) else np.float64(body.pyval), 0)
        if not fd.is_float(d):
            val = np.asarray(val).astype(d)
        return OVal(d, val, full(body.err, 0), full(body.mask, False))

    def ev_read(self, node, env, level):
        src = self.value(node.args[0])
        sshape = src.shape
        idx = [self.index(i, env, level) for i in node.attrs["idx"]]
        grid = np.broadcast_shapes(*[np.shape(i) for i in idx]) if idx else ()
        full = tuple(np.broadcast_to(i, grid) for i in idx)
        if int(np.prod(grid)) > 0:
            for d, (i, ext) in enumerate(zip(full, sshape)):
                lo, hi = int(i.min()), int(i.max())
                if lo < 0 or hi >= ext:
                    raise OracleRaise("index", f"read of input/value axis {d} at index range "
                                      f"[{lo}, {hi}] but its extent is {ext}")
        if not full:
            return OVal(src.dtype, np.asarray(src.val), src.err, src.mask)

        def g(a):
            if a is None:
                return None
            if int(np.prod(grid)) == 0:
                return np.zeros(grid, np.asarray(a).dtype)
            return np.asarray(a)[full]
        return _pad_oval(OVal(src.dtype, g(src.val), g(src.err), g(src.mask)), level)

    def index(self, i: Idx, env, level):
        k = i.kind
        if k == "var":
            return _pad(env.vars[i.name].val, level)
        if k == "const":
            return np.int64(i.value)
        if k == "dim":
            return np.int64(i.dim.eval(self.binding))
        if k == "add":
            return self.index(i.a, env, level) + self.index(i.b, env, level)
        if k == "sub":
            return self.index(i.a, env, level) - self.index(i.b, env, level)
        if k == "mul":
            return self.index(i.a, env, level) * i.value
        if k == "fdiv":
            return self.index(i.a, env, level) // i.value
        if k == "mod":
            return self.index(i.a, env, level) % i.value
        raise ValueError(k)

    def ev_ired(self, node, env, level):
        raxes = node.attrs["raxes"]       # [(name, lo, hi)]
        exts = []
        L2 = level + len(raxes)
        new_vars = {k: _pad_oval(v, L2) for k, v in env.vars.items()}
        for j, (name, lo, hi) in enumerate(raxes):
            lo_v = lo.eval(self.binding) if hasattr(lo, "eval") else lo
            hi_v = hi.eval(self.binding) if hasattr(hi, "eval") else hi
            ext = max(hi_v - lo_v, 0)
            exts.append(ext)
            g = (lo_v + np.arange(ext, dtype=np.int64)).reshape((1,) * (level + j) + (ext,) +
                                                                  (1,) * (len(raxes) - j - 1))
            new_vars[name] = OVal("int64", g, None, None, "i", None)
        grid = tuple(env.shape) + tuple(exts)
        if node.attrs["kind"] in ("max", "min", "argmax", "argmin") and 0 in exts and \
                node.args[1] is None:
            # numpy's rule, which kdsl follows for index-style reductions too: no identity,
            # an error even when there is no output element (np.max(np.zeros((0, 0)), axis=1));
            # with where= the identity (docs/kernels.md)
            raise OracleRaise("empty", f"{node.attrs['kind']} over an empty reduce axis")
        new_env = Env(new_vars, grid)
        body = self._eval(node.args[0], new_env, L2)
        kind, rid, dtype = node.attrs["kind"], node.attrs.get("reducer"), node.attrs.get("dtype")
        if rid:      # a kd.reducer combines in the body's dtype
            R, custom = body.dtype, self.reducers[rid].what
        elif kind in ("any", "all"):
            R, custom = "bool", None
        else:
            R, custom = (dtype or body.dtype), None
        if custom is None and kind not in ("any", "all"):
            body = o.cast(body, R) if body.dtype != R or body.pyval is not None else body
        body = _broadcast_oval(body, grid)
        include = und = None
        if node.args[1] is not None:
            c = _pad_oval(self._eval(node.args[1], new_env, L2), L2)
            include, und = o.truth(c)
            include = np.broadcast_to(include, grid)
            und = np.broadcast_to(und, grid)
        k = len(raxes)
        flat = OVal(body.dtype, _flat(body.val, k), _flat(body.err, k), _flat(body.mask, k))
        out = red.reduce_last("custom" if custom else kind, flat, R, R, custom,
                              None if include is None else _flat(include, k),
                              None if und is None else _flat(und, k))
        return _pad_oval(out, level)


class Env:
    """Inside a compute body: the axis values and the grid shape at the current level."""

    def __init__(self, vars_: dict, shape: tuple):
        self.vars, self.shape = vars_, tuple(shape)


def _broadcast_oval(v: OVal, grid):
    def b(a):
        return None if a is None else np.broadcast_to(np.asarray(a), grid).copy()
    val = v.val if v.pyval is None else np.asarray(v.pyval if not fd.is_float(v.dtype) else float(v.pyval))
    return OVal(v.dtype, b(val), b(v.err), b(v.mask))


def _flat(a, k):
    if a is None:
        return None
    a = np.asarray(a)
    lead = a.shape[:a.ndim - k]
    return a.reshape(lead + (int(np.prod(a.shape[a.ndim - k:])),))
