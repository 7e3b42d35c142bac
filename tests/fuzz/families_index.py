"""Index-style families: ``kd.compute`` maps (reversals, strided gathers, shifted
stencils), reductions over ``kd.reduce_axis`` with ``where=`` and custom reducers,
matmul and 2-D stencils written by hand, 0-d results."""
from __future__ import annotations

from . import fdtypes as fd
from .exprs import body_expr, expr, finalize, has_array, scalars
from .gen_kernel import V, Builder
from .model import Dim, Idx, Node, const, iadd, iconst, isub, ivar

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
