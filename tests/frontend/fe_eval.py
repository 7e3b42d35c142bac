"""A slow, simple numpy evaluator of stage graphs: a test aid for the frontend only.

Every stage is evaluated over its whole index grid at once (axis variables are
broadcast ``arange``s); a reduction folds its combiner over the flattened
reduce grid one element at a time.  Reads are bounds-checked so that a wrong
index expression fails loudly instead of wrapping.
"""
from __future__ import annotations

import math

import numpy as np

from kdsl import graph as g
from kdsl.ir import nodes as n
from kdsl.ir.evaluate import eval_expr

B, U, C = n.BinOp, n.UnOp, n.CmpOp
_BIN = {B.ADD: np.add, B.SUB: np.subtract, B.MUL: np.multiply, B.DIV: np.true_divide,
        B.FLOORDIV: np.floor_divide, B.MOD: np.remainder, B.POW: np.power, B.MIN: np.minimum,
        B.MAX: np.maximum, B.AND: np.bitwise_and, B.OR: np.bitwise_or, B.XOR: np.bitwise_xor}
_CMP = {C.EQ: np.equal, C.NE: np.not_equal, C.LT: np.less, C.LE: np.less_equal,
        C.GT: np.greater, C.GE: np.greater_equal}
_erf = np.vectorize(math.erf, otypes=[np.float64])
_UN = {U.NEG: np.negative, U.NOT: np.invert, U.ABS: np.absolute, U.EXP: np.exp, U.LOG: np.log,
       U.SQRT: np.sqrt, U.RSQRT: lambda x: 1 / np.sqrt(x), U.SIN: np.sin, U.COS: np.cos,
       U.TANH: np.tanh, U.ERF: lambda x: _erf(x), U.SIGMOID: lambda x: 1 / (1 + np.exp(-x)),
       U.ISNAN: np.isnan, U.FLOOR: np.floor, U.CEIL: np.ceil}


class _Eval:
    def __init__(self, env, tensors):
        self.env, self.tensors, self.memo = env, tensors, {}

    def __call__(self, e):
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        v = self._eval(e)
        if not isinstance(e, n.Var):
            v = np.asarray(v).astype(e.dtype.np, copy=False)
        self.memo[id(e)] = (e, v)
        return v

    def _eval(self, e):
        t = type(e)
        if t is n.Const:
            return np.array(e.value, e.dtype.np)
        if t is n.Var:
            return self.env[e]
        if t is n.Binary:
            return _BIN[e.op](self(e.a), self(e.b))
        if t is n.Compare:
            return _CMP[e.op](self(e.a), self(e.b))
        if t is n.Unary:
            return _UN[e.op](self(e.a))
        if t is n.Cast:
            return np.asarray(self(e.a)).astype(e.dtype.np)
        if t is n.Select:
            return np.where(self(e.cond), self(e.t), self(e.f))
        if t is n.TensorRead:
            arr = self.tensors[e.tensor]
            idx = np.broadcast_arrays(*[np.asarray(self(i)).astype(np.int64) for i in e.indices]) \
                if e.indices else ()
            for k, (ix, size) in enumerate(zip(idx, arr.shape)):
                if ix.size and (ix.min() < 0 or ix.max() >= size):
                    raise AssertionError(f"read of {e.tensor.name} out of bounds on dim {k}: "
                                         f"[{ix.min()}, {ix.max()}] for size {size}")
            return arr[tuple(idx)]
        raise AssertionError(f"cannot evaluate {t.__name__}")


def _grid(axes, env, ndim, offset=0):
    for j, ax in enumerate(axes):
        lo, ext = eval_expr(ax.dom.min, env), eval_expr(ax.dom.extent, env)
        shape = [1] * ndim
        shape[offset + j] = max(ext, 0)
        env[ax.var] = np.arange(lo, lo + max(ext, 0), dtype=np.int64).reshape(shape)
    return [max(eval_expr(ax.dom.extent, env), 0) for ax in axes]


def run(graph: g.Graph, *args):
    """Evaluate ``graph`` on numpy arrays/scalars given in ``graph.params`` order."""
    env, tensors = {}, {}
    assert len(args) == len(graph.params), "one value per graph parameter"
    for p, a in zip(graph.params, args):
        if isinstance(p, g.Tensor):
            a = np.asarray(a)
            assert a.ndim == p.ndim and a.dtype == p.dtype.np, (a.shape, a.dtype, p)
            for d, s in zip(p.shape, a.shape):
                if isinstance(d, n.Var):
                    assert env.setdefault(d, s) == s, f"size {d.name} bound twice"
                else:
                    assert eval_expr(d, env) == s, "static size mismatch"
            tensors[p] = a
        else:
            env[p] = a
    for c in graph.constraints:
        if eval_expr(c.lhs, env) != eval_expr(c.rhs, env):
            raise ValueError(c.message)
    for st in graph.stages:
        tensors[st.output] = _stage(st, dict(env), tensors)
    return tuple(tensors[t] for t in graph.outputs)


def _stage(st, env, tensors):
    nsp, red = len(st.axes), st.reduce_axes
    body = st.body
    if not isinstance(body, n.Reduce):
        shape = _grid(st.axes, env, nsp)
        return np.broadcast_to(_Eval(env, tensors)(body), shape).astype(st.dtype.np)
    shape = _grid(st.axes, env, nsp + len(red))
    rshape = _grid(red, env, nsp + len(red), nsp)
    ev = _Eval(env, tensors)
    full, nr = shape + rshape, int(np.prod(rshape))
    srcs = [np.broadcast_to(ev(s), full).reshape(shape + [nr]) for s in body.sources]
    cond = None if body.condition is None else \
        np.broadcast_to(ev(body.condition), full).reshape(shape + [nr])
    comb = body.combiner
    acc = [np.broadcast_to(np.array(i.value, i.dtype.np), shape).copy() for i in comb.identity]
    for r in range(srcs[0].shape[-1] if srcs else 0):
        cenv = dict(zip(comb.lhs, acc))
        cenv.update(zip(comb.rhs, [s[..., r] for s in srcs]))
        new = [np.broadcast_to(_Eval(cenv, tensors)(res), shape) for res in comb.result]
        if cond is not None:
            new = [np.where(cond[..., r], nv, a) for nv, a in zip(new, acc)]
        acc = [np.asarray(x).astype(i.dtype.np) for x, i in zip(new, comb.identity)]
    return acc[body.value_index].astype(st.dtype.np)


def trace_run(fn, *args, specialize=False, constants=(), name=None):
    """Trace ``fn`` for ``args`` (symbolic shapes unless ``specialize``) and evaluate it.

    Returns ``(graph, outputs)``; arguments named in ``constants`` are compile-time values.
    """
    import inspect

    from kdsl.frontend.spec import ScalarSpec, TensorSpec
    from kdsl.frontend.trace import trace
    pnames = list(inspect.signature(fn).parameters)
    specs, values = [], []
    for pn, a in zip(pnames, args):
        if pn in constants:
            specs.append(ScalarSpec.from_value(a, constant=True) if isinstance(a, (int, float))
                         else a)
        elif isinstance(a, np.ndarray):
            specs.append(TensorSpec(a.shape if specialize else (None,) * a.ndim, a.dtype))
            values.append(a)
        else:
            specs.append(ScalarSpec.from_value(a))
            values.append(a)
    graph = trace(fn, specs, constants=constants, name=name)
    return graph, run(graph, *values)
