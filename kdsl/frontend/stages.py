"""Making stages: ``out[axes] = body`` with any Reduce at the root of its body.

A body that holds a Reduce below other ops (``kd.sum(...) * 2``) gets each such
Reduce hoisted into an auxiliary reduce stage over the axes it depends on, read
back with a TensorRead.  Each stage owns fresh reduce IterVars, so a
``kd.reduce_axis`` used by two stages gives two independent axes.
"""
from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..errors import KernelError, SourceLoc
from ..graph import Stage
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import collect, substitute
from .context import MemoMutator, TraceContext


def new_axis(ctx: TraceContext, name: str, extent, kind=n.IterKind.SPATIAL, lo=0) -> n.IterVar:
    """A fresh IterVar ``name`` over ``[lo, lo + extent)`` registered with the trace."""
    iv = n.IterVar(n.var(name), n.Range(mk.as_expr(lo), mk.as_expr(extent)), kind)
    ctx.ivs[iv.var] = iv
    return iv


def ordered_vars(e) -> list:
    """The Vars of ``e``, each once, in pre-order."""
    out, seen = [], set()
    for v in collect(e, lambda x: isinstance(x, n.Var)):
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def free_axes(ctx: TraceContext, e, own=()) -> list:
    """The traced axes ``e`` uses that neither ``own`` nor a Reduce inside ``e`` binds, in order."""
    bound = {id(v) for v in own}
    for r in collect(e, lambda x: isinstance(x, n.Reduce)):
        bound.update(id(a.var) for a in r.axes)
    return [v for v in ordered_vars(e) if v in ctx.ivs and id(v) not in bound]


class _Hoist(MemoMutator):
    """Replace every Reduce by a read of its own auxiliary stage."""

    def __init__(self, ctx, parent: str, axes: tuple, loc):
        super().__init__()
        self.ctx, self.parent, self.axes, self.loc = ctx, parent, axes, loc

    def visit_Reduce(self, r: n.Reduce):
        ctx = self.ctx
        # the members of one multi-value reduction (a tuple reducer's results) share a stage
        key = None
        if len(r.combiner.result) > 1:
            key = (id(r.combiner), tuple(map(id, r.sources)), tuple(id(a) for a in r.axes),
                   id(r.condition))
            shared = ctx.__dict__.setdefault("_multi_reduce_stages", {}).get(key)
            if shared is not None:
                t, reads = shared[1], shared[2]
                v = t.stage.values[r.value_index]
                return n.TensorRead(v.dtype, v, reads)
        # the axes r depends on: not its own, nor those of reductions nested in its sources
        free = free_axes(ctx, r)
        rank = {id(a.var): k for k, a in enumerate(self.axes)}
        free.sort(key=lambda v: rank.get(id(v), len(rank)))
        new_axes, mapping, reads = [], {}, []
        for v in free:
            iv = ctx.ivs[v]
            ax = new_axis(ctx, v.name, iv.dom.extent)
            new_axes.append(ax)
            mapping[v] = mk.add(ax.var, iv.dom.min)
            reads.append(mk.sub(v, iv.dom.min))
        body = substitute(r, mapping)
        # a reduction's bounds may use the axes just renamed (kd.reduce_axis((0, i + 1)))
        body = dataclasses.replace(body, axes=tuple(_rebound(a, mapping) for a in body.axes))
        name = ctx.unique(f"{self.parent}_{r.combiner.name}")
        t = make_stage(ctx, name, "compute", tuple(new_axes), body, self.loc)
        if key is not None:     # keep r alive: the key holds ids
            ctx._multi_reduce_stages[key] = (r, t, tuple(reads))
        return n.TensorRead(t.dtype, t, tuple(reads))


def _rebound(iv: n.IterVar, mapping: dict) -> n.IterVar:
    """``iv`` with ``mapping`` applied to its bounds (the same IterVar if they do not change)."""
    lo, ext = substitute(iv.dom.min, mapping), substitute(iv.dom.extent, mapping)
    if lo is iv.dom.min and ext is iv.dom.extent:
        return iv
    return n.IterVar(iv.var, n.Range(lo, ext), iv.kind)


def make_stage(ctx: TraceContext, name: str, origin: str, axes: tuple, body: n.Expr,
               loc: SourceLoc | None):
    """Add the stage ``name[axes] = body`` to the trace and return its output Tensor."""
    reduce_axes = ()
    if isinstance(body, n.Reduce):
        h = _Hoist(ctx, name, axes, loc)
        sources = tuple(h.visit(s) for s in body.sources)
        cond = None if body.condition is None else h.visit(body.condition)
        # fresh reduce axes owned by this stage
        mapping, fresh = {}, []
        for iv in body.axes:
            iv = _rebound(iv, mapping)      # bounds over an earlier reduce axis
            ax = new_axis(ctx, iv.name, iv.dom.extent, n.IterKind.REDUCE, iv.dom.min)
            mapping[iv.var] = ax.var
            fresh.append(ax)
        sources = tuple(substitute(s, mapping) for s in sources)
        cond = None if cond is None else substitute(cond, mapping)
        body = dataclasses.replace(body, sources=sources, condition=cond, axes=tuple(fresh))
        reduce_axes = tuple(fresh)
    else:
        body = _Hoist(ctx, name, axes, loc).visit(body)
    bound = {id(a.var) for a in axes} | {id(a.var) for a in reduce_axes}
    for v in ordered_vars(body):
        iv = ctx.ivs.get(v)
        if iv is not None and id(v) not in bound:
            if iv.kind is n.IterKind.REDUCE:
                raise KernelError(f"reduce axis {v.name!r} is used outside of a reduction",
                                  loc=loc, hint=f"wrap the expression in kd.sum(..., axis={v.name}) "
                                  "(or another reduction over that axis)")
            raise KernelError(f"axis {v.name!r} of another kd.compute is used here", loc=loc,
                              hint="index style axes are only valid inside their own kd.compute lambda")
    stage = Stage(name, tuple(axes), reduce_axes, body, body.dtype, loc=loc, origin=origin)
    ctx.stages.append(stage)
    return stage.output


def index_dtype_expr(e: n.Expr) -> n.Expr:
    """``e`` as an index (int64) expression."""
    return mk.cast(e, dt.index)
