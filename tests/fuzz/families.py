"""Kernel families: elementwise trees, numpy-style reductions, index-style computes
(maps, gathers, reductions with custom reducers and ``where=``, stencils, 0-d results),
matmul (1-D, 2-D, batched) and mixed pipelines of those.

Each ``fam_*`` fills a ``Builder`` and returns the kernel's outputs.  Operands are
chosen so that numpy accepts them (domains guarded: ``log(abs(x) + 1)``...); a
small fraction of kernels is deliberately invalid (a dtype numpy rejects, an
index past the end) and then expects a fair kdsl error.
"""
from __future__ import annotations

from . import fdtypes as fd
from .exprs import body_expr, expr, finalize, has_array, inputs_over, scalars
from .families_surface import fam_surface
from .families_index import _AXES, _axis_val, _compute, _read, fam_index, fam_stencil
from .fdtypes import PromotionError, resolve
from .gen_kernel import V, Builder, broadcast
from .model import ONE, Node, ivar


# ------------------------------------------------------------------ families
def fam_elementwise(b: Builder):
    rank = b.choice([0, 1, 2, 3], [1, 3, 4, 2])
    U = b.universe(rank)
    pool = inputs_over(b, U, b.choice([1, 2, 3], [3, 4, 2])) + scalars(b)
    outs = [finalize(b, expr(b, pool, int(b.rng.integers(1, 5))), pool)]
    if b.p(0.15):
        outs.append(finalize(b, expr(b, pool, 2), pool))
    return outs


def reduce_np(b: Builder, x: V) -> V:
    """A random numpy-style reduction of ``x`` (ndim >= 1)."""
    kind = b.choice(["sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin", "custom"],
                    [5, 2, 2, 1, 1, 1, 1, 2, 1, 2])
    nd = x.ndim
    r = b.rng.random()
    if kind in ("argmax", "argmin"):
        axis = None if r < 0.25 else int(b.rng.integers(-nd, nd))
        if b.p(0.03) and nd >= 2:
            axis = (0, 1)
            b.expect_error = True
            b.features.add("argmax_tuple_axis")
    elif r < 0.2:
        axis = None
    elif r < 0.65:
        axis = int(b.rng.integers(-nd, nd))
    else:
        axes = [j for j in range(nd) if b.p(0.5)] or [int(b.rng.integers(nd))]
        axis = tuple(a - nd if b.p(0.2) else a for a in axes)
    keepdims = b.p(0.4)
    dtype = None
    if kind in ("sum", "prod") and b.p(0.25):
        dtype = b.choice(["int64", "float32", "float64", "int32", "float16", "bool", "int8"],
                         [3, 3, 2, 1, 1, 0.5, 0.5])
    elif kind == "mean" and b.p(0.25):
        dtype = b.choice(["float32", "float64", "float16"])
    if dtype is not None:
        b.features.add("reduce_dtype")
    norm = tuple(range(nd)) if axis is None else tuple(sorted(a % nd for a in (
        axis if isinstance(axis, tuple) else (axis,))))
    dims = tuple(ONE if j in norm else d for j, d in enumerate(x.dims) if keepdims or j not in norm)
    if kind == "custom":
        spec = b.reducer(x.dtype)
        code = f"{spec.rid}({x.code}, axis={axis!r}" + (", keepdims=True)" if keepdims else ")")
        node = Node("red", (x.node,), {"kind": "custom", "axis": axis, "keepdims": keepdims,
                                       "reducer": spec.rid})
        return V(node, dims, x.dtype, None, code)
    style = b.choice(["method", "kd", "np"])
    args = f"axis={axis!r}"
    if dtype is not None:
        args += f", dtype={fd.code(dtype)}"
    if keepdims:
        args += ", keepdims=True"
    if style == "method":
        code = f"{b.par(x)}.{kind}({args})"
    else:
        code = f"{style}.{kind}({x.code}, {args})"
    if kind in ("any", "all"):
        R = "bool"
    elif kind in ("argmax", "argmin"):
        R = "int64"
    elif kind in ("max", "min"):
        R = x.dtype
    elif dtype is not None:
        R = dtype
    elif kind == "mean":
        R = x.dtype if fd.is_float(x.dtype) else "float64"
    else:
        R = x.dtype if fd.is_float(x.dtype) else ("uint64" if x.dtype == "uint8" else "int64")
    b.features.add(f"reduce_{kind}")
    node = Node("red", (x.node,), {"kind": kind, "axis": axis, "keepdims": keepdims, "dtype": dtype})
    return V(node, dims, R, None, code)


def fam_reduction(b: Builder):
    rank = b.choice([1, 2, 3], [3, 5, 2])
    U = b.universe(rank)
    pool = inputs_over(b, U, b.choice([1, 2], [3, 2])) + scalars(b)
    x = expr(b, pool, int(b.rng.integers(0, 3)))
    if x.ndim == 0:
        x = pool[0]
    x = b.maybe_temp(x)
    r = b.temp(reduce_np(b, x))
    out = r
    if b.p(0.35) and r.ndim == x.ndim and r.dtype != "bool":
        # softmax-like: combine with the reduced value broadcast back
        y = b.binary(b.choice(["sub", "div", "add", "mul"]), x, r)
        if y is not None:
            out = y
            if b.p(0.5) and y.ndim:
                out = reduce_np(b, b.temp(y))
    elif b.p(0.2) and r.ndim:
        out = reduce_np(b, r)
    return [finalize(b, out, pool)]


# ------------------------------------------------------------------ matmul
def fam_matmul(b: Builder):
    form = b.choice(["1d1d", "2d1d", "1d2d", "2d2d", "batched", "bbcast"], [1, 1, 1, 4, 2, 1])
    N, K, M = b.new_sym(), b.new_sym(), b.new_sym()
    dt = b.pick_dtype(b.choice(["float", "num", "any"], [6, 3, 1]))
    dt2 = dt if b.p(0.7) else b.pick_dtype("num")
    shapes = {"1d1d": ((K,), (K,)), "2d1d": ((N, K), (K,)), "1d2d": ((K,), (K, M)),
              "2d2d": ((N, K), (K, M))}
    if form in shapes:
        sa, sb = shapes[form]
    else:
        Bt = b.new_sym()
        sa, sb = (Bt, N, K), (Bt, K, M)
        if form == "bbcast":
            sa = (ONE, N, K) if b.p(0.5) else (b.new_sym(), Bt, N, K)
            if len(sa) == 4:
                sb = (Bt, K, M)
    A = _operand(b, sa, dt)
    B = _operand(b, sb, dt2)
    style = b.choice(["@", "kd", "np", "dot"] if max(len(sa), len(sb)) <= 2 else ["@", "kd", "np"])
    dtype = None
    if style in ("kd", "np") and b.p(0.15):
        dtype = b.choice(["float32", "float64"])
    code = {"@": f"{b.par(A)} @ {b.par(B)}", "kd": f"kd.matmul({A.code}, {B.code}",
            "np": f"np.matmul({A.code}, {B.code}", "dot": f"np.dot({A.code}, {B.code})"}[style]
    if style in ("kd", "np"):
        code += (f", dtype={fd.code(dtype)})" if dtype else ")")
    try:
        R = dtype or resolve("matmul", [A.spec, B.spec])
    except PromotionError:
        R = dt
    ad = sa if len(sa) > 1 else (ONE,) + sa
    bd = sb if len(sb) > 1 else sb + (ONE,)
    batch = broadcast(ad[:-2], bd[:-2]) or ()
    dims = tuple(batch) + ((sa[-2],) if len(sa) > 1 else ()) + ((sb[-1],) if len(sb) > 1 else ())
    b.features.add(f"matmul_{form}")
    v = b.temp(V(Node("matmul", (A.node, B.node), {"dtype": dtype}), dims, R, None, code, False))
    if b.p(0.4) and dims:
        bias = b.array_param((dims[-1],), dt) if b.p(0.5) else b.lit("float")
        w = b.binary(b.choice(["add", "max", "mul"]), v, bias)
        v = w if w is not None else v
    return [finalize(b, v, [A, B])]


def _operand(b: Builder, dims: tuple, dt: str) -> V:
    """An input of shape ``dims``, sometimes passed transposed (``x.T``) or as an expression."""
    if len(dims) >= 2 and b.p(0.25):
        t = dims[:-2] + (dims[-1], dims[-2])
        p = b.array_param(t, dt)
        perm = tuple(range(len(dims) - 2)) + (len(dims) - 1, len(dims) - 2)
        code = f"{p.code}.T" if len(dims) == 2 else f"{p.code}.transpose({', '.join(map(str, perm))})"
        b.features.add("matmul_transposed_operand")
        return V(Node("view", (p.node,), {"kind": "transpose", "params": perm}), dims, dt, None, code)
    p = b.array_param(dims, dt)
    if b.p(0.2):
        v = b.binary(b.choice(["mul", "add"]), p, b.lit())
        if v is not None and v.dtype == dt:
            return v
    return p


# ------------------------------------------------------------------ mixed pipelines
def fam_mixed(b: Builder):
    rank = b.choice([1, 2], [1, 2])
    U = b.universe(rank)
    pool = inputs_over(b, U, 2) + scalars(b)
    v = b.temp(expr(b, pool, 2)) if True else None
    if v.ndim == 0:
        v = pool[0]
    steps = b.choice([1, 2, 3])
    outs = []
    for _ in range(steps):
        step = b.choice(["red", "ew", "compute"])
        if step == "red" and v.ndim:
            v = b.temp(reduce_np(b, v))
        elif step == "ew":
            w = expr(b, [v] + pool, 2)
            v = b.temp(w) if broadcast(w.dims, v.dims) is not None and w.ndim else v
        elif v.ndim:
            axes = _AXES[:v.ndim]
            rd = _read(b, v, tuple(ivar(a) for a in axes))
            body = body_expr(b, [rd] + [_axis_val(a) for a in axes], 1)
            if not has_array(body):
                body = rd
            if body.dtype == "bfloat16":
                body = b.cast(body, "float32")
            v = b.temp(_compute(b, v.dims, axes, body, like=v))
        if b.p(0.2):
            outs.append(finalize(b, v, pool))
    outs.append(finalize(b, v, pool))
    return outs[-2:] if len(outs) > 1 and b.p(0.5) else outs[-1:]


FAMILIES = {"elementwise": (fam_elementwise, 5), "reduction": (fam_reduction, 4),
            "index": (fam_index, 4), "stencil": (fam_stencil, 1.5), "matmul": (fam_matmul, 2.5),
            "mixed": (fam_mixed, 2), "surface": (fam_surface, 3.5)}
