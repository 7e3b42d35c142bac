"""Generating the issue-25 elementwise surface: the new ufuncs (as ``np.<name>``, ``kd.<name>``
or the ``<<``/``>>`` operators), integer shifts by amounts out of range, ``gcd``/``lcm``, and
``.view`` bitcasts.  Each builds the oracle node (``uf``/``bitview``, evaluated by
``oracle_ufunc``) and the source text together, like ``gen_kernel.Builder``'s own ops."""
from __future__ import annotations

from . import fdtypes as fd
from .fdtypes import PromotionError, resolve
from .gen_kernel import V, Builder, broadcast
from .model import Node
from .oracle_ufunc import BINARY, UNARY

#: unary ufuncs of any numeric input (ints give floats by numpy's rules)
_UN = list(UNARY) + ["isinf", "isfinite", "signbit"]
_UN_W = {"square": 3, "sign": 2, "rint": 2, "trunc": 2, "reciprocal": 1.5, "spacing": 0.5,
         "deg2rad": 0.5, "rad2deg": 0.5}
#: domain guards: an argument for functions with a restricted domain (used half the time;
#: the other half gives numpy's NaN/inf outside it, which kdsl must give too)
_DOMAIN = {"arcsin": "tanh", "arccos": "tanh", "arctanh": "tanh", "arccosh": "cosh",
           "log1p": "abs", "log2": "abs1", "log10": "abs1"}
_BIN = list(BINARY)
_INT_UN = ["bitwise_count", "square", "sign", "fabs"]
_INT_BIN = ["left_shift", "right_shift", "gcd", "lcm", "fmod", "heaviside", "copysign", "fmax"]
_INT_BIN_W = [3, 3, 1, 0.7, 1, 0.5, 0.5, 0.5]
#: the bitcasts kdsl supports (same item size, no bool or bfloat16)
VIEWS = {"float16": ["int16"], "float32": ["int32"], "float64": ["int64"], "int16": ["float16"],
         "int32": ["float32"], "int64": ["float64"], "int8": ["uint8"], "uint8": ["int8"]}


def ufunc(b: Builder, name: str, args: list, style: str | None = None) -> V | None:
    """``np.<name>(*args)`` (or ``kd.<name>``, or an operator for shifts)."""
    dims = broadcast(*[a.dims for a in args])
    if dims is None or all(a.py for a in args):
        return None
    try:
        R = resolve(name, [a.spec for a in args])
    except PromotionError:
        R = None
        b.expect_error = True
        b.features.add("invalid_dtype_op")
    if name in ("nextafter", "spacing", "gcd", "lcm") and R == "bfloat16":
        return None
    style = style or b.choice(["np", "np", "kd"])
    if style == "op" and name in ("left_shift", "right_shift") and not all(a.weak for a in args):
        code, atom = f"{b.par(args[0])} {'<<' if name == 'left_shift' else '>>'} {b.par(args[1])}", False
    else:
        code, atom = f"{'kd' if style == 'kd' else 'np'}.{name}({', '.join(a.code for a in args)})", True
    b.features.add(f"uf_{name}")
    dtype = R or args[0].dtype
    return V(Node("uf", tuple(a.node for a in args), {"name": name}), dims, dtype, None, code, atom)


def _guard(b: Builder, name: str, x: V) -> V:
    g = _DOMAIN.get(name)
    if g is None or b.p(0.5):
        return x
    if g in ("tanh",):
        return b.unary("tanh", x)
    if g == "cosh":
        return b.binary("add", ufunc(b, "cosh", [x]) or x, b.lit("float", 0.25)) or x
    if g == "abs":
        return b.unary("abs", x)
    return b.binary("add", b.unary("abs", x), b.lit("float", 0.5)) or x


def unary(b: Builder, x: V) -> V:
    """A random new unary ufunc of ``x`` (integer ones for integer ``x``)."""
    if x.py:
        return x
    if not fd.is_float(x.dtype) and x.dtype != "bool" and b.p(0.5):
        name = b.choice(_INT_UN)
    elif x.dtype == "bool":
        name = b.choice(["square", "isinf", "signbit", "bitwise_count"])
    else:
        name = b.choice(_UN, [_UN_W.get(k, 1) for k in _UN])
    return ufunc(b, name, [_guard(b, name, x)]) or x


def binary(b: Builder, a: V, c: V) -> V | None:
    """A random new binary ufunc of ``a`` and ``c`` (shifts and gcd/lcm for integers)."""
    ints = not fd.is_float(a.dtype) and not fd.is_float(c.dtype) and "bool" not in (a.dtype, c.dtype)
    if ints and b.p(0.6):
        name = b.choice(_INT_BIN, _INT_BIN_W)
        if name in ("gcd", "lcm") and b.in_body:
            name = "right_shift"     # (gcd is a scan stage: refused inside kd.compute, documented)
        if name in ("left_shift", "right_shift") and c.py and b.p(0.7):
            c = b.lit(value=b.choice([0, 1, 3, 7, 8, 15, 31, 63, 64, -1, -9]))
            b.features.add("shift_out_of_range" if not 0 <= c.pyval < 8 else "shift")
        return ufunc(b, name, [a, c], "op" if name.endswith("shift") and b.p(0.4) else None)
    name = b.choice(_BIN, [2 if k in ("arctan2", "hypot", "copysign", "fmax", "fmin") else 1
                           for k in _BIN])
    if name == "float_power":
        base = b.binary("add", b.unary("abs", a), b.lit("float", 0.5))
        if base is None:
            return None
        return ufunc(b, name, [base, b.lit(value=b.choice([2, 3, 0.5, -1.0, 1.5]))])
    return ufunc(b, name, [a, c])


def bitview(b: Builder, x: V) -> V | None:
    """``x.view(<type of the same size>)``."""
    if x.py or x.weak or x.ndim == 0 or x.dtype not in VIEWS:
        return None
    d = b.choice(VIEWS[x.dtype])
    code = f"{b.par(x)}.view({fd.code(d)})" if b.p(0.7) else f"{b.par(x)}.view({d!r})"
    b.features.add("bitview")
    return V(Node("bitview", (x.node,), {"dtype": d}), x.dims, d, None, code)
