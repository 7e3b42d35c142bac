"""The ``numpy`` reference backend: evaluates the stage graph with vectorised numpy.

It is the semantic oracle of kdsl (every other backend is tested against it)
and works at millions of elements.  Each stage is evaluated over its whole
index grid at once: spatial axes are the leading grid dimensions, reduce axes
extra trailing ones that reductions collapse (keeping size-1 dims so that
broadcasting stays aligned).  The leading spatial axis is chunked, and when
one row is still too big the first reduce axis too, so temporaries stay under
``BUDGET_BYTES``.  Schedules are ignored.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import InternalCompilerError
from ..ir import nodes as n
from ..ir.evaluate import eval_expr
from ..ir.visitor import collect
from .numpy_eval import ExprEval, fix, internal_np, to_internal

BUDGET_BYTES = 64 << 20
_ELEM_BYTES = 8  # size the budget for the widest element

#: combiners numpy reduces natively, recognised by name: name -> ufunc
_NATIVE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


# ----------------------------------------------------------------- reductions
def _identity(ev, comb, shape):
    return [np.broadcast_to(fix(ev(i), v.dtype), shape) for i, v in zip(comb.identity, comb.lhs)]


def combine(ev: ExprEval, comb: n.Combiner, acc: list, new: list) -> list:
    """Apply ``comb`` elementwise to two lists of value arrays."""
    uf = _NATIVE.get(comb.name) if len(comb.lhs) == 1 else None
    if uf is not None:
        return [fix(uf(acc[0], new[0]), comb.lhs[0].dtype)]
    env = dict(ev.env)
    env.update(zip(comb.lhs, acc))
    env.update(zip(comb.rhs, new))
    sub = ExprEval(env, ev.tensors, reduce_values_node)
    return [fix(sub(r), v.dtype) for r, v in zip(comb.result, comb.lhs)]


def _tree(ev, comb, vals: list) -> list:
    """Pairwise-tree reduction of the last dimension.

    Adjacent elements are combined (2p with 2p+1), so every element always stands for a
    contiguous, ordered segment: the left operand precedes the right one, which keeps
    tie-breaking combiners (argmax: first occurrence) correct.
    """
    size = vals[0].shape[-1]
    if size == 0:
        return _identity(ev, comb, vals[0].shape[:-1] + (1,))
    while size > 1:
        if size % 2:
            pad = _identity(ev, comb, vals[0].shape[:-1] + (1,))
            vals = [np.concatenate([v, p], axis=-1) for v, p in zip(vals, pad)]
            size += 1
        vals = combine(ev, comb, [v[..., 0::2] for v in vals], [v[..., 1::2] for v in vals])
        size //= 2
    return vals


def reduce_values(ev: ExprEval, e: n.Reduce, dims: tuple) -> list:
    """All of ``e.combiner``'s values reduced over grid ``dims`` (kept as size-1 dims)."""
    comb = e.combiner
    srcs = [fix(ev(s), v.dtype) for s, v in zip(e.sources, comb.lhs)]
    ndim = max(max((s.ndim for s in srcs), default=0), max(dims, default=-1) + 1)
    shape = [1] * ndim
    for s in srcs:
        for k, size in enumerate((1,) * (ndim - s.ndim) + s.shape):
            shape[k] = max(shape[k], size) if size != 1 else shape[k]
    ext = ev.env["__extents__"]
    for d in dims:
        shape[d] = ext[d]
    shape = tuple(shape)
    srcs = [np.broadcast_to(s, shape) for s in srcs]
    if e.condition is not None:
        cond = ev(e.condition)
        ident = _identity(ev, comb, shape)
        srcs = [np.where(cond, s, i) for s, i in zip(srcs, ident)]
    uf = _NATIVE.get(comb.name) if len(srcs) == 1 else None
    if uf is not None:
        init = fix(ev(comb.identity[0]), comb.lhs[0].dtype).item()
        with np.errstate(all="ignore"):
            r = uf.reduce(srcs[0], axis=dims, keepdims=True, dtype=srcs[0].dtype, initial=init)
        return [fix(r, comb.lhs[0].dtype)]
    keep = [k for k in range(ndim) if k not in dims]
    flat = [np.moveaxis(s, list(dims), list(range(ndim - len(dims), ndim))).reshape(
        tuple(shape[k] for k in keep) + (-1,)) for s in srcs]
    out = _tree(ev, comb, flat)
    kept = tuple(1 if k in dims else shape[k] for k in range(ndim))
    return [o.reshape(kept) for o in out]


def reduce_values_node(ev: ExprEval, e: n.Reduce):
    """Evaluate a Reduce node met inside an expression (its own axes' grid dims)."""
    dims = tuple(ev.env["__dims__"][ax] for ax in e.axes)
    return fix(reduce_values(ev, e, dims)[e.value_index], e.dtype)


# ----------------------------------------------------------------- stages
def _reduce_axes(stage) -> list:
    axes = list(stage.reduce_axes)
    for r in collect(stage.body, lambda x: isinstance(x, n.Reduce)):
        axes += [a for a in r.axes if all(a is not b for b in axes)]
    return axes


def _arange(lo, hi, pos, ndim, dtype):
    shape = [1] * ndim
    shape[pos] = hi - lo
    return np.arange(lo, hi, dtype=internal_np(dtype)).reshape(shape)


def eval_stage(stage, env: dict, tensors: dict, out: np.ndarray) -> None:
    """Evaluate ``stage`` into ``out`` (shape = the stage's extents)."""
    spatial, red = list(stage.axes), _reduce_axes(stage)
    axes = spatial + red
    d, g = len(spatial), len(axes)
    mins = [int(eval_expr(a.dom.min, env)) for a in axes]
    ext = [int(eval_expr(a.dom.extent, env)) for a in axes]
    if any(e == 0 for e in ext[:d]):
        return
    base = dict(env)
    base["__dims__"] = {a: k for k, a in enumerate(axes)}
    for k, a in enumerate(axes):
        base[a.var] = _arange(mins[k], mins[k] + ext[k], k, g, a.var.dtype)
    # elements of one step of the leading spatial axis (the whole grid for a scalar stage)
    per_row = max(1, int(np.prod(ext[1:] if d else ext, dtype=np.float64)))
    budget = BUDGET_BYTES // _ELEM_BYTES
    rows = max(1, budget // per_row) if d else 1
    root = stage.body
    # one leading row still too big: split the first reduce axis of a root reduction
    rsplit = (type(root) is n.Reduce and per_row > budget and len(red) > 0
              and any(a is red[0] for a in root.axes))
    rstep = max(1, budget * ext[d] // per_row) if rsplit else None
    for lo in range(0, ext[0] if d else 1, rows):
        hi = min(lo + rows, ext[0]) if d else 1
        local = dict(base)
        chunk_ext = list(ext)
        if d:
            local[spatial[0].var] = _arange(mins[0] + lo, mins[0] + hi, 0, g, spatial[0].var.dtype)
            chunk_ext[0] = hi - lo
        local["__extents__"] = chunk_ext
        ev = ExprEval(local, tensors, reduce_values_node)
        if rsplit:
            res = _eval_split(ev, root, red[0], d, mins[d], ext[d], rstep, local, g)
        else:
            res = ev(root)
        res = fix(res, stage.dtype)
        res = res.reshape((1,) * (g - res.ndim) + res.shape)
        if any(s != 1 for s in res.shape[d:]):
            raise InternalCompilerError(f"stage {stage.name}: a reduce axis survived its reduction")
        target = out[lo:hi] if d else out
        target[...] = res.reshape(res.shape[:d])


def _eval_split(ev, root, r0, pos, rmin, rext, step, local, g):
    """A root reduction evaluated over chunks of reduce axis ``r0``, partials combined."""
    dims = tuple(local["__dims__"][ax] for ax in root.axes)
    parts = []
    for lo in range(0, rext, step):
        hi = min(lo + step, rext)
        local[r0.var] = _arange(rmin + lo, rmin + hi, pos, g, r0.var.dtype)
        local["__extents__"][pos] = hi - lo
        parts.append(reduce_values(ev, root, dims))
    # adjacent partials combined pairwise, in order (as numpy's own sums): one after the
    # other, each chunk would be rounded at the size of the whole sum
    while len(parts) > 1:
        pairs = [combine(ev, root.combiner, parts[k], parts[k + 1])
                 for k in range(0, len(parts) - 1, 2)]
        parts = pairs + parts[len(parts) - len(parts) % 2:]
    return parts[0][root.value_index]


def bind_shapes(graph, inputs, scalars) -> dict:
    """Var -> value for the graph's scalar params and the shape variables of its inputs."""
    env = dict(zip(graph.scalars, scalars))
    for t, a in zip(graph.inputs, inputs):
        for e, size in zip(t.shape, a.shape):
            if type(e) is n.Var and e not in env:
                env[e] = int(size)
    return env


def run_graph(graph, inputs: list, outputs: list, scalars: list) -> None:
    """Evaluate every stage of ``graph``, writing the outputs into ``outputs``."""
    env = bind_shapes(graph, inputs, scalars)
    tensors = {t: to_internal(a, t.dtype) for t, a in zip(graph.inputs, inputs)}
    direct = {t: o for t, o in zip(graph.outputs, outputs)
              if isinstance(o, np.ndarray) and o.dtype == internal_np(t.dtype)}
    with np.errstate(all="ignore"):
        for st in graph.stages:
            t = st.output
            buf = direct.get(t)
            if buf is None:
                shape = tuple(int(eval_expr(s, env)) for s in t.shape)
                buf = np.empty(shape, internal_np(t.dtype))
            eval_stage(st, env, tensors, buf)
            tensors[t] = buf
    for t, o in zip(graph.outputs, outputs):
        if direct.get(t) is not o:
            o[...] = tensors[t].astype(o.dtype) if t.dtype is dt.bfloat16 else tensors[t]


# ----------------------------------------------------------------- the backend
class _Compiled:
    """The callable ``compile`` returns: evaluates the graph on each call."""

    def __init__(self, graph):
        self.graph = graph

    def __call__(self, inputs, outputs, scalars, stream=None):
        run_graph(self.graph, inputs, outputs, scalars)


class NumpyBackend:
    """The ``numpy`` reference backend (device "host"): schedules are ignored."""

    name = "numpy"
    device = "host"
    version = "1"

    def schedule(self, sched, hints) -> None:
        """Nothing to do: the numpy backend evaluates the unscheduled stage graph."""

    def compile(self, request):
        return _Compiled(request.graph)

    def source(self, request) -> str:
        """The stage graph as text (what this backend evaluates)."""
        from ..ir.printer import format_graph
        return format_graph(request.graph)

    def accepts(self, array) -> bool:
        return isinstance(array, np.ndarray)

    def empty(self, shape, dtype, like=None):
        return np.empty(shape, dt.as_dtype(dtype).np)

    def __repr__(self) -> str:
        return "NumpyBackend()"
