"""The ``numpy`` reference backend: evaluates the stage graph with vectorised numpy.

It is the semantic oracle of kdsl (every other backend is tested against it)
and works at millions of elements.  Each stage is evaluated over its whole
index grid at once: spatial axes are the leading grid dimensions, reduce axes
extra trailing ones that reductions collapse (keeping size-1 dims so that
broadcasting stays aligned).  The grid is evaluated in blocks (the spatial
axes, then each reduction's own axes, numpy_chunks.blocks) so that temporaries
stay under ``BUDGET_BYTES`` whatever the input size, and reads that slicing can
express are views of the arguments: a stride-0 ``np.broadcast_to`` view of
billions of elements is never materialised.  Schedules are ignored.
"""
from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np

from .. import dtypes as dt
from ..errors import InternalCompilerError
from ..ir import nodes as n
from ..ir.evaluate import eval_expr
from ..ir.visitor import collect
from .numpy_ragged import box_ragged, eval_scan
from .base import BackendBase
from .spec import BackendSpec
from ..numerics.numpy_chunks import RANGES, blocks
from ..numerics.numpy_eval import ExprEval, fix, internal_np

#: the largest temporary one block of a stage may create (sized for 8-byte elements)
BUDGET_BYTES = 8 << 20
_ELEM_BYTES = 8

#: built-in reductions numpy reduces natively: ``Combiner.kind`` -> ufunc.  Only the kind
#: that kdsl itself recorded counts: a user's ``kd.reducer(..., name="max")`` has kind None
#: and is evaluated through its own combine function, whatever its name.
_K = n.CombinerKind
_NATIVE = {_K.SUM: np.add, _K.PROD: np.multiply, _K.MAX: np.maximum, _K.MIN: np.minimum}
#: kinds whose ufunc is only right on bool values (logical_or of ints would give bools)
_NATIVE_BOOL = {_K.ANY: np.logical_or, _K.ALL: np.logical_and}


# ----------------------------------------------------------------- reductions
def _native(comb: n.Combiner):
    """The ufunc that reduces exactly like ``comb``, or None (evaluate ``comb.result``)."""
    if len(comb.lhs) != 1 or comb.kind is None:
        return None
    if comb.lhs[0].dtype.is_bool and comb.kind in _NATIVE_BOOL:
        return _NATIVE_BOOL[comb.kind]
    return _NATIVE.get(comb.kind)


def _identity(ev, comb, shape):
    return [np.broadcast_to(fix(ev(i), v.dtype), shape) for i, v in zip(comb.identity, comb.lhs)]


def combine(ev: ExprEval, comb: n.Combiner, acc: list, new: list) -> list:
    """Apply ``comb`` elementwise to two lists of value arrays."""
    uf = _native(comb)
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


def _pairwise_layout(a: np.ndarray, dims: tuple) -> np.ndarray:
    """``a`` with its one reduced axis fastest in memory (a copy of the block if another axis
    is): numpy sums pairwise only along the axis its loop runs innermost, and adds one term
    after the other along any other (a matmul's K axis of a product block, strided)."""
    if a.dtype.kind != "f" or len(dims) != 1 or a.shape[dims[0]] < 2:
        return a
    step = abs(a.strides[dims[0]])
    if step == 0 or not any(0 < abs(st) < step for st, size in zip(a.strides, a.shape) if size > 1):
        return a
    return np.moveaxis(np.ascontiguousarray(np.moveaxis(a, dims[0], -1)), -1, dims[0])


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
    uf = _native(comb)
    if uf is not None:
        init = fix(ev(comb.identity[0]), comb.lhs[0].dtype).item()
        src = _pairwise_layout(srcs[0], dims) if uf is np.add else srcs[0]
        with np.errstate(all="ignore"):
            r = uf.reduce(src, axis=dims, keepdims=True, dtype=srcs[0].dtype, initial=init)
        return [fix(r, comb.lhs[0].dtype)]
    keep = [k for k in range(ndim) if k not in dims]
    flat = [np.moveaxis(s, list(dims), list(range(ndim - len(dims), ndim))).reshape(
        tuple(shape[k] for k in keep) + (-1,)) for s in srcs]
    out = _tree(ev, comb, flat)
    if comb.kind is None:
        # a user's identity is combined in once, as the compiled backends' accumulators start
        # from it (extent-1 reductions included); kd.reducer checks that combining it more
        # often (one partial per thread or lane) changes nothing
        out = combine(ev, comb, _identity(ev, comb, out[0].shape), out)
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


def eval_stage(stage, env: dict, tensors: dict, out: np.ndarray) -> None:
    """Evaluate ``stage`` into ``out`` (shape = the stage's extents), block by block.

    Spatial blocks hold at most ``budget / (points each output reduces over)`` outputs;
    each reduction then cuts its own axes into blocks (``_reduce_blocks``), so no
    temporary grows past the budget, however large the inputs (a stride-0 broadcast
    view of any size included: reads of it are views, numpy_chunks.view_read)."""
    if getattr(stage, "scan", None) is not None:   # kd.scan: one step at a time
        return eval_scan(stage, env, tensors, out, eval_stage)   # (its per-step stages too)
    stage = box_ragged(stage, env)      # triangular reductions: a masked bounding box
    spatial, red = list(stage.axes), _reduce_axes(stage)
    axes = spatial + red
    d, g = len(spatial), len(axes)
    mins = [int(eval_expr(a.dom.min, env)) for a in axes]
    ext = [int(eval_expr(a.dom.extent, env)) for a in axes]
    if any(e == 0 for e in ext[:d]):
        return
    base = dict(env)
    base["__dims__"] = {a: k for k, a in enumerate(axes)}
    base["__bounds__"] = {a: (mins[k], ext[k]) for k, a in enumerate(axes)}
    budget = BUDGET_BYTES // _ELEM_BYTES
    # outputs per block: as many as their whole reductions allow, but never fewer than a
    # square root of the budget (a column sum then reads rows of many columns at a time,
    # its reduction cut into blocks of rows, instead of one strided column per block)
    per_point = max(1, math.prod(ext[d:]))
    outputs = max(budget // per_point, min(math.prod(ext[:d]), math.isqrt(budget)))
    for block in blocks(ext[:d], outputs):
        local = dict(base)
        chunk_ext, ranges = list(ext), {}
        for k, (lo, hi) in enumerate(block):
            ranges[spatial[k].var] = (k, mins[k] + lo, mins[k] + hi)   # values made on use
            chunk_ext[k] = hi - lo
        local["__extents__"] = chunk_ext
        local[RANGES] = ranges
        res = fix(ExprEval(local, tensors, _reduce_blocks)(stage.body), stage.dtype)
        res = res.reshape((1,) * (g - res.ndim) + res.shape)
        if any(s != 1 for s in res.shape[d:]):
            raise InternalCompilerError(f"stage {stage.name}: a reduce axis survived its reduction")
        out[tuple(slice(lo, hi) for lo, hi in block)] = res.reshape(res.shape[:d])


def _reduce_blocks(ev: ExprEval, e: n.Reduce):
    """A Reduce node, its axes cut into blocks that keep the grid within the budget (the
    spatial block times this reduction's block), partial results combined in order."""
    env = ev.env
    dims = tuple(env["__dims__"][ax] for ax in e.axes)
    bounds = [env["__bounds__"][ax] for ax in e.axes]
    ranges = env[RANGES]
    bound_points = math.prod(hi - lo for _, lo, hi in ranges.values()) if ranges else 1
    budget = BUDGET_BYTES // _ELEM_BYTES
    # partial results combine pairwise as they come (a binary counter: log2(blocks) of them
    # alive), so that float sums of many blocks keep pairwise summation's accuracy; the
    # left operand always covers the earlier blocks (tie-breaking combiners stay right)
    stack, sub = [], None
    for block in blocks([x for _, x in bounds], budget // max(bound_points, 1)):
        local = dict(env)
        chunk_ext, sub_ranges = list(env["__extents__"]), dict(ranges)
        for ax, k, (m, _), (lo, hi) in zip(e.axes, dims, bounds, block):
            local.pop(ax.var, None)      # an enclosing block's values of this axis, if any
            sub_ranges[ax.var] = (k, m + lo, m + hi)
            chunk_ext[k] = hi - lo
        local["__extents__"] = chunk_ext
        local[RANGES] = sub_ranges
        sub = ExprEval(local, ev.tensors, _reduce_blocks)
        part, level = reduce_values(sub, e, dims), 0
        while stack and stack[-1][0] == level:
            part, level = combine(sub, e.combiner, stack.pop()[1], part), level + 1
        stack.append((level, part))
    acc = stack.pop()[1]
    while stack:
        acc = combine(sub, e.combiner, stack.pop()[1], acc)
    return fix(acc[e.value_index], e.dtype)


def _value_stages(stage) -> list:
    """``(tensor, stage)`` pairs evaluating every value of ``stage``: a multi-value reduction
    (argmax, a tuple reducer) whose other values are read or returned is evaluated once per
    value, the Reduce picking that value (the reference favours simplicity over speed)."""
    if len(stage.values) == 1:
        return [(stage.output, stage)]
    out = []
    for j, t in enumerate(stage.values):
        if t is stage.output:
            out.append((t, stage))
            continue
        body = dataclasses.replace(stage.body, dtype=t.dtype, value_index=j)
        out.append((t, SimpleNamespace(name=stage.name, axes=stage.axes, body=body,
                                       reduce_axes=stage.reduce_axes, dtype=t.dtype)))
    return out


def bind_shapes(graph, inputs, scalars) -> dict:
    """Var -> value for the graph's scalar params and the shape variables of its inputs."""
    env = graph.bind(inputs, scalars)
    for v, s in zip(graph.scalars, scalars):
        # a Python int beyond the scalar's type (int64): OverflowError, which the kernel call
        # reports as an ArgumentError like every other backend (numpy would wrap it silently)
        if type(s) is int and v.dtype.is_int and not dt.can_cast_value(s, v.dtype):
            raise OverflowError(f"Python integer {s} out of bounds for {v.dtype.name}")
    return env


def run_graph(graph, inputs: list, outputs: list, scalars: list) -> None:
    """Evaluate every stage of ``graph``, writing the outputs into ``outputs``."""
    env = bind_shapes(graph, inputs, scalars)
    # as given (views stay views): reads convert to the internal representation block by block
    tensors = {t: np.asarray(a) for t, a in zip(graph.inputs, inputs)}
    direct = {t: o for t, o in zip(graph.outputs, outputs)
              if isinstance(o, np.ndarray) and o.dtype == internal_np(t.dtype)}
    with np.errstate(all="ignore"):
        used = {id(t) for t in graph.outputs} | {id(t) for st in graph.stages for t in st.reads()}
        for stage in graph.stages:
            for t, st in _value_stages(stage):
                if t is not stage.output and id(t) not in used:
                    continue        # argmax's values: only the index is wanted
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

    fast = None     # no fast launcher: the generated Python one calls it

    def __init__(self, graph):
        self.graph = graph

    def __call__(self, inputs, outputs, scalars, stream=None):
        run_graph(self.graph, inputs, outputs, scalars)


class NumpyBackend(BackendBase):
    """The ``numpy`` reference backend (device "host"): schedules are ignored."""

    spec = BackendSpec(name="numpy", device="host", version="1")

    def schedule(self, sched, hints) -> None:
        """Nothing to do: the numpy backend evaluates the unscheduled stage graph."""

    def compile(self, request):
        return _Compiled(request.graph)

    def source(self, request) -> str:
        """The stage graph as text (what this backend evaluates)."""
        from ..ir.printer import format_graph
        return format_graph(request.graph)

    def __repr__(self) -> str:
        return "NumpyBackend()"
