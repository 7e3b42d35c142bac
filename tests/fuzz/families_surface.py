"""The ``surface`` family: numpy's array functions inside kernels (issue 25 item 2-5).

One function per draw: shape functions (concatenate, stack, pad in every mode, roll, flip,
tril/triu, take/take_along_axis with indices reduced into range -- or past an empty
axis, which numpy refuses --, diff, round, nan_to_num), scans (cumsum/cumprod with dtype=,
kd.cummax/cummin), contractions (einsum with random subscripts, tensordot, outer, inner,
vdot), var/std with ddof, sort/argsort along a short static axis, a user argmax written as
a tuple reducer (first index on ties, NaN first, as numpy), and kd.random (bits equal on
every backend).  Operands are elementwise expressions of the inputs (``exprs.expr``), so
the functions meet every dtype, layout and the values of ``gen_input``.  Oracle:
``oracle_surface``.
"""
from __future__ import annotations

from . import fdtypes as fd
from .exprs import expr, scalars
from .gen_kernel import V, Builder
from .model import ONE, Dim, Node, const

_LETTERS = "abcdefg"


def _node(fn, args, **at) -> Node:
    at["fn"] = fn
    return Node("afn", tuple(a.node for a in args), at)


def _operand(b: Builder, U: tuple, pool: list, kinds=None) -> V:
    """An expression of the inputs with exactly the dims ``U`` (not bfloat16, not weak)."""
    v = expr(b, pool, int(b.rng.integers(0, 3)))
    if v.dims != U or v.weak:
        w = b.binary("add", v, pool[0])
        v = w if w is not None and w.dims == U else pool[0]
    if v.dtype == "bfloat16":
        v = b.cast(v, "float32")
    if kinds == "float" and not fd.is_float(v.dtype):
        v = b.cast(v, b.choice(["float32", "float64", "float16"]))
    return b.maybe_temp(v)


def _inputs(b: Builder, U: tuple, kinds="any", k=None) -> list:
    k = k or b.choice([1, 2], [3, 2])
    return [b.array_param(U if j == 0 else b.sub_dims(U), b.pick_dtype(kinds)) for j in range(k)] \
        + scalars(b)


def _axis(b: Builder, nd: int) -> int:
    a = int(b.rng.integers(nd))
    return a - nd if b.p(0.3) else a


# ------------------------------------------------------------------ shape functions
def _shape_fn(b: Builder):
    rank = b.choice([1, 2, 3], [3, 4, 1])
    U = b.universe(rank)
    pool = _inputs(b, U)
    x = _operand(b, U, pool)
    fn = b.choice(["concatenate", "stack", "pad", "roll", "flip", "tril", "take", "take_along_axis",
                   "diff", "round", "nan_to_num"], [2, 1.5, 2.5, 1.5, 1, 1, 1.5, 1, 1.5, 1.5, 1])
    if fn in ("tril",) and rank < 2:
        fn = "flip"
    k = _axis(b, rank)
    kk = k % rank
    b.features.add(f"sf_{fn}")
    if fn in ("concatenate", "stack"):
        y = _operand(b, U, pool)
        args = f"[{x.code}, {y.code}]" if b.p(0.5) else f"({x.code}, {y.code})"
        if fn == "stack":
            k = int(b.rng.integers(-rank - 1, rank + 1))
            dims = list(U)
            dims.insert(k % (rank + 1), const(2))
        else:
            dims = list(U)
            dims[kk] = Dim("dbl", base=U[kk])
        code = f"np.{fn}({args}, axis={k})" if b.p(0.8) else f"kd.{fn}({args}, axis={k})"
        return V(_node(fn, [x, y], axis=k), tuple(dims), _join_dtype(x, y), None, code)
    if fn == "pad":
        mode = b.choice(["constant", "edge", "reflect", "wrap"], [3, 1, 1, 1])
        if b.p(0.4):
            pw = tuple((int(b.rng.integers(0, 3)), int(b.rng.integers(0, 3))) for _ in range(rank))
            pcode = repr(pw)
        else:
            p = int(b.rng.integers(0, 3))
            pw, pcode = tuple((p, p) for _ in range(rank)), str(p)
        if mode != "constant":
            for d in U:
                b.require(d, 1)     # numpy cannot extend an empty axis
        at = {"pad_width": pw, "mode": mode}
        extra = ""
        if mode == "constant" and b.p(0.5):
            cv = 1.5 if fd.is_float(x.dtype) else (1 if x.dtype != "bool" else True)
            at["value"] = cv
            extra = f", constant_values={cv!r}"
        dims = tuple(Dim("sub", base=d, value=-(p0 + p1)) if p0 + p1 else d
                     for d, (p0, p1) in zip(U, pw))
        mcode = "" if mode == "constant" and b.p(0.5) else f", mode={mode!r}"
        return V(_node("pad", [x], **at), dims, x.dtype, None, f"np.pad({x.code}, {pcode}{mcode}{extra})")
    if fn == "roll":
        shift = int(b.choice([1, -1, 2, 3, -4, 0]))
        ax = None if b.p(0.25) else k
        code = f"np.roll({x.code}, {shift}" + ("" if ax is None else f", axis={ax}") + ")"
        return V(_node("roll", [x], shift=shift, axis=ax), U, x.dtype, None, code)
    if fn == "flip":
        ax = None if b.p(0.25) else k
        code = f"np.flip({x.code}" + ("" if ax is None else f", {ax}") + ")"
        if rank == 2 and b.p(0.3):
            ax, code = (1, f"np.fliplr({x.code})") if b.p(0.5) else (0, f"np.flipud({x.code})")
        return V(_node("flip", [x], axis=ax), U, x.dtype, None, code)
    if fn == "tril":
        which, kd_ = b.choice(["tril", "triu"]), int(b.choice([0, 1, -1, 2]))
        return V(_node(which, [x], k=kd_), U, x.dtype, None, f"np.{which}({x.code}, {kd_})"
                 if kd_ or b.p(0.5) else f"np.{which}({x.code})")
    if fn in ("take", "take_along_axis"):
        M = b.new_sym()
        idims = (M,) if fn == "take" else tuple(M if j == kk else d for j, d in enumerate(U))
        ip = b.array_param(idims, b.pick_dtype("int"))
        size = V(Node("size", (), {"dim": U[kk]}), (), "int64", "i", b.size_code(U[kk]))
        idx = b.binary("mod", ip, size)
        b.features.add("gather")
        dims = (U[:kk] + idims + U[kk + 1:]) if fn == "take" else idims
        code = f"np.{fn}({x.code}, {b.par(idx)}, axis={k})" if b.p(0.7) else \
            f"kd.{fn}({x.code}, {b.par(idx)}, axis={k})"
        return V(_node(fn, [x, idx], axis=k), dims, x.dtype, None, code)
    if fn == "diff":
        nn = int(b.choice([1, 1, 2]))
        b.require(U[kk], nn)
        dims = tuple(Dim("sub", base=d, value=nn) if j == kk else d for j, d in enumerate(U))
        code = f"np.diff({x.code}" + ("" if nn == 1 else f", n={nn}") + f", axis={k})"
        return V(_node("diff", [x], n=nn, axis=k), dims, x.dtype, None, code)
    if fn == "round":
        d = int(b.choice([0, 0, 1, 2, -1])) if fd.is_float(x.dtype) else int(b.choice([0, -1, -2]))
        if x.dtype == "bool":
            x = b.cast(x, "int16")
        code = b.choice([f"np.round({x.code}, {d})", f"np.around({x.code}, {d})",
                         f"{b.par(x)}.round({d})"]) if d else f"np.round({x.code})"
        return V(_node("round", [x], decimals=d), U, x.dtype, None, code)
    at, extra = {}, ""
    if b.p(0.5):
        at = {"nan": -1.0, "posinf": 100.0} if b.p(0.5) else {"neginf": -7.5}
        extra = "".join(f", {k_}={v!r}" for k_, v in at.items())
    return V(_node("nan_to_num", [x], **at), U, x.dtype, None, f"np.nan_to_num({x.code}{extra})")


def _join_dtype(x: V, y: V) -> str:
    import numpy as np
    return np.result_type(fd.np_dtype(x.dtype), fd.np_dtype(y.dtype)).name


# ------------------------------------------------------------------ scans
def _scan_fn(b: Builder):
    rank = b.choice([1, 2, 3], [3, 4, 1])
    U = b.universe(rank)
    pool = _inputs(b, U)
    x = _operand(b, U, pool)
    fn = b.choice(["cumsum", "cumprod", "cummax", "cummin"], [4, 2, 2, 1])
    k = _axis(b, rank)
    ax = None if b.p(0.2) and fn in ("cumsum", "cumprod") else k
    dtype = None
    if fn in ("cumsum", "cumprod") and b.p(0.2):
        dtype = b.choice(["float64", "int64", "float32"])
    b.features.add(f"sf_{fn}")
    axs = "" if ax is None else f", axis={ax}"
    dts = "" if dtype is None else f", dtype={fd.code(dtype)}"
    if fn in ("cummax", "cummin"):
        code = f"kd.{fn}({x.code}{axs})"
    else:
        code = b.choice([f"np.{fn}({x.code}{axs}{dts})", f"{b.par(x)}.{fn}({(axs + dts)[2:]})",
                         f"kd.{fn}({x.code}{axs}{dts})"])
    import numpy as np
    if fn in ("cumsum", "cumprod"):
        kw = {} if dtype is None else {"dtype": np.dtype(dtype)}
        R = getattr(np, fn)(np.zeros(1, fd.np_dtype(x.dtype)), **kw).dtype.name
    else:
        R = x.dtype
    # a flattened scan of a multi-dim array has a length no Dim spells: a placeholder (it is
    # the output, whose shape the oracle's value gives)
    dims = U if ax is not None else ((U[0],) if rank == 1 else (Dim("const", value=-1),))
    return V(_node(fn, [x], axis=ax, dtype=dtype), dims, R, None, code)


# ------------------------------------------------------------------ contractions
def _contract(b: Builder):
    form = b.choice(["einsum2", "einsum1", "tensordot", "outer", "inner", "vdot"], [5, 2, 2, 1, 1, 1])
    b.features.add(f"sf_{form}")
    dt_ = b.pick_dtype(b.choice(["float", "num"], [3, 1]))
    dt2 = dt_ if b.p(0.7) else b.pick_dtype("num")
    if form == "einsum1":
        n = b.choice([1, 2, 3], [1, 3, 1])
        syms = {c: b.new_sym() for c in _LETTERS[:n]}
        s = "".join(_LETTERS[:n])
        if n >= 2 and b.p(0.3):
            s = s[0] + s[0] + s[2:]            # a diagonal (the same size twice)
        x = b.array_param(tuple(syms[c] for c in s), dt_)
        out = "".join(c for c in b.rng.permutation(sorted(set(s))) if b.p(0.6))
        sub = f"{s}->{out}"
        return _einsum_v(b, sub, [x], syms)
    if form in ("einsum2", "tensordot"):
        la = b.choice([1, 2, 3], [2, 4, 2])
        lb = b.choice([1, 2, 3], [2, 4, 2])
        sa = "".join(_LETTERS[:la])
        shared = int(b.rng.integers(0, min(la, lb) + 1)) if form == "einsum2" else \
            int(b.rng.integers(0, min(la, lb) + 1))
        if form == "tensordot":
            sb = sa[la - shared:] + _LETTERS[la:la + lb - shared]
        else:
            own = list(_LETTERS[la:la + lb - shared])
            sb_l = list(b.rng.permutation(list(sa))[:shared]) + own
            sb = "".join(b.rng.permutation(sb_l)) if sb_l else ""
        syms = {c: b.new_sym() for c in sorted(set(sa + sb))}
        A = b.array_param(tuple(syms[c] for c in sa), dt_)
        B = b.array_param(tuple(syms[c] for c in sb), dt2)
        if form == "tensordot":
            out = sa[:la - shared] + sb[shared:]
            sub = f"{sa},{sb}->{out}"
            code = f"np.tensordot({A.code}, {B.code}, axes={shared})" if b.p(0.6) else \
                f"kd.tensordot({A.code}, {B.code}, {shared})"
            return _einsum_v(b, sub, [A, B], syms, code)
        once = [c for c in sorted(set(sa + sb)) if (sa + sb).count(c) == 1]
        if b.p(0.3):
            sub = f"{sa},{sb}"                  # implicit output: letters used once, sorted
            full = f"{sub}->{''.join(once)}"
            return _einsum_v(b, full, [A, B], syms, f"np.einsum({sub!r}, {A.code}, {B.code})")
        pool = sorted(set(sa + sb))
        out = "".join(c for c in b.rng.permutation(pool) if c in once or b.p(0.3))
        return _einsum_v(b, f"{sa},{sb}->{out}", [A, B], syms)
    if form == "outer":
        N, M = b.new_sym(), b.new_sym()
        A, B = b.array_param((N,), dt_), b.array_param((M,), dt2)
        return _einsum_v(b, "a,b->ab", [A, B], {"a": N, "b": M}, f"np.outer({A.code}, {B.code})")
    K = b.new_sym()
    if form == "vdot":
        A, B = b.array_param((K,), dt_), b.array_param((K,), dt2)
        return _einsum_v(b, "a,a->", [A, B], {"a": K}, f"np.vdot({A.code}, {B.code})")
    N = b.new_sym()
    A, B = b.array_param((N, K), dt_), b.array_param((K,), dt2)
    return _einsum_v(b, "ab,b->a", [A, B], {"a": N, "b": K}, f"np.inner({A.code}, {B.code})")


def _einsum_v(b, sub, ops, syms, code=None):
    import numpy as np
    out = sub.split("->")[1]
    proxies = [np.zeros([1] * o.ndim, fd.np_dtype(o.dtype)) for o in ops]
    R = np.einsum(sub, *proxies).dtype.name
    if code is None:
        code = f"{b.choice(['np', 'kd'])}.einsum({sub!r}, {', '.join(o.code for o in ops)})"
    return V(_node("einsum", ops, subscripts=sub), tuple(syms[c] for c in out), R, None, code)


# ------------------------------------------------------------------ var / std
def _stat(b: Builder):
    rank = b.choice([1, 2, 3], [3, 4, 1])
    U = b.universe(rank)
    pool = _inputs(b, U, "num")
    x = _operand(b, U, pool)
    if x.dtype == "bool":
        x = b.cast(x, "float32")
    fn = b.choice(["var", "std"])
    r = b.rng.random()
    axis = None if r < 0.3 else (_axis(b, rank) if r < 0.8 else tuple(sorted(set(
        int(a) for a in b.rng.integers(0, rank, 2)))))
    ddof = int(b.choice([0, 0, 1, 2]))
    keep = b.p(0.3)
    b.features.add(f"sf_{fn}")
    args = f"axis={axis!r}" + (f", ddof={ddof}" if ddof else "") + (", keepdims=True" if keep else "")
    code = b.choice([f"np.{fn}({x.code}, {args})", f"{b.par(x)}.{fn}({args})", f"kd.{fn}({x.code}, {args})"])
    import numpy as np
    R = getattr(np, fn)(np.zeros(2, fd.np_dtype(x.dtype))).dtype.name
    ax = tuple(range(rank)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    ax = {a % rank for a in ax}
    dims = tuple(ONE if j in ax else d for j, d in enumerate(U) if keep or j not in ax)
    return V(_node(fn, [x], axis=axis, ddof=ddof, keepdims=keep), dims, R, None, code)


# ------------------------------------------------------------------ sort / argsort
def _sort_fn(b: Builder):
    C = const(int(b.choice([1, 2, 3, 4, 5, 8])))
    N = b.new_sym()
    U = (N, C) if b.p(0.7) else (C,)
    pool = _inputs(b, U, "num", k=1)
    x = _operand(b, U, pool)
    if x.dtype == "bool":
        x = b.cast(x, "int8")
    fn = b.choice(["sort", "argsort"])
    b.specialize = True        # the sorted axis must have a static length (a sorting network)
    k = -1 if b.p(0.5) else len(U) - 1
    b.features.add(f"sf_{fn}")
    kind = ", kind='stable'" if fn == "argsort" and b.p(0.5) else ""
    code = f"np.{fn}({x.code}, axis={k}{kind})" if b.p(0.7) else f"kd.{fn}({x.code}, {k})"
    return V(_node(fn, [x], axis=k, stable=bool(kind)), U, x.dtype if fn == "sort" else "int64",
             None, code)


# ------------------------------------------------------------------ tuple reducer: argmax
_ARGMAX = """\
def _amax_combine(x, y):
    xv, xi = x
    yv, yi = y
    xn, yn = xv != xv, yv != yv
    take = (yv > xv) | ((yv == xv) & (yi < xi)) | (yn & ~xn) | (yn & xn & (yi < xi))
    return kd.where(take, yv, xv), kd.where(take, yi, xi)"""


def _targmax(b: Builder):
    N, K = b.new_sym(), b.new_sym(1)
    dt_ = b.pick_dtype(b.choice(["float", "num"]))
    A = b.array_param((N, K), dt_)
    rid = f"red{len(b.reducers)}"
    lo = "float('-inf')" if fd.is_float(dt_) else str(int(__import__("numpy").iinfo(dt_).min))
    b.reducers[rid] = _Raw(f"{_ARGMAX}\n\n\n{rid} = kd.reducer(_amax_combine, identity=({lo}, "
                           f"2 ** 62), name='argmax_pair')")
    b.features.add("sf_tuple_argmax")
    b.lines.append(f"k = kd.reduce_axis({b.size_code(K)}, name='k')")
    v, i = f"v{b.ntemp}", f"i{b.ntemp}"
    b.ntemp += 1
    b.lines.append(f"{v}, {i} = kd.compute(({b.size_code(N)},), lambda i: {rid}(({A.code}[i, k], k), "
                   "axis=k))")
    outs = [V(_node("targmax", [A], axis=1, member=0), (N,), dt_, None, v),
            V(_node("targmax", [A], axis=1, member=1), (N,), "int64", None, i)]
    return outs if b.p(0.5) else [b.choice(outs)]


class _Raw:
    """A module-level text block (the tuple reducer and its combine function)."""

    def __init__(self, text):
        self.text = text

    def source(self):
        return self.text


# ------------------------------------------------------------------ kd.random
def _random(b: Builder):
    N = b.new_sym()
    kind = b.choice(["randint", "uniform", "normal"], [2, 2, 1])
    d = b.choice(["float32", "float64", "float16"], [3, 2, 1]) if kind != "randint" else None
    if b.p(0.5):
        offs = b.array_param((N,), b.choice(["int64", "int32", "uint8", "int16"]))
        ocode = offs.code
    else:
        offs = V(Node("arange", (), {"dim": N}), (N,), "int64", None, f"kd.arange({b.size_code(N)})")
        b.array_param((N,), "float32")          # (a parameter to give N a size)
        ocode = offs.code
    at = {"kind": kind, "dtype": d}
    args = [offs]
    if b.p(0.5):
        seed = int(b.choice([0, 1, 12345, 2 ** 40 + 7, 2 ** 63 - 1]))
        at["seed"] = seed
        scode = str(seed)
    else:
        s = b.scalar_param("int")
        args.append(s)
        scode = s.code
    b.features.add(f"sf_random_{kind}")
    dcode = "" if d is None or (d == "float32" and b.p(0.5)) else f", dtype={fd.code(d)}"
    code = f"kd.random.{kind}({scode}, {ocode}{dcode})"
    return [V(Node("afn", tuple(a.node for a in args), {"fn": "random", **at}), (N,),
              "uint32" if kind == "randint" else d, None, code)]


FORMS = {"shape": (_shape_fn, 5), "scan": (_scan_fn, 2.5), "contract": (_contract, 3),
         "stat": (_stat, 1.5), "sort": (_sort_fn, 1.5), "targmax": (_targmax, 1),
         "random": (_random, 1)}


def fam_surface(b: Builder):
    """One issue-25 array function of random operands (see the module docstring)."""
    names = list(FORMS)
    form = b.choice(names, [FORMS[k][1] for k in names])
    out = FORMS[form][0](b)
    return out if isinstance(out, list) else [out]
