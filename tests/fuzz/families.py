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
from .fdtypes import PromotionError, resolve
from .gen_kernel import V, Builder, broadcast
from .model import ONE, Dim, Idx, Node, const, iadd, iconst, isub, ivar

_NUM_OPS = ["add", "sub", "mul", "div", "fdiv", "mod", "pow", "max", "min",
            "lt", "le", "gt", "ge", "eq", "ne"]
_NUM_W = [6, 4, 6, 2, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1]
_INT_EXTRA = ["and", "or", "xor"]
_BOOL_OPS = ["and", "or", "xor", "land", "lor", "lxor", "eq", "ne", "add", "mul", "max", "min"]


# ------------------------------------------------------------------ expression trees
def leaf(b: Builder, pool: list) -> V:
    r = b.rng.random()
    if r < 0.72 and pool:
        v = b.choice(pool)
        if v.ndim and b.p(0.1):
            w = b.view(v)
            return w if w is not None else v
        return v
    if r < 0.97:
        return b.lit()
    return b.np_scalar()


def has_array(v: V) -> bool:
    todo, seen = [v.node], set()
    while todo:
        nd = todo.pop()
        if id(nd) in seen or nd is None:
            continue
        seen.add(id(nd))
        if nd.op in ("input", "read"):
            return True
        todo.extend(a for a in nd.args if a is not None)
    return False


def pick_binop(b: Builder, a: V, c: V) -> str:
    ab, cb = a.dtype == "bool", c.dtype == "bool"
    if ab and cb:
        return b.choice(_BOOL_OPS)
    ops, w = list(_NUM_OPS), list(_NUM_W)
    if not fd.is_float(a.dtype) and not fd.is_float(c.dtype):
        ops += _INT_EXTRA
        w += [1, 1, 1]
    return b.choice(ops, w)


def binop(b: Builder, op: str, a: V, c: V) -> V | None:
    """``a op c`` with the guards numpy needs for a defined result."""
    if a.py and c.py:
        return None
    if op == "sub" and a.dtype == "bool" and c.dtype == "bool" and not b.p(0.05):
        op = "xor"
    if op == "pow":
        try:
            R = resolve("power", [a.spec, c.spec])
        except PromotionError:
            R = "float64"
        if a.py:
            a, c = c, a
        if fd.is_float(R):
            base = b.binary("add", b.unary("abs", a), b.lit("float", 0.5))
            expo = b.lit(value=b.choice([2, 3, 0.5, 1.5, -1.0, 1, 0, 2.0]))
            return b.binary("pow", base, expo, "op")
        expo = b.binary("mod", b.unary("abs", c), b.lit("int", 4)) if not c.weak else \
            b.lit(value=b.choice([0, 1, 2, 3]))
        if expo is None:
            return None
        return b.binary("pow", a, expo, "op")
    style = None if op in ("max", "min", "land", "lor", "lxor") else b.choice(["op", "op", "op", "fn"])
    return b.binary(op, a, c, style)


def expr(b: Builder, pool: list, depth: int) -> V:
    """A random elementwise expression over ``pool`` (arrays, scalars, index reads)."""
    if depth <= 0 or b.p(0.2):
        return leaf(b, pool)
    kind = b.choice(["bin", "un", "where", "cast", "clip", "view"], [10, 4, 1.2, 1.5, 0.6, 1.2])
    if kind == "bin":
        a = expr(b, pool, depth - 1)
        c = expr(b, pool, depth - 1) if b.p(0.65) else b.lit()
        if b.p(0.5):
            a, c = c, a
        v = binop(b, pick_binop(b, a, c), a, c)
        return b.maybe_temp(v) if v is not None else a
    x = expr(b, pool, depth - 1)
    if kind == "un":
        return b.maybe_temp(unary_guarded(b, x))
    if kind == "where":
        c = expr(b, pool, depth - 1)
        cond = b.binary(b.choice(["lt", "gt", "ge", "ne"]), c, b.lit())
        other = expr(b, pool, depth - 1) if b.p(0.6) else b.lit()
        v = b.where(cond, x, other) if cond is not None else None
        return b.maybe_temp(v) if v is not None else x
    if kind == "cast":
        d = b.choice(list(fd.ALL), [2, 2, 1, 2, 2, 1, 1, 3, 3, 2])
        if x.weak:
            return x
        return b.cast(x, d)
    if kind == "clip":
        v = b.clip(x) if not x.weak else None
        return v if v is not None else x
    v = b.view(x) if x.ndim and not x.weak else None
    return v if v is not None else x


def unary_guarded(b: Builder, x: V) -> V:
    if x.py:
        return x
    isf = fd.is_float(x.dtype)
    ops = ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil", "isnan",
           "lnot", "erf", "sigmoid", "rsqrt"]
    w = [3, 2, 2, 2, 2, 1, 1, 2, 1, 1, 0.5, 0.5, 1, 1, 1]
    if x.dtype == "bool":
        ops, w = ["invert", "lnot", "exp", "abs"], [3, 2, 1, 1]
    elif not isf:
        ops += ["invert"]
        w += [2]
    op = b.choice(ops, w)
    if x.weak and op not in ("neg", "abs"):
        op = "neg" if x.dtype != "bool" else "abs"
    if op == "log":
        x = b.binary("add", b.unary("abs", x), b.lit("int", 1))
    elif op in ("sqrt", "rsqrt"):
        x = b.unary("abs", x) if b.p(0.6) else b.binary("add", b.binary("mul", x, x), b.lit("float", 0.25))
    elif op == "exp" and b.p(0.5):
        x = b.binary("mul", x, b.lit("float", 0.5))
    return b.unary(op, x)


def body_expr(b: Builder, pool: list, depth: int) -> V:
    """An expression inside a kd.compute lambda (no temporaries: axes are local there)."""
    b.in_body = True
    try:
        return expr(b, pool, depth)
    finally:
        b.in_body = False


def finalize(b: Builder, v: V, pool: list) -> V:
    """An output: depends on an array, is not bfloat16 (numpy cannot hold it)."""
    if not has_array(v) or v.weak:
        arr = [p for p in pool if has_array(p)]
        if arr:
            w = b.binary("add", v, b.choice(arr))
            v = w if w is not None else b.choice(arr)
    if v.dtype == "bfloat16":
        v = b.cast(v, "float32")
    return v


def inputs_over(b: Builder, U: tuple, k: int, kinds="any") -> list:
    ins = [b.array_param(U, b.pick_dtype(kinds))]
    for _ in range(k - 1):
        ins.append(b.array_param(b.sub_dims(U), b.pick_dtype(kinds)))
    return ins


def scalars(b: Builder) -> list:
    out = []
    if b.p(0.3):
        out.append(b.scalar_param(b.choice(["int", "float", "bool"], [4, 5, 1]), const=b.p(0.25)))
    return out


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


# ------------------------------------------------------------------ index style
_AXES = ["i", "j", "h"]


def _read(b, src: V, idx: tuple) -> V:
    code = f"{b.par(src)}[{', '.join(i.code() for i in idx)}]"
    return V(Node("read", (src.node,), {"idx": idx}), (), src.dtype, None, code)


def _axis_val(name) -> V:
    return V(Node("axis", (), {"name": name}), (), "int64", "i", name)


def _compute(b, dims: tuple, axes: list, body: V, name=None, like: V | None = None) -> V:
    """``kd.compute`` over ``dims`` (sizes that have no formula are read off ``like.shape``)."""
    codes = [b.size_code(d) if d.codeable() else f"{like.code}.shape[{j}]" for j, d in enumerate(dims)]
    shape = "(" + ", ".join(codes) + ("," if len(codes) == 1 else "") + ")"
    nm = f", name={name!r}" if name else ""
    code = f"kd.compute({shape}, lambda {', '.join(axes)}: {body.code}{nm})"
    dtype = body.dtype
    node = Node("compute", (body.node,), {"dims": tuple(dims), "axes": tuple(axes)})
    return V(node, tuple(dims), dtype, None, code)


def _raxis(b, lo: int, hi: Dim, name: str) -> tuple:
    """A reduce axis line ``k = kd.reduce_axis(...)``; returns (name, lo, hi)."""
    if lo:
        b.lines.append(f"{name} = kd.reduce_axis(({lo}, {b.size_code(hi)}), name={name!r})")
    else:
        ext = b.size_code(hi)
        b.lines.append(f"{name} = kd.reduce_axis({ext}, name={name!r})" if b.p(0.7)
                       else f"{name} = kd.reduce_axis({ext})")
    return (name, const(lo), hi)


def _ired(b, kind: str, body: V, raxes: list, where: V | None = None, dtype=None) -> V:
    names = [r[0] for r in raxes]
    axis = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
    extra = "" if where is None else f", where={where.code}"
    rid = None
    if kind == "custom":
        spec = b.reducer(body.dtype)
        rid = spec.rid
        code = f"{spec.rid}({body.code}, axis={axis}{extra})"
        R = body.dtype
    else:
        if dtype is not None:
            extra += f", dtype={fd.code(dtype)}"
        code = f"kd.{kind}({body.code}, axis={axis}{extra})"
        R = "bool" if kind in ("any", "all") else (dtype or body.dtype)
    b.features.add(f"ired_{kind}")
    node = Node("ired", (body.node, None if where is None else where.node),
                {"kind": kind, "raxes": tuple(raxes), "dtype": dtype, "reducer": rid})
    return V(node, (), R, None, code)


def fam_index(b: Builder):
    form = b.choice(["map", "reduce", "mm", "stencil2d", "full"], [5, 4, 2, 2, 1])
    return {"map": _idx_map, "reduce": _idx_reduce, "mm": _idx_mm, "stencil2d": _idx_stencil2d,
            "full": _idx_full}[form](b)


def _src(b: Builder, rank: int, kinds="any", k=1) -> list:
    U = b.universe(rank)
    ins = [b.array_param(U, b.pick_dtype(kinds)) for _ in range(k)]
    if b.p(0.25):   # read an intermediate value, not the input itself
        v = expr(b, ins, 1)
        if v.dims == U and not v.weak:
            ins[0] = b.temp(v)
    return ins


def _idx_map(b: Builder):
    rank = b.choice([1, 2, 3], [4, 5, 1])
    srcs = _src(b, rank, k=b.choice([1, 2], [3, 2]))
    U = srcs[0].dims
    order = list(b.rng.permutation(rank)) if b.p(0.4) else list(range(rank))
    axes = _AXES[:rank]
    out_dims, per_axis = [None] * rank, {}
    oob = b.p(0.04)
    for pos, sd in enumerate(order):
        D, ax = U[sd], ivar(axes[pos])
        pat = b.choice(["id", "rev", "shift", "stride2", "up2"], [5, 2, 3, 1, 1])
        b.features.add(f"pattern_{pat}")
        if pat == "id":
            out_dims[pos], per_axis[sd] = D, [ax]
        elif pat == "rev":
            out_dims[pos] = D
            per_axis[sd] = [isub(isub(Idx("dim", dim=D), iconst(1)), ax)]
            b.used_syms |= D.syms()
        elif pat == "shift":
            c = int(b.choice([1, 2]))
            b.require(D, c)
            out_dims[pos] = Dim("sub", base=D, value=c)
            per_axis[sd] = [iadd(ax, iconst(o)) for o in range(c + 1)]
            if oob:
                out_dims[pos] = Dim("sub", base=D, value=c - 1) if c > 1 else D
                b.features.add("oob")
                b.expect_error = True
                oob = False
        elif pat == "stride2":
            out_dims[pos], per_axis[sd] = Dim("half", base=D), [Idx("mul", value=2, a=ax)]
        else:
            out_dims[pos], per_axis[sd] = Dim("dbl", base=D), [Idx("fdiv", value=2, a=ax)]
    reads = []
    for _ in range(b.choice([1, 2, 3], [3, 3, 1])):
        src = b.choice(srcs)
        idx = tuple(b.choice(per_axis[d]) for d in range(rank))
        reads.append(_read(b, src, idx))
    pool = reads + ([_axis_val(a) for a in axes] if b.p(0.3) else []) + scalars(b)
    body = body_expr(b, pool, int(b.rng.integers(0, 3)))
    if not has_array(body):
        body = reads[0]
    if body.dtype == "bfloat16":
        body = b.cast(body, "float32")
    v = _compute(b, tuple(out_dims), axes, body, name=b.choice([None, "C", "out"]))
    return [b.temp(v)] if b.p(0.5) else [finalize(b, b.temp(v), [])]


def _idx_reduce(b: Builder):
    rank = b.choice([1, 2], [1, 3])
    srcs = _src(b, rank, k=b.choice([1, 2], [3, 1]))
    U = srcs[0].dims
    rd = rank - 1                         # reduce over the last source dim
    lo = 1 if b.p(0.2) else 0
    kname = "k"
    rax = _raxis(b, lo, U[rd], kname)
    axes = _AXES[:rank - 1]
    idx = tuple([ivar(a) for a in axes] + [ivar(kname)])
    reads = [_read(b, s, idx) for s in srcs]
    pool = reads + ([_axis_val(kname)] if b.p(0.2) else []) + scalars(b)
    body = body_expr(b, pool, int(b.rng.integers(0, 3)))
    if not has_array(body):
        body = reads[0]
    kind = b.choice(["sum", "prod", "max", "min", "any", "all", "custom"], [6, 1, 2, 2, 1, 1, 3])
    if body.dtype == "bfloat16" and kind != "custom":
        pass
    where = None
    if b.p(0.2):
        where = b.binary(b.choice(["gt", "lt", "ne"]), b.choice(reads), b.lit())
        if axes and b.p(0.4):
            where = b.binary("le", _axis_val(kname), _axis_val(axes[0]))
        b.features.add("ired_where")
    dtype = None
    if kind == "sum" and b.p(0.2):
        dtype = b.choice(["float64", "float32", "int64"])
    r = _ired(b, kind, body, [rax], where, dtype)
    if b.p(0.3) and r.dtype not in ("bool", "bfloat16"):
        r2 = b.binary(b.choice(["add", "mul"]), r, b.lit())
        r = r2 if r2 is not None else r
    if r.dtype == "bfloat16":
        r = b.cast(r, "float32")
    v = _compute(b, tuple(U[:rank - 1]), axes, r, name=b.choice([None, "B"]))
    return [b.temp(v)]


def _idx_mm(b: Builder):
    N, K, M = b.new_sym(), b.new_sym(), b.new_sym()
    d = b.pick_dtype("num")
    A = b.array_param((N, K), d)
    B = b.array_param((K, M), b.choice([d, b.pick_dtype("num")]))
    rax = _raxis(b, 0, K, "k")
    prod = b.binary("mul", _read(b, A, (ivar("i"), ivar("k"))), _read(b, B, (ivar("k"), ivar("j"))))
    dtype = b.choice([None, None, "float64", "float32"]) if fd.is_float(prod.dtype) else None
    r = _ired(b, "sum", prod, [rax], None, dtype)
    if r.dtype == "bfloat16":
        r = b.cast(r, "float32")
    return [b.temp(_compute(b, (N, M), ["i", "j"], r, name=b.choice([None, "C"])))]


def _idx_stencil2d(b: Builder):
    kh, kw = b.choice([(3, 3), (2, 3), (1, 2), (3, 1), (2, 2)])
    N, M = b.new_sym(), b.new_sym()
    b.require(N, kh - 1)
    b.require(M, kw - 1)
    I = b.array_param((N, M), b.pick_dtype("num"))
    di, dj = _raxis(b, 0, const(kh), "di"), _raxis(b, 0, const(kw), "dj")
    rd = _read(b, I, (iadd(ivar("i"), ivar("di")), iadd(ivar("j"), ivar("dj"))))
    oob = b.p(0.04)
    out = (Dim("sub", base=N, value=kh - 1 - (1 if oob and kh > 1 else 0)),
           Dim("sub", base=M, value=kw - 1))
    if oob and kh > 1:
        b.features.add("oob")
        b.expect_error = True
    if b.p(0.6):
        F = b.array_param((const(kh), const(kw)), b.pick_dtype("num"))
        body = b.binary("mul", rd, _read(b, F, (ivar("di"), ivar("dj"))))
        kind = "sum"
    else:
        body, kind = rd, b.choice(["max", "min", "sum", "custom"])
    r = _ired(b, kind, body, [di, dj])
    if r.dtype == "bfloat16":
        r = b.cast(r, "float32")
    b.features.add("stencil2d")
    return [b.temp(_compute(b, out, ["i", "j"], r))]


def _idx_full(b: Builder):
    rank = b.choice([1, 2])
    srcs = _src(b, rank)
    raxes = [_raxis(b, 0, srcs[0].dims[j], f"k{j}") for j in range(rank)]
    rd = _read(b, srcs[0], tuple(ivar(r[0]) for r in raxes))
    kind = b.choice(["sum", "max", "min", "custom", "any"], [4, 2, 1, 2, 1])
    r = _ired(b, kind, rd, raxes)
    if r.dtype == "bfloat16":
        r = b.cast(r, "float32")
    b.features.add("compute_0d")
    return [b.temp(_compute(b, (), [], r))]


def fam_stencil(b: Builder):
    if b.p(0.5):
        return _idx_stencil2d(b)
    # 1-D / 2-D shifted reads (numpy slices or index style)
    N = b.new_sym()
    c = int(b.choice([1, 2]))
    b.require(N, c)
    A = b.array_param((N,), b.pick_dtype("num"))
    if b.p(0.5):
        parts = [b.view_slice(A, o, c) for o in range(c + 1)]
        v = parts[0]
        for p in parts[1:]:
            w = b.binary(b.choice(["add", "sub", "mul", "max"]), v, p)
            v = w if w is not None else v
        b.features.add("slice_stencil")
        return [finalize(b, v, [A])]
    reads = [_read(b, A, (iadd(ivar("i"), iconst(o)),)) for o in range(c + 1)]
    body = body_expr(b, reads, 2)
    if not has_array(body):
        body = reads[-1]
    if body.dtype == "bfloat16":
        body = b.cast(body, "float32")
    return [b.temp(_compute(b, (Dim("sub", base=N, value=c),), ["i"], body))]


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
            "mixed": (fam_mixed, 2)}
