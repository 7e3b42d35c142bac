"""numpy's ufuncs inside kernels: ``np.<name>(x)`` and ``kd.<name>(x)``.

``SUPPORTED`` maps each numpy ufunc (by its canonical ``__name__``: ``np.abs`` is
``absolute``) to a builder of traced arrays; ``REFUSED`` gives the reason for every other
ufunc numpy has.  Result dtypes come from numpy's own type resolution
(``ops.result_dtype`` calls the ufunc on one-element arrays), so ``np.tan(int8)`` is float16
and ``np.left_shift(True, True)`` is int8, as in numpy.

Functions are composed from existing IR ops where that is exact (square, sign, fmax,
logaddexp, heaviside, isinf, signbit, nextafter through the bits, integer fmod...); the
others are IR math functions that every backend implements (``nodes.LIBM_UNOPS``, ``ATAN2``,
``HYPOT``, ``FMOD``, ``COPYSIGN``, ``SHL``/``SHR``).  Shifts follow numpy exactly: a shift by
a negative amount or by at least the width gives 0 (``<<``), or the sign fill (``>>``).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, KernelError
from ..ir import make as mk
from ..ir import nodes as n
from .array import Array  # noqa: I001  (array first: it completes ops' import cycle)
from . import ops

B, U, C = n.BinOp, n.UnOp, n.CmpOp


# ------------------------------------------------------------------ helpers
def _c(v, d):
    return n.const(v, d)


def _sel(c, t, f):
    return mk.select(c, t, f)


def _cmp(op, a, b):
    return mk.compare(op, a, b)


def _and(a, b):
    return mk.binary(B.AND, a, b)


def _isnan(e):
    return mk.unary(U.ISNAN, e)


def _resolve(name: str, arrays) -> dt.DType:
    return ops.result_dtype(getattr(np, name), arrays, f"np.{name}")


def _map(name: str, arrays, build, d: dt.DType) -> Array:
    """An elementwise result of ``build`` on the operands cast to ``d``."""
    return ops.elementwise(name, arrays, lambda *es: build(*[ops.cast_to(e, d) for e in es]), d)


def _unary_math(name: str, op: U):
    """A float math function (ints give float64/float16 by numpy's rules)."""
    def f(x):
        d = _resolve(name, [x])
        if not d.is_float:       # np.trunc/np.rint of ints keep the type: nothing to round
            return _map(name, [x], lambda e: e, d)
        return _map(name, [x], lambda e: mk.unary(op, e), d)
    return f


def _binary_math(name: str, op: B):
    def f(x, y):
        d = _resolve(name, [x, y])
        return _map(name, [x, y], lambda a, b: mk.binary(op, a, b), d)
    return f


def _require_int(name: str, d: dt.DType, arrays):
    if d.is_float:    # bfloat16 promotes without numpy's type check: refuse like numpy
        kinds = ", ".join(a.dtype.name for a in arrays)
        raise DTypeError(f"np.{name} is not supported for operands of type {kinds}",
                         hint="bitwise functions and shifts take integer or bool arrays; "
                              "use x.view(kd.int32) to work on a float's bits")


# ------------------------------------------------------------------ composed functions
def square(x):
    d = _resolve("square", [x])
    return _map("square", [x], lambda e: mk.binary(B.AND if d.is_bool else B.MUL, e, e), d)


def reciprocal(x):
    d = _resolve("reciprocal", [x])
    if d.is_float:
        return _map("reciprocal", [x], lambda e: mk.binary(B.DIV, _c(1.0, d), e), d)
    # numpy computes 1.0 / x in double and converts (1 / 0 -> inf -> the int conversion of inf)
    f64 = dt.float64
    return ops.elementwise("reciprocal", [x], lambda e: ops.cast_to(
        mk.binary(B.DIV, _c(1.0, f64), ops.cast_to(e, f64)), d), d)


def sign(x):
    d = _resolve("sign", [x])

    def build(e):
        one, mone, zero = _c(1, d), _c(-1, d) if d.is_signed or d.is_float else None, _c(0, d)
        if not (d.is_signed or d.is_float):
            return _sel(_cmp(C.GT, e, zero), one, zero)
        inner = _sel(_cmp(C.EQ, e, zero), zero, e) if d.is_float else zero   # NaN stays NaN
        return _sel(_cmp(C.GT, e, zero), one, _sel(_cmp(C.LT, e, zero), mone, inner))
    return _map("sign", [x], build, d)


def conjugate(x):
    d = _resolve("conjugate", [x])
    return _map("conjugate", [x], lambda e: e, d)


def fabs(x):
    d = _resolve("fabs", [x])
    return _map("fabs", [x], lambda e: mk.unary(U.ABS, e), d)


def _scale(name, k):
    def f(x):
        d = _resolve(name, [x])
        return _map(name, [x], lambda e: mk.binary(B.MUL, e, _c(k, d)), d)
    return f


def _inf_test(name, op, ints):
    """``isinf``/``isfinite``: ``|x| op inf`` for floats, the constant ``ints`` for other dtypes."""
    def f(x):
        x = ops.asarray(x)
        if not x.dtype.is_float:
            return ops.elementwise(name, [x], lambda e: _c(ints, dt.bool_), dt.bool_)
        return ops.elementwise(name, [x], lambda e: _cmp(op, mk.unary(U.ABS, e),
                                                         _c(math.inf, e.dtype)), dt.bool_)
    f.__name__ = name
    return f


isinf = _inf_test("isinf", C.EQ, False)
isfinite = _inf_test("isfinite", C.LT, True)


def signbit(x):
    x = ops.asarray(x)
    d = _resolve("signbit", [x])          # bool; ints compare in float like numpy
    src = x.dtype if x.dtype.is_float else dt.float64 if x.dtype.is_int else dt.float16
    return ops.elementwise("signbit", [x], lambda e: _cmp(C.LT, mk.binary(
        B.COPYSIGN, _c(1.0, src), ops.cast_to(e, src)), _c(0.0, src)), d)


def _fmaxmin(name, op):
    def f(x, y):
        d = _resolve(name, [x, y])
        if not d.is_float:
            return ops.binary("maximum" if op is B.MAX else "minimum", x, y, strong=True)
        # a NaN operand is ignored (the other wins); two NaNs give NaN
        return _map(name, [x, y], lambda a, b: _sel(_isnan(b), a, _sel(_isnan(a), b,
                                                                    mk.binary(op, a, b))), d)
    return f


def fmod(x, y):
    d = _resolve("fmod", [x, y])
    if d.is_float:
        return _map("fmod", [x, y], lambda a, b: mk.binary(B.FMOD, a, b), d)
    if not d.is_signed:
        return _map("fmod", [x, y], lambda a, b: mk.binary(B.MOD, a, b), d)

    def build(a, b):       # C's truncated remainder from the floored one (0 for b == 0, MIN % -1)
        r = mk.binary(B.MOD, a, b)
        zero = _c(0, d)
        fix = _and(_cmp(C.NE, r, zero), mk.binary(B.XOR, _cmp(C.LT, a, zero), _cmp(C.LT, r, zero)))
        return _sel(fix, mk.binary(B.SUB, r, b), r)
    return _map("fmod", [x, y], build, d)


def _logaddexp(name, base2: bool):
    def f(x, y):
        d = _resolve(name, [x, y])
        c = d.compute          # 16-bit floats compute in float32 and round once, as numpy does

        def build(a, b):
            a, b = ops.cast_to(a, c), ops.cast_to(b, c)
            # numpy's npy_logaddexp: equal operands (infinities too) give a + log(2)
            if base2:
                same = mk.binary(B.ADD, a, _c(1.0, c))
                log1p_ = lambda v: mk.binary(B.MUL, mk.unary(U.LOG1P, v), _c(1 / math.log(2), c))  # noqa: E731
                expf = lambda v: mk.unary(U.EXP2, v)  # noqa: E731
            else:
                same = mk.binary(B.ADD, a, _c(math.log(2), c))
                log1p_ = lambda v: mk.unary(U.LOG1P, v)  # noqa: E731
                expf = lambda v: mk.unary(U.EXP, v)  # noqa: E731
            t = mk.binary(B.SUB, a, b)
            pos = mk.binary(B.ADD, a, log1p_(expf(mk.unary(U.NEG, t))))
            neg = mk.binary(B.ADD, b, log1p_(expf(t)))
            zero = _c(0.0, c)
            r = _sel(_cmp(C.EQ, a, b), same, _sel(_cmp(C.GT, t, zero), pos,
                                                  _sel(_cmp(C.LE, t, zero), neg, t)))
            return ops.cast_to(r, d)
        return _map(name, [x, y], build, d)
    return f


def heaviside(x, h0):
    d = _resolve("heaviside", [x, h0])

    def build(a, h):
        zero = _c(0, d)
        return _sel(_cmp(C.LT, a, zero), zero, _sel(_cmp(C.GT, a, zero), _c(1, d),
                                                    _sel(_cmp(C.EQ, a, zero), h, a)))
    return _map("heaviside", [x, h0], build, d)


def _int_view(d: dt.DType) -> dt.DType:
    return {16: dt.int16, 32: dt.int32, 64: dt.int64}[d.bits]


def _bits(e):
    return n.Unary(_int_view(e.dtype), U.BITCAST, e)


def _nextafter_expr(a, b):
    d = a.dtype
    i = _int_view(d)
    one = _c(1, i)
    bits = _bits(a)
    up = mk.binary(B.XOR, _cmp(C.LT, a, b), _cmp(C.LT, a, _c(0.0, d)))   # |a| grows: bits + 1
    step = _sel(up, mk.binary(B.ADD, bits, one), mk.binary(B.SUB, bits, one))
    moved = n.Unary(d, U.BITCAST, step)
    tiny = n.Unary(d, U.BITCAST, one)                 # the smallest subnormal
    at_zero = mk.binary(B.COPYSIGN, tiny, b)
    res = _sel(_cmp(C.EQ, a, _c(0.0, d)), at_zero, moved)
    res = _sel(_cmp(C.EQ, a, b), b, res)
    return _sel(mk.binary(B.OR, _isnan(a), _isnan(b)), mk.binary(B.ADD, a, b), res)


def _no_bf16(name, d):
    if d is dt.bfloat16:
        raise DTypeError(f"np.{name} is not supported for bfloat16",
                         hint="compute in float32 (x.astype(kd.float32)) and convert back")


def nextafter(x, y):
    d = _resolve("nextafter", [x, y])
    _no_bf16("nextafter", d)
    return _map("nextafter", [x, y], _nextafter_expr, d)


def spacing(x):
    d = _resolve("spacing", [x])
    _no_bf16("spacing", d)

    def build(e):
        to = _sel(_cmp(C.LT, e, _c(0.0, d)), _c(-math.inf, d), _c(math.inf, d))
        if d is dt.float16:       # numpy's npy_half_spacing steps toward +inf, whatever the sign
            gap = mk.binary(B.SUB, _nextafter_expr(e, _c(math.inf, d)), e)
            inf = _cmp(C.EQ, mk.unary(U.ABS, e), _c(math.inf, d))
            return _sel(inf, _c(math.nan, d), gap)
        return mk.binary(B.SUB, _nextafter_expr(e, to), e)
    return _map("spacing", [x], build, d)


def float_power(x, y):
    d = _resolve("float_power", [x, y])
    return _map("float_power", [x, y], lambda a, b: mk.binary(B.POW, a, b), d)


def _shift(name: str, left: bool):
    def f(x, y):
        x, y = ops.asarray(x), ops.asarray(y)
        d = _resolve(name, [x, y])
        _require_int(name, d, [x, y])

        def build(a, s):
            if isinstance(s, n.Const) and 0 <= s.value < d.bits:    # x >> 2: no guard needed
                return mk.binary(B.SHL if left else B.SHR, a, s)
            zero, bits = _c(0, d), _c(d.bits, d)
            ok = _cmp(C.LT, s, bits)
            if d.is_signed:
                ok = _and(_cmp(C.GE, s, zero), ok)
            amount = _sel(ok, s, _c(d.bits - 1, d))         # always in [0, bits) for the IR op
            if left:
                return _sel(ok, mk.binary(B.SHL, a, amount), zero)
            if d.is_signed:      # arithmetic: by bits - 1 is the sign fill numpy gives
                return mk.binary(B.SHR, a, amount)
            return _sel(ok, mk.binary(B.SHR, a, amount), zero)
        return _map(name, [x, y], build, d)
    return f


left_shift = _shift("left_shift", True)
right_shift = _shift("right_shift", False)


def _bitwise(name):
    def f(x, y):
        x, y = ops.asarray(x), ops.asarray(y)
        d = _resolve(name, [x, y])
        _require_int(name, d, [x, y])
        return ops.binary(name, x, y, strong=True)
    return f


def invert(x):
    x = ops.asarray(x)
    _require_int("invert", x.dtype, [x])
    return ops.unary("invert", x, strong=True)


def bitwise_count(x):
    x = ops.asarray(x)
    d = _resolve("bitwise_count", [x])      # uint8
    src = x.dtype

    def build(e):
        if src.is_bool:
            return ops.cast_to(e, d)
        u = {8: dt.uint8, 16: dt.uint16, 32: dt.uint32, 64: dt.uint64}[src.bits]
        if src.is_signed:                         # numpy counts the bits of |x|
            e = mk.unary(U.ABS, e)
        v = ops.cast_to(e, u) if e.dtype is not u else e
        w = u.bits
        m1, m2, m4 = (int(("01" * 32)[:w], 2), int(("0011" * 16)[:w], 2), int(("00001111" * 8)[:w], 2))
        v = mk.binary(B.SUB, v, _and(mk.binary(B.SHR, v, _c(1, u)), _c(m1, u)))
        v = mk.binary(B.ADD, _and(v, _c(m2, u)), _and(mk.binary(B.SHR, v, _c(2, u)), _c(m2, u)))
        v = _and(mk.binary(B.ADD, v, mk.binary(B.SHR, v, _c(4, u))), _c(m4, u))
        for k in (8, 16, 32):
            if k < w:
                v = mk.binary(B.ADD, v, mk.binary(B.SHR, v, _c(k, u)))
        return ops.cast_to(_and(v, _c(0xFF, u)), d)
    return ops.elementwise("bitwise_count", [x], build, d)


def divmod_(x, y):
    return (ops.binary("floor_divide", x, y, strong=True), ops.binary("remainder", x, y, strong=True))


def modf(x):
    d = _resolve("sqrt", [x])      # (np.modf returns two arrays: its float type is sqrt's)
    whole = _map("modf", [x], lambda e: mk.unary(U.TRUNC, e), d)

    def frac(e):
        inf = _cmp(C.EQ, mk.unary(U.ABS, e), _c(math.inf, d))
        return _sel(inf, mk.binary(B.COPYSIGN, _c(0.0, d), e),
                    mk.binary(B.SUB, e, mk.unary(U.TRUNC, e)))
    return _map("modf", [x], frac, d), whole


def vecdot(x, y):
    from . import reduce
    return reduce.reduce_np("sum", ops.binary("multiply", x, y, strong=True), -1, False, None)


def matvec(a, v):
    from . import linalg
    return linalg.matmul(a, ops.asarray(v)[..., None])[..., 0]


def vecmat(v, a):
    from . import linalg
    return linalg.matmul(ops.asarray(v)[..., None, :], a)[..., 0, :]


_FLOAT_BITS = {dt.float16: (10, 15), dt.float32: (23, 127), dt.float64: (52, 1023)}  # (M, bias)


def _frexp_parts(x):
    """(mantissa in [0.5, 1) with x's sign, exponent as int64) of a float expression; x itself
    and 0 for zeros, infinities and NaN (numpy's frexp)."""
    d = x.dtype
    m_bits, bias = _FLOAT_BITS[d]
    i = _int_view(d)
    tiny = _cmp(C.LT, mk.unary(U.ABS, x), _c(2.0 ** (1 - bias), d))
    k = m_bits + 2                       # subnormals: scaled into the normal range first
    xs = _sel(tiny, mk.binary(B.MUL, x, _c(2.0 ** k, d)), x)
    bits = _bits(xs)
    raw = mk.binary(B.AND, mk.binary(B.SHR, bits, _c(m_bits, i)), _c((2 * bias + 1), i))
    e = mk.binary(B.SUB, ops.cast_to(raw, dt.int64), _c(bias - 1, dt.int64))
    e = _sel(tiny, mk.binary(B.SUB, e, _c(k, dt.int64)), e)
    exp_mask = (2 * bias + 1) << m_bits
    mbits = mk.binary(B.OR, mk.binary(B.AND, bits, _c(~exp_mask, i)), _c((bias - 1) << m_bits, i))
    mant = n.Unary(d, U.BITCAST, mbits)
    special = mk.binary(B.OR, _cmp(C.EQ, x, _c(0.0, d)),
                        mk.unary(U.NOT, _cmp(C.LT, mk.unary(U.ABS, x), _c(math.inf, d))))
    return _sel(special, x, mant), _sel(special, _c(0, dt.int64), e)


def frexp(x):
    d = _resolve("sqrt", [x])          # (two outputs: the float type is sqrt's)
    _no_bf16("frexp", d)
    return (_map("frexp", [x], lambda e: _frexp_parts(e)[0], d),
            ops.elementwise("frexp", [x], lambda e: ops.cast_to(
                _frexp_parts(ops.cast_to(e, d))[1], dt.int32), dt.int32))


def ldexp(x, i):
    d = _resolve("ldexp", [x, i])
    _no_bf16("ldexp", d)
    m_bits, bias = _FLOAT_BITS[d]
    iv = _int_view(d)

    def build(a, k):
        a = ops.cast_to(a, d)
        k = ops.cast_to(k, dt.int64)
        lim = _c(4 * bias + 4 * m_bits, dt.int64)         # beyond: over/underflow all the same
        k = mk.binary(B.MAX, mk.binary(B.MIN, k, lim), mk.unary(U.NEG, lim))
        m, e = _frexp_parts(a)
        big = mk.binary(B.ADD, e, k)                       # result = m * 2**big, m in [0.5, 1)

        def with_exponent(E):                              # m * 2**E, E - 1 a normal exponent
            field = ops.cast_to(mk.binary(B.ADD, E, _c(bias - 1, dt.int64)), iv)
            keep = mk.binary(B.AND, _bits(m), _c(~((2 * bias + 1) << m_bits), iv))
            return n.Unary(d, U.BITCAST, mk.binary(B.OR, keep, mk.binary(
                B.SHL, mk.binary(B.AND, field, _c(2 * bias + 1, iv)), _c(m_bits, iv))))
        emin = 1 - bias
        normal = with_exponent(big)
        # below the normal range: m * 2**(E + bias - 1) is normal and exact; one multiplication
        # by 2**emin then rounds once into the subnormals (E clamped where all round to 0)
        low = mk.binary(B.MAX, big, _c(emin - m_bits - 2, dt.int64))
        sub = mk.binary(B.MUL, with_exponent(mk.binary(B.ADD, low, _c(bias - 1, dt.int64))),
                        _c(2.0 ** emin, d))
        over = mk.binary(B.COPYSIGN, _c(math.inf, d), a)
        r = _sel(_cmp(C.GT, big, _c(bias + 1, dt.int64)), over,
                 _sel(_cmp(C.GT, big, _c(emin, dt.int64)), normal, sub))
        special = mk.binary(B.OR, _cmp(C.EQ, a, _c(0.0, d)),
                            mk.unary(U.NOT, _cmp(C.LT, mk.unary(U.ABS, a), _c(math.inf, d))))
        return _sel(special, a, r)
    return ops.elementwise("ldexp", [x, i], build, d)


def _gcd_module():
    from . import ufunc_gcd        # (imported late: it builds on kd.scan)
    return ufunc_gcd


def _existing_binary(name):
    return lambda x, y: ops.binary(name, x, y, strong=True)


def _existing_unary(name):
    return lambda x: ops.unary(name, x, strong=True)


def _positive(x):
    x = ops.asarray(x)
    if x.dtype.is_bool:
        raise DTypeError("np.positive is not supported for bool arrays (numpy raises too)",
                         hint="use the array itself, or .astype(kd.int8)")
    return ops.elementwise("positive", [x], lambda e: e, x.dtype)


# ------------------------------------------------------------------ the tables
#: numpy ufunc name -> builder (operands: traced arrays or scalars); results are strong
SUPPORTED = {
    **{k: _existing_binary(k) for k in (
        "add", "subtract", "multiply", "floor_divide", "remainder", "power", "maximum", "minimum",
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
        "logical_or", "logical_xor")},
    "divide": _existing_binary("divide"),
    **{k: _existing_unary(k) for k in (
        "negative", "absolute", "exp", "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil",
        "isnan", "logical_not")},
    "positive": _positive,
    "bitwise_and": _bitwise("bitwise_and"), "bitwise_or": _bitwise("bitwise_or"),
    "bitwise_xor": _bitwise("bitwise_xor"), "invert": invert,
    "left_shift": left_shift, "right_shift": right_shift, "bitwise_count": bitwise_count,
    "square": square, "reciprocal": reciprocal, "sign": sign, "conjugate": conjugate,
    "fabs": fabs, "deg2rad": _scale("deg2rad", math.pi / 180), "rad2deg": _scale("rad2deg", 180 / math.pi),
    "isinf": isinf, "isfinite": isfinite, "signbit": signbit,
    "fmax": _fmaxmin("fmax", B.MAX), "fmin": _fmaxmin("fmin", B.MIN),
    "fmod": fmod, "logaddexp": _logaddexp("logaddexp", False),
    "logaddexp2": _logaddexp("logaddexp2", True), "heaviside": heaviside,
    "nextafter": nextafter, "spacing": spacing, "float_power": float_power,
    "divmod": divmod_, "modf": modf, "frexp": frexp, "ldexp": ldexp, "vecdot": vecdot, "matvec": matvec, "vecmat": vecmat,
    "arctan2": _binary_math("arctan2", B.ATAN2), "hypot": _binary_math("hypot", B.HYPOT),
    "copysign": _binary_math("copysign", B.COPYSIGN),
    **{name: _unary_math(name, op) for name, op in (
        ("tan", U.TAN), ("sinh", U.SINH), ("cosh", U.COSH), ("arcsin", U.ASIN),
        ("arccos", U.ACOS), ("arctan", U.ATAN), ("arcsinh", U.ASINH), ("arccosh", U.ACOSH),
        ("arctanh", U.ATANH), ("log1p", U.LOG1P), ("expm1", U.EXPM1), ("log2", U.LOG2),
        ("log10", U.LOG10), ("exp2", U.EXP2), ("cbrt", U.CBRT), ("rint", U.RINT),
        ("trunc", U.TRUNC))},
}
SUPPORTED["degrees"] = SUPPORTED["rad2deg"]
SUPPORTED["gcd"] = lambda x, y: _gcd_module().gcd(x, y)
SUPPORTED["lcm"] = lambda x, y: _gcd_module().lcm(x, y)
SUPPORTED["radians"] = SUPPORTED["deg2rad"]

#: numpy ufuncs kdsl refuses, and why (the message a user sees)
REFUSED = {
    "isnat": "datetime64/timedelta64 values are not supported by kdsl",
}
_COMPLEX_NOTE = "complex dtypes are not supported by kdsl"


def _names_of_numpy():
    """Every ufunc numpy exposes: canonical name -> the public names bound to it."""
    out: dict = {}
    # numpy's namespace dict, not getattr over dir(np): that would import the submodules numpy
    # loads lazily (f2py, testing, ...: ~0.3 s of a first call); every ufunc is bound in it
    for k, u in sorted(vars(np).items()):
        if isinstance(u, np.ufunc):
            out.setdefault(u.__name__, []).append(k)
    return out


def coverage() -> list:
    """(canonical name, aliases, status, note) for every ufunc of numpy: the docs' table."""
    rows = []
    for name, aliases in sorted(_names_of_numpy().items()):
        others = sorted(a for a in aliases if a != name)
        if name == "matmul":
            rows.append((name, others, "supported", "the @ operator (kd.matmul)"))
        elif name in SUPPORTED:
            rows.append((name, others, "supported", ""))
        else:
            rows.append((name, others, "refused", REFUSED.get(name, _COMPLEX_NOTE)))
    return rows


def coverage_markdown() -> str:
    """The ufunc table of docs/kernels.md (tests/frontend/test_ufuncs.py keeps it current)."""
    lines = ["| numpy ufunc | also | inside kernels |", "|---|---|---|"]
    for name, aliases, status, note in coverage():
        also = ", ".join(aliases)
        lines.append(f"| `{name}` | {also} | {status}{': ' + note if note else ''} |")
    return "\n".join(lines)


def call(name: str, inputs: tuple) -> Array | tuple:
    """np.<name>(*inputs) on traced operands (KernelError when refused)."""
    fn = SUPPORTED.get(name)
    if fn is None:
        reason = REFUSED.get(name)
        raise KernelError(f"numpy ufunc np.{name} is not supported inside kdsl kernels" +
                          (f": {reason.split(';')[0]}" if reason else ""),
                          hint=(reason.split("; ", 1)[1] + " " if reason and "; " in reason else "")
                          + "(the ufunc table in kdsl's docs/kernels.md lists what works)")
    return fn(*[ops.asarray(x) for x in inputs])


def _public(name: str, fn):
    def f(*args):
        return fn(*[ops.asarray(x) for x in args])
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = (f"numpy's ``np.{name}`` on traced arrays (numpy's dtype rules and special "
                 f"values; a strong result, like numpy 2's ufuncs of Python scalars).")
    return f


#: the ``kd.<name>`` functions: every supported ufunc under each of numpy's names for it
PUBLIC = {}
for _name, _aliases in _names_of_numpy().items():
    if _name in SUPPORTED:
        for _a in set(_aliases) | {_name}:
            PUBLIC[_a] = _public(_a, SUPPORTED[_name])
PUBLIC["degrees"] = _public("degrees", SUPPORTED["degrees"])
PUBLIC["radians"] = _public("radians", SUPPORTED["radians"])


def __getattr__(name: str):
    """``kdsl.frontend.ufuncs.<numpy name>``: what ``kd.<name>`` resolves to."""
    try:
        return PUBLIC[name]
    except KeyError:
        raise AttributeError(name) from None
