"""Index style: ``kd.compute(shape, fcompute, name=None)`` and ``kd.reduce_axis``.

``fcompute`` receives one spatial axis per dimension, named after its
parameters; axes are 0-d weak int64 traced values, so ``i + di``,
``A[i + di, j]`` and ``kd.exp(A[i, k])`` reuse the array machinery.
"""
from __future__ import annotations

import inspect

from ..errors import KernelError, ShapeError, user_location
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import free_vars
from ..graph import Constraint
from . import context
from .array import Array, from_tensor, index_expr, scalar
from .ops import asarray
from .stages import make_stage, new_axis


def _axis_proxy(iv: n.IterVar) -> Array:
    return scalar(iv.var, weak=True, op=iv.name, iv=iv)


def reduce_axis(dom, name=None) -> Array:
    """A reduction axis over ``range(extent)`` or ``range(lo, hi)`` (usable as an index)."""
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise KernelError("reduce_axis takes an extent or a (lo, hi) pair",
                              hint="kd.reduce_axis(m) or kd.reduce_axis((1, m))")
        lo, hi = index_expr(dom[0], "bound"), index_expr(dom[1], "bound")
        extent = _range_extent(mk.sub(hi, lo))
    else:
        lo, extent = mk.as_expr(0), _range_extent(index_expr(dom, "extent"))
    iv = n.IterVar(n.var(name or "k"), n.Range(lo, extent), n.IterKind.REDUCE)
    ctx = context.active()
    if ctx is not None:
        ctx.ivs[iv.var] = iv
    return _axis_proxy(iv)


def _known_nonneg(d: n.Expr) -> bool:
    """``d`` is a constant >= 0 or an array's size."""
    ctx = context.active()
    r = ctx.resolve(d) if ctx is not None else d
    if isinstance(r, n.Const):
        return r.value >= 0
    return ctx is not None and isinstance(r, n.Var) and r in ctx.dim_desc


def _range_extent(e: n.Expr) -> n.Expr:
    """The length of ``range(...)`` whose ``hi - lo`` is ``e``: a negative one is empty (the
    reduction gives its identity, as numpy's sum over an empty range), on every backend."""
    if _known_nonneg(e):
        return e
    if isinstance(e, n.Const):
        return mk.as_expr(0, e.dtype)
    return mk.max_(e, mk.as_expr(0, e.dtype))


def _require_nonneg_size(ctx, j: int, d: n.Expr, loc) -> None:
    """A call-time ShapeError at the user's ``kd.compute`` line for a size that is negative."""
    if _known_nonneg(d):
        return
    legend = [f"{v.name} = {ctx.dim_desc[v]}" for v in free_vars(d) if v in ctx.dim_desc]
    text = ctx.describe(d) + (f", where {', '.join(legend)}" if legend else "")
    text = text.replace("{", "{{").replace("}", "}}")
    ctx.constraints.append(Constraint(
        mk.compare(n.CmpOp.GE, d, mk.as_expr(0, d.dtype)), n.const(True),
        f"kd.compute's shape: size {{size}} of dimension {j} ({text}) is negative for this call",
        loc, ShapeError, (("size", d),),
        "sizes must be >= 0: guard the call, or clamp the size (kd.maximum(n - 2, 0))"))


def _arity(fcompute, ndim: int) -> list:
    """The axis names for ``fcompute``'s parameters; KernelError if it takes the wrong number."""
    try:
        sig = inspect.signature(fcompute)
    except (TypeError, ValueError):
        return [f"i{j}" for j in range(ndim)]
    names, varargs = [], False
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if p.default is p.empty or len(names) < ndim:
                names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            varargs = True
    if varargs and len(names) <= ndim:
        return names + [f"i{j}" for j in range(len(names), ndim)]
    if len(names) != ndim:
        raise KernelError(f"the compute function takes {len(names)} argument(s) but the shape has "
                          f"{ndim} dimension(s)",
                          hint=f"give it one parameter per dimension, e.g. lambda "
                               f"{', '.join(f'i{j}' for j in range(ndim)) or ''}: ...")
    return names


def compute(shape, fcompute, name=None) -> Array:
    """A stage ``out[axes] = fcompute(*axes)`` named ``name`` (default ``compute``).

    ``fcompute`` may return a tuple: the result is then a tuple of arrays (members of one
    tuple reduction share one stage; see kdsl.frontend.tuple_reduce)."""
    ctx = context.current()
    loc = user_location()
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = [index_expr(s, "size") for s in shape]
    for d in dims:
        if isinstance(d, n.Const) and d.value < 0:
            raise ShapeError(f"negative size {d.value} in kd.compute's shape", loc=loc,
                             hint="sizes must be >= 0")
    for j, d in enumerate(dims):
        _require_nonneg_size(ctx, j, d, loc)
    names = _arity(fcompute, len(dims))
    axes = tuple(new_axis(ctx, nm, d) for nm, d in zip(names, dims))
    result = fcompute(*[_axis_proxy(ax) for ax in axes])
    if isinstance(result, (tuple, list)):
        from .tuple_reduce import compute_tuple
        return compute_tuple(ctx, result, axes, name, loc)
    r = asarray(result)
    if r.ndim != 0:
        raise ShapeError(f"kd.compute's function must return a scalar (0-d) expression, got a "
                         f"{r.ndim}-d array", loc=loc,
                         hint="index every dimension of the arrays it reads, e.g. A[i, j]")
    body = r.at(())
    t = make_stage(ctx, ctx.unique(name or "compute"), "compute", axes, body, loc)
    return from_tensor(t)

