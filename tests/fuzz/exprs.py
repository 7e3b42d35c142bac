"""Random elementwise expressions over a pool of values, with the guards numpy needs.

``expr(b, pool, depth)`` builds a tree of binary/unary ops, ``where``, casts
(bfloat16 included), ``clip`` and views; ``finalize`` makes a value a valid
kernel output (depends on an array, not bfloat16).
"""
from __future__ import annotations

from . import fdtypes as fd
from . import gen_surface
from .fdtypes import PromotionError, resolve
from .gen_kernel import V, Builder

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
    kind = b.choice(["bin", "un", "where", "cast", "clip", "view", "uf", "bitview"],
                    [10, 4, 1.2, 1.5, 0.6, 1.2, 4, 0.6])
    if kind == "uf":          # the issue-25 ufuncs (gen_surface)
        a = expr(b, pool, depth - 1)
        if b.p(0.5):
            return b.maybe_temp(gen_surface.unary(b, a))
        c = expr(b, pool, depth - 1) if b.p(0.65) else b.lit("int" if b.p(0.5) else None)
        if b.p(0.3):
            a, c = c, a
        v = gen_surface.binary(b, a, c)
        return b.maybe_temp(v) if v is not None else a
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
    if kind == "bitview":
        v = gen_surface.bitview(b, x)
        return b.maybe_temp(v) if v is not None else x
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
