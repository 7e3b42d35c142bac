"""max/min over a ragged range: is it non-empty at every point where it is evaluated?

``kd.max(x[k], axis=k)`` with ``k = kd.reduce_axis((0, i + 1))`` inside
``kd.compute((n,), lambda i: ...)`` reduces a range whose length depends on the axis ``i``,
so "the axis is not empty" is a statement about every ``i``, not one call-time number.
numpy has no ragged reductions; kdsl's rule is numpy's at every point: an empty max/min is
an error.  In order of preference it is

* proven at trace time over the axes' ranges (``(0, i + 1)`` is never empty): no check;
* otherwise, when the range's smallest length over the axes is a shape expression (the
  range is affine in them), a call-time check that it is >= 1 wherever the axes run;
* otherwise a KernelError at trace time, pointing at a reduction with an identity.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import KernelError, ShapeError
from ..graph import Constraint
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify
from ..ir.visitor import free_vars
from .access_prove import Prover, negate

C = n.CmpOp


def axes_of(ctx, dims) -> list:
    """The trace's axes that ``dims`` use, with the axes their ranges use, outer first."""
    need, todo = set(), [v for d in dims for v in free_vars(d) if v in ctx.ivs]
    while todo:
        v = todo.pop()
        if v in need:
            continue
        need.add(v)
        dom = ctx.running.get(v, ctx.ivs[v]).dom
        todo += [u for u in free_vars(dom.min) | free_vars(dom.extent) if u in ctx.ivs]
    # creation order: outer first; an axis narrowed where the traced code runs, narrowed
    return [ctx.running.get(v, iv) for v, iv in ctx.ivs.items() if v in need]


@contextmanager
def running_from(ctx, iv, start):
    """While tracing inside: the axis ``iv`` runs from ``start`` on (a scan's update)."""
    lo = mk.add(iv.dom.min, start)
    ext = mk.max_(mk.sub(iv.dom.extent, start), mk.as_expr(0))
    old = ctx.running.get(iv.var)
    ctx.running[iv.var] = n.IterVar(iv.var, n.Range(lo, ext), iv.kind)
    try:
        yield
    finally:
        if old is None:
            del ctx.running[iv.var]
        else:
            ctx.running[iv.var] = old


def _length(d):
    """``d`` as far as ``d >= 1`` goes: ``max(x, 0) >= 1`` is ``x >= 1``."""
    if type(d) is n.Binary and d.op is n.BinOp.MAX and type(d.b) is n.Const and d.b.value == 0:
        return _length(d.a)
    return d


def require_nonempty_ragged(ctx, kind, d, axes, loc) -> None:
    """The range length ``d`` (over the trace's ``axes``, see ``axes_of``) is >= 1 at every
    point of the axes: proven, else a call-time Constraint, else a KernelError now."""
    from .access import _extremes       # the access prover's exact extremes of affine indices
    box = {iv.var: (iv.dom.min, mk.sub(mk.add(iv.dom.min, iv.dom.extent), 1)) for iv in axes}
    domain = set(box)
    d = _length(d)
    if Prover(box, domain).nonneg(mk.sub(d, 1)):
        return
    names = ", ".join(iv.var.name for iv in axes)
    span = _extremes(d, box, domain)
    if span is None:
        raise KernelError(
            f"{kind} over a range whose length depends on the axes {names}: kdsl cannot "
            f"show it is never empty, and {kind} over an empty range has no identity",
            loc=loc, hint="give the reduction an identity: kd.reducer(lambda a, b: "
            "kd.maximum(a, b), identity=...) (kd.minimum for a min)")
    msg = (f"{kind} over a range whose length depends on the axes {names} is empty at some of "
           f"their points, and {kind} over an empty range has no identity (numpy raises too)")
    hint = (f"give the reduction an identity (kd.reducer(lambda a, b: kd.maximum(a, b), "
            f"identity=...)), or keep the range non-empty wherever the axes {names} run")
    # the smallest length is exact where the axes' ranges are non-empty; where one is empty
    # nothing is reduced
    happens = [mk.compare(C.LE, lo, hi) for lo, hi in box.values()
               if not (free_vars(lo) | free_vars(hi)) & domain]
    lhs = mk.compare(C.GE, span[0], 1)
    for h in happens:
        lhs = mk.binary(n.BinOp.OR, lhs, negate(simplify(h)))
    lhs = simplify(lhs)
    if type(lhs) is n.Const:
        if lhs.value:
            return
        raise ShapeError(msg, loc=loc, hint=hint)
    ctx.constraints.append(Constraint(lhs, n.const(True), msg, loc, hint=hint))
