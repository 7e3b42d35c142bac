"""``@`` / ``kd.matmul``: numpy's rules (1-D, 2-D, batched with broadcast batch dims).

One reduce stage named ``matmul``; 16-bit floats accumulate in float32 and are
cast back lazily; ``dtype=`` sets the result (and accumulator) type.
"""
from __future__ import annotations

import numpy as np

from ..errors import KernelError, ShapeError, user_location
from ..ir import make as mk
from ..ir import nodes as n
from . import context
from .array import from_tensor
from .ops import _as_dtype, asarray, broadcast_dims, cast_to, elementwise, result_dtype
from .reduce import combiner
from .stages import make_stage, new_axis


def matmul(a, b, dtype=None, out=None):
    """Matrix product with numpy's broadcasting rules; makes one stage ``matmul``."""
    if out is not None:
        raise KernelError("matmul(out=...) is not supported inside kernels", hint="return the result")
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul: input operands must be at least 1-dimensional, got a 0-d operand",
                         hint="use * to multiply by a scalar")
    ctx = context.current()
    loc = user_location()
    res = _as_dtype(dtype) if dtype is not None else result_dtype(np.matmul, [a, b], "matmul")
    acc = res.compute
    a_dims = a.dims if a.ndim > 1 else (mk.as_expr(1),) + a.dims
    b_dims = b.dims if b.ndim > 1 else b.dims + (mk.as_expr(1),)
    ka, kb = ctx.resolve(a_dims[-1]), ctx.resolve(b_dims[-2])
    if isinstance(ka, n.Const) and isinstance(kb, n.Const) and ka.value != kb.value:
        raise ShapeError(f"matmul: the inner dimensions do not match: {ka.value} (last of the first "
                         f"operand) and {kb.value} (of the second)",
                         hint="A @ B needs A.shape[-1] == B.shape[-2]")
    k = ctx.unify(a_dims[-1], b_dims[-2], "matmul") if ka != kb else ka
    batch, (ma, mb) = broadcast_dims([a_dims[:-2], b_dims[:-2]], "matmul batch dimensions")
    out_dims = list(batch) + ([a_dims[-2]] if a.ndim > 1 else []) + ([b_dims[-1]] if b.ndim > 1 else [])
    axes = tuple(new_axis(ctx, f"i{j}", d) for j, d in enumerate(out_dims))
    r = new_axis(ctx, "r0", k, n.IterKind.REDUCE)
    nb = len(batch)
    bidx = tuple(ax.var for ax in axes[:nb])
    rest = [ax.var for ax in axes[nb:]]
    i = rest.pop(0) if a.ndim > 1 else None
    j = rest.pop(0) if b.ndim > 1 else None
    a_idx = ma(bidx)[: a.ndim - 2] if a.ndim > 2 else ()
    b_idx = mb(bidx)[: b.ndim - 2] if b.ndim > 2 else ()
    a_idx = a_idx + ((i, r.var) if a.ndim > 1 else (r.var,))
    b_idx = b_idx + ((r.var, j) if b.ndim > 1 else (r.var,))
    av, bv = cast_to(a.at(a_idx), acc), cast_to(b.at(b_idx), acc)
    if acc.is_bool:
        prod, comb = mk.binary(n.BinOp.AND, av, bv), combiner("any", acc)
    else:
        prod, comb = mk.binary(n.BinOp.MUL, av, bv), combiner("sum", acc)
    body = n.Reduce(acc, comb, (prod,), (r,))
    t = make_stage(ctx, ctx.unique("matmul"), "matmul", axes, body, loc)
    result = from_tensor(t)
    if res is not acc:
        result = elementwise("matmul", [result], lambda e: cast_to(e, res), res)
    return result

