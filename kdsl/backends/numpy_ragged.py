"""Reductions whose bounds depend on other axes, for the ``numpy`` evaluator.

The reference backend evaluates a stage over a rectangular index grid.  A reduce
axis whose range uses other axes (``kd.reduce_axis((0, i + 1))``: a triangular sum)
is evaluated over the bounding box of its ranges at every point instead, with the
points outside the point's own range masked by the reduction's condition (they
contribute the identity, exactly as if they were not there).  ``box_ragged``
rewrites one stage that way for one call (the bounds are shape expressions, so the
box is computed from this call's sizes).
"""
from __future__ import annotations

import copy

import numpy as np

from .. import dtypes as dt
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.evaluate import eval_expr
from ..ir.visitor import Mutator, collect, free_vars
from ..numerics.numpy_chunks import RANGES
from ..numerics.numpy_eval import ExprEval


def _reduce_axes(stage) -> list:
    axes = list(stage.reduce_axes)
    for r in collect(stage.body, lambda x: isinstance(x, n.Reduce)):
        axes += [a for a in r.axes if all(a is not b for b in axes)]
    return axes


def box_ragged(stage, env: dict):
    """``stage`` itself, or a copy whose ragged reduce axes run over their bounding box for
    this call (``env``: the call's shape and scalar values) with a masking condition."""
    spatial, red = list(stage.axes), _reduce_axes(stage)
    axes = spatial + red
    own = {a.var for a in axes}
    ragged = [r for r in red if (free_vars(r.dom.min) | free_vars(r.dom.extent)) & own]
    if not ragged:
        return stage
    dims = {a: k for k, a in enumerate(axes)}
    ranges, boxed = {}, {}
    empty = False
    for k, a in enumerate(spatial):
        lo, ext = int(eval_expr(a.dom.min, env)), int(eval_expr(a.dom.extent, env))
        empty = empty or ext <= 0
        ranges[a.var] = (k, lo, lo + max(ext, 0))
    for r in red:
        if r not in ragged:
            lo, ext = int(eval_expr(r.dom.min, env)), int(eval_expr(r.dom.extent, env))
            ranges[r.var] = (dims[r], lo, lo + max(ext, 0))
            continue
        if empty:
            lo = hi = 0
        else:
            local = dict(env)
            local["__dims__"], local[RANGES] = dims, dict(ranges)
            ev = ExprEval(local, {})
            los = np.asarray(ev(r.dom.min))
            his = np.asarray(ev(mk.add(r.dom.min, r.dom.extent)))
            nonempty = np.broadcast_to(his > los, np.broadcast(los, his).shape)
            if nonempty.any():
                lo = int(np.broadcast_to(los, nonempty.shape)[nonempty].min())
                hi = int(np.broadcast_to(his, nonempty.shape)[nonempty].max())
            else:
                lo = hi = 0
        ranges[r.var] = (dims[r], lo, hi)
        boxed[r] = n.IterVar(r.var, n.Range(mk.as_expr(lo), mk.as_expr(hi - lo)), r.kind)
    out = copy.copy(stage)
    out.body = _Box(boxed).visit(stage.body)
    out.reduce_axes = tuple(boxed.get(a, a) for a in stage.reduce_axes)
    return out


class _Box(Mutator):
    """Each Reduce over a ragged axis: the boxed axis, and its own range as a condition."""

    def __init__(self, boxed: dict):
        super().__init__()
        self.boxed = boxed

    def visit_Reduce(self, r: n.Reduce):
        r = self.generic(r)
        conds = [] if r.condition is None else [r.condition]
        for a in r.axes:
            if a in self.boxed:
                conds.append(mk.compare(n.CmpOp.GE, a.var, a.dom.min))
                conds.append(mk.lt(a.var, mk.add(a.dom.min, a.dom.extent)))
        if len(conds) == (0 if r.condition is None else 1):
            return r
        return n.Reduce(r.dtype, r.combiner, r.sources, tuple(self.boxed.get(a, a) for a in r.axes),
                        mk.all_of(conds), r.value_index)


# ----------------------------------------------------------------- scans
def eval_scan(stage, env: dict, tensors: dict, out: np.ndarray, eval_stage) -> None:
    """A ``kd.scan`` stage (``stage.scan``), one step of its scan axis at a time: each step is
    the stage restricted to that step (``init``'s branch for the first ``init_steps`` steps,
    ``update``'s after), evaluated over the other axes at once by ``eval_stage`` into its
    slice of ``out``; the update reads the earlier steps from ``out`` itself."""
    info = stage.scan
    if not hasattr(info, "init_steps"):
        return          # a per-step stage (StepOf): its scan computes it, step by step
    tensors[stage.output] = out
    # (bfloat16 is held in float32 here: accumulate would skip the rounding of each step)
    if info.assoc is not None and type(stage.body) is n.Select and stage.dtype is not dt.bfloat16:
        return _eval_assoc(stage, env, tensors, out, eval_stage)
    steps = [t.stage for t in tensors if t.stage is not None and t.stage.name in info.steps]
    steps.sort(key=lambda s: info.steps.index(s.name))
    t = stage.axes[info.axis]
    lo, ext = int(eval_expr(t.dom.min, env)), int(eval_expr(t.dom.extent, env))
    body = stage.body
    # a tuple state's body selects by member first: evaluated whole (its t tests inside)
    split = type(body) is n.Select and info.members is None
    init, update = (body.t, body.f) if split else (body, body)
    for step in range(lo, lo + max(ext, 0)):
        for aux in steps:            # the update's reductions over earlier steps, this step
            k = aux.scan.axis
            a = aux.axes[k]
            part = copy.copy(aux)
            ax = list(aux.axes)
            ax[k] = n.IterVar(a.var, n.Range(mk.as_expr(step - lo), mk.as_expr(1)), a.kind)
            part.axes, part.scan = tuple(ax), None
            buf = tensors[aux.output]
            view = [slice(None)] * buf.ndim
            view[k] = slice(step - lo, step - lo + 1)
            eval_stage(part, env, tensors, buf[tuple(view)])
        one = copy.copy(stage)
        axes = list(stage.axes)
        axes[info.axis] = n.IterVar(t.var, n.Range(mk.as_expr(step), mk.as_expr(1)), t.kind)
        one.axes = tuple(axes)
        one.body = init if step < lo + info.init_steps else update
        one.scan = None
        view = [slice(None)] * out.ndim
        view[info.axis] = slice(step - lo, step - lo + 1)
        eval_stage(one, env, tensors, out[tuple(view)])


_UFUNC = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
          "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _eval_assoc(stage, env, tensors, out, eval_stage) -> None:
    """An associative scan (``ScanInfo.assoc``: cumsum, cummax...): its elements ``g`` (the
    init branch) over the whole grid, then numpy's own ``accumulate`` along the scan axis
    (sequential, as the serial loop: one numpy call instead of one per step)."""
    one = copy.copy(stage)
    one.body, one.scan = stage.body.t, None
    eval_stage(one, env, tensors, out)
    if out.size:
        _UFUNC[stage.scan.assoc_kind].accumulate(out, axis=stage.scan.axis, out=out)
