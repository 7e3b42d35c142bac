"""Branch-free float/double math in LLVM IR that the loop vectoriser can widen.

LLVM lowers ``llvm.exp``, ``llvm.log``... to scalar libm calls, so a loop that
uses them is never vectorised.  Each function here is an ``internal``,
``alwaysinline``, ``nounwind`` LLVM function built only from arithmetic, bit
operations, ``select``, loads from constant tables (gathers) and intrinsics
with vector forms (fma, fabs, copysign): once inlined into a loop body nothing
stops the vectoriser.

The methods are the textbook ones, with minimax polynomials fitted for this
module by Remez exchange (mpmath) and rounded to the type:
exp: x = n ln2 + r (Cody-Waite split, exact with fma), 2^n built in the
exponent bits in two factors (denormal results round once);
log: x = 2^k m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), fdlibm's sum order;
tanh: odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above;
erf: odd polynomial below 0.875, 1 - exp(-x^2) G(1 / (1 + x)) above;
sin/cos: exact Payne-Hanek reduction in integers for every |x| (a window of
2/pi bits from a table, picked by the exponent), then polynomials (float:
in double; double: on a double-double remainder).
Special values (inf, NaN, +-0, denormals, overflow, underflow) come out of
selects.  Max error measured against mpmath (tests/cpu/test_cpu_vecmath.py
checks <= 2 ulp against numpy):

| ulp     | exp  | log  | tanh | erf  | sin  | cos  |
|---------|------|------|------|------|------|------|
| float32 | 1.02 | 0.75 | 1.29 | 1.15 | 0.50 | 0.50 |
| float64 | 0.64 | 0.75 | 1.30 | 1.10 | 0.76 | 0.76 |
"""
from __future__ import annotations

import functools
import math
import struct

from llvmlite import ir

from kdsl.errors import InternalCompilerError

from .types import DOUBLE, FLOAT, I32, I64

#: functions this module defines, and the types it defines them for
NAMES = {"exp": (FLOAT, DOUBLE), "log": (FLOAT, DOUBLE), "tanh": (FLOAT, DOUBLE),
         "erf": (FLOAT, DOUBLE), "sin": (FLOAT, DOUBLE), "cos": (FLOAT, DOUBLE)}

_LN2_HI = {FLOAT: 0.693145751953125, DOUBLE: 0.6931471805598903}    # few bits: k*hi is exact
_LN2_LO = {FLOAT: 1.4286068203094173e-06, DOUBLE: 5.497923018708371e-14}
_LOG2E = 1.4426950408889634

# exp(r) = 1 + r + r^2 * P(r) on |r| <= ln2/2
_EXP_P = {
    FLOAT: (0.5000000026934363, 0.16666577005951352, 0.04166637524904468,
            0.008363175255474937, 0.0013941113663705255),
    DOUBLE: (0.5, 0.1666666666666667, 0.041666666666666685, 0.008333333333326141,
             0.0013888888888874409, 0.00019841269874801978, 2.480158734731361e-05,
             2.755725542410109e-06, 2.7557252937530176e-07, 2.5105206981303335e-08,
             2.0921580875318927e-09),
}
# exp's argument range: below LO the result is 0, above HI it is inf
_EXP_LO = {FLOAT: -104.0, DOUBLE: -746.0}
_EXP_HI = {FLOAT: 89.0, DOUBLE: 710.0}

# log(1+f) = 2 atanh(s), s = f/(2+f); R(z) = z * Q(z), z = s^2 <= 0.0295
_LOG_Q = {
    FLOAT: (0.666666665530665, 0.4000012271616356, 0.2855074135533974, 0.23332267760824968),
    DOUBLE: (0.666666666666667, 0.39999999999898506, 0.28571428626371254,
             0.22222211077399734, 0.18182892887123378, 0.15331607967937536,
             0.1461773676993849),
}

# tanh(x) = x + x z P(z), z = x^2, for |x| < 0.625
_TANH_SMALL = 0.625
_TANH_P = {
    FLOAT: (-0.33333329249593635, 0.13332794549907145, -0.053854070062820884,
            0.021010082561634735, -0.006113192922671494),
    DOUBLE: (-0.33333333333333326, 0.1333333333332704, -0.05396825396171756,
             0.021869488271084175, -0.008863230005701132, 0.003592060644925378,
             -0.001455318984382067, 0.0005874721211713998, -0.00023085187613826598,
             7.969067611042267e-05, -1.729148455510484e-05),
}

# erf(x) = x + x Q(x^2) for |x| < 0.875; above, erfc(x) = exp(-x^2) G(1 / (1 + x)) (G in
# 1/(1+x) - _ERF_MID for double: smaller coefficients, less rounding in Horner's rule)
_ERF_SMALL = 0.875
_ERF_MAX = {FLOAT: 4.0, DOUBLE: 6.0}     # erfc(MAX) is below half an ulp of 1
_ERF_MID = {FLOAT: 0.0, DOUBLE: 0.3380952380952381}
_ERF_Q = {
    FLOAT: (0.12837915853971885, -0.37612557152270787, 0.11282524182232016,
            -0.0267939549076596, 0.0050358722291590895, -0.0006222423042913556),
    DOUBLE: (0.12837916709551256, -0.37612638903183054, 0.11283791670918554,
             -0.026866170637635214, 0.005223977546586759, -0.0008548322178260221,
             0.00012055147009197344, -1.492105043586671e-05, 1.6388573152634069e-06,
             -1.5626596245767853e-07, 1.0475893034954343e-08),
}
_ERF_G = {
    FLOAT: (-0.00015419605956146313, 0.5678081196189617, 0.5291180411218872,
            0.45814491436052274, -0.7262112670759617, -0.44124353305974284,
            1.125636657786025, -0.5279898696915953),
    DOUBLE: (0.2599840197403, 0.9659270737156068, 0.49684218038065686, -0.3998199632726851,
             -0.25559537345026934, 0.580797084203645, -0.17016500998996872,
             -0.6879302541974074, 1.1427460601859674, -0.34041084794897597,
             -1.7349291311415256, 3.6100889749187868, -2.573725399218555,
             -3.7563511702223322, 14.257902875703628, -16.683258234442047,
             -10.732067883724506, 38.36356598733875),
}

# float sin/cos, evaluated in double on |r| <= pi/4:
# sin r = r + r z S(z), cos r = 1 - z/2 + z^2 C(z), z = r^2
_SIN_S = (-0.16666666663860846, 0.008333331876330783, -0.00019840087435798825,
          2.7250001491676953e-06)
_COS_C = (0.041666666664325176, -0.0013888887673175572, 2.4800600877996475e-05,
          -2.730101332682082e-07)
# double sin/cos: the same forms, more terms
_SIN_S64 = (-0.16666666666666666, 0.00833333333333095, -0.00019841269836761008,
            2.7557316103657487e-06, -2.5051132049727266e-08, 1.5918142569704523e-10)
_COS_C64 = (0.041666666666666664, -0.0013888888888887398, 2.480158729876704e-05,
            -2.7557317272344146e-07, 2.0876146382220145e-09, -1.1382639805756805e-11)
# pi/2 * 2^-64 as a sum of two doubles (the f64 reduction's remainder is in 2^-64 quadrants)
_PIO2_HI = math.pi / 2 * 2.0 ** -64
_PIO2_LO = 6.123233995736766e-17 * 2.0 ** -64       # pi/2 - double(pi/2), scaled


def _f32(v: float) -> float:
    """``v`` rounded to the nearest float32 (LLVM rejects inexact float literals)."""
    if math.isinf(v) or math.isnan(v):
        return v
    return struct.unpack("<f", struct.pack("<f", v))[0]


class _Emit:
    """Builder helpers for one float type: constants, fma, Horner, bit casts."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type, module: ir.Module):
        self.b, self.t, self.module = b, t, module
        # a vector type (vector.py's explicit vector code): every value is a vector of lanes
        self.lanes = t.count if isinstance(t, ir.VectorType) else None
        self.st = t.element if self.lanes else t        # the scalar type (table keys)
        self.f64 = self.st == DOUBLE
        self.it = I64 if self.f64 else I32
        if self.lanes:
            self.it = ir.VectorType(self.it, self.lanes)
        self.mbits = 52 if self.f64 else 23
        self.bias = 1023 if self.f64 else 127

    def _const(self, t, v):
        return ir.Constant(t, [v] * self.lanes if self.lanes else v)

    def c(self, v: float) -> ir.Constant:
        return self._const(self.t, v if self.f64 else _f32(v))

    def i(self, v: int) -> ir.Constant:
        return self._const(self.it, v)

    def _v(self, x):
        return self.c(x) if isinstance(x, (int, float)) else x

    def intr(self, name: str, *args):
        fnty = ir.FunctionType(self.t, [self.t] * len(args))
        if self.lanes:      # (llvmlite names intrinsics of scalar types only)
            full = f"llvm.{name}.v{self.lanes}{'f64' if self.f64 else 'f32'}"
            fn = self.module.globals.get(full) or ir.Function(self.module, fnty, full)
        else:
            fn = self.module.declare_intrinsic(f"llvm.{name}", [self.t], fnty)
        return self.b.call(fn, [self._v(a) for a in args])

    def add(self, a, c):
        return self.b.fadd(self._v(a), self._v(c))

    def sub(self, a, c):
        return self.b.fsub(self._v(a), self._v(c))

    def mul(self, a, c):
        return self.b.fmul(self._v(a), self._v(c))

    def div(self, a, c):
        return self.b.fdiv(self._v(a), self._v(c))

    def fma(self, a, x, c):
        return self.intr("fma", a, x, c)

    def poly(self, x, coeffs):
        """c0 + c1 x + c2 x^2 + ... by Horner's rule with fma."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, k)
        return acc

    def cmp(self, op: str, a, c):
        """Ordered comparison (false when either side is NaN)."""
        return self.b.fcmp_ordered(op, self._v(a), self._v(c))

    def sel(self, cond, a, c):
        return self.b.select(cond, self._v(a), self._v(c))

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def bits(self, x):
        return self.b.bitcast(x, self.it)

    def flt(self, i):
        return self.b.bitcast(i, self.t)

    def pow2(self, n):
        """2.0**n for an integer ``n`` in the normal exponent range."""
        return self.flt(self.b.shl(self.b.add(n, self.i(self.bias)), self.i(self.mbits)))

    def call(self, name: str, x):
        return self.b.call(make(self.module, name, self.t), [x])


# ---------------------------------------------------------------- functions
def _exp(e: _Emit, x):
    t = e.st
    # clamp (min/max, NaN passes through) so that n stays in range: below LO the result
    # is 0, above HI it is inf
    xc = e.sel(e.cmp(">", x, _EXP_HI[t]), _EXP_HI[t], x)
    xc = e.sel(e.cmp("<", xc, _EXP_LO[t]), _EXP_LO[t], xc)
    # n = rint(x / ln2) by adding 1.5 * 2^mbits: n is then the low bits of the sum (no
    # float->int conversion, and a NaN just flows through the arithmetic)
    magic = 1.5 * 2.0 ** e.mbits
    big = e.fma(xc, _LOG2E, magic)
    n = e.sub(big, magic)
    ni = e.b.sub(e.bits(big), e.bits(e.c(magic)))
    # Cody-Waite: n * LN2_HI is exact and so is x - n * LN2_HI (fma)
    r = e.fma(n, -_LN2_HI[t], xc)
    if not e.f64:
        r = e.fma(n, -_LN2_LO[t], r)
        p = e.add(e.fma(e.mul(r, r), e.poly(r, _EXP_P[t]), r), 1.0)
    else:
        # keep the rounding errors of r and of 1 + r (Fast2Sum) and add them in last: the
        # result is then within ~0.55 ulp instead of ~1
        rh = r
        lo = e.mul(n, -_LN2_LO[t])
        r = e.add(rh, lo)
        c = e.add(e.sub(rh, r), lo)
        q = e.fma(e.mul(r, r), e.poly(r, _EXP_P[t]), c)
        s1 = e.add(r, 1.0)
        c1 = e.add(e.sub(1.0, s1), r)
        p = e.add(s1, e.add(q, c1))
    # scale by 2^n in two steps: each factor is normal over the whole clamped range, the
    # first product is exact and the second rounds once (into denormals when it must)
    n1 = e.b.ashr(ni, e.i(1))
    n2 = e.b.sub(ni, n1)
    return e.mul(e.mul(p, e.pow2(n1)), e.pow2(n2))


def _log(e: _Emit, x):
    t, b = e.t, e.b
    # denormals: scale into the normal range first
    k_sub = 54 if e.f64 else 25
    tiny = 2.0 ** (-1022 if e.f64 else -126)
    sub = e.cmp("<", x, tiny)
    xs = e.sel(sub, e.mul(x, 2.0 ** k_sub), x)
    kadj = b.select(sub, e.i(-k_sub), e.i(0))
    # x = 2^k * m with m in [sqrt(1/2), sqrt(2)): shift the bits by those of sqrt(1/2)
    sqrt_half = 0x3FE6A09E667F3BCD if e.f64 else 0x3F3504F3
    tb = b.sub(e.bits(xs), e.i(sqrt_half))
    k = b.add(b.ashr(tb, e.i(e.mbits)), kadj)
    m = e.flt(b.add(b.and_(tb, e.i((1 << e.mbits) - 1)), e.i(sqrt_half)))
    f = e.sub(m, 1.0)                                   # exact
    s = e.div(f, e.add(f, 2.0))
    z = e.mul(s, s)
    R = e.mul(z, e.poly(z, _LOG_Q[t]))
    hfsq = e.mul(e.mul(f, f), 0.5)
    kf = b.sitofp(k, t)
    # log = k ln2 + f - hfsq + s (hfsq + R), summed small terms first (fdlibm's order)
    lo = e.fma(s, e.add(hfsq, R), e.mul(kf, _LN2_LO[t]))
    res = e.sub(e.mul(kf, _LN2_HI[t]), e.sub(e.sub(hfsq, lo), f))
    res = e.sel(e.cmp("==", x, math.inf), math.inf, res)
    res = e.sel(e.cmp("==", x, 0.0), -math.inf, res)
    res = e.sel(e.cmp("<", x, 0.0), math.nan, res)
    return e.sel(e.isnan(x), x, res)


def _tanh(e: _Emit, x):
    ax = e.intr("fabs", x)
    z = e.mul(x, x)
    small = e.fma(e.mul(ax, z), e.poly(z, _TANH_P[e.t]), ax)
    # 1 - 2 / (exp(2|x|) + 1): no cancellation for |x| >= 0.625; exp -> inf gives 1
    big = e.sub(1.0, e.div(2.0, e.add(e.call("exp", e.mul(ax, 2.0)), 1.0)))
    # the sign goes on last so that tanh(-0) is -0
    return e.intr("copysign", e.sel(e.cmp("<", ax, _TANH_SMALL), small, big), x)


def _erf(e: _Emit, x):
    t = e.t
    ax = e.intr("fabs", x)
    small = e.fma(ax, e.poly(e.mul(x, x), _ERF_Q[t]), ax)
    # erf rounds to 1 beyond MAX (and inf needs no special case)
    ac = e.sel(e.cmp(">", ax, _ERF_MAX[t]), _ERF_MAX[t], ax)
    g = e.poly(e.sub(e.div(1.0, e.add(ac, 1.0)), _ERF_MID[t]), _ERF_G[t])
    z = e.mul(ac, ac)
    if e.f64:     # exp(-x^2) = exp(-z) (1 - dz) with dz = x^2 - z exact: z's rounding error
        g = e.fma(e.b.fneg(e.fma(ac, ac, e.b.fneg(z))), g, g)     # would cost ~x^2/2 ulp
    erfc = e.mul(e.call("exp", e.b.fneg(z)), g)
    return e.intr("copysign", e.sel(e.cmp("<", ax, _ERF_SMALL), small, e.sub(1.0, erfc)), x)


_TWO_OVER_PI_BITS = 1400      # enough for every window the two reductions read


@functools.lru_cache(maxsize=None)
def _two_over_pi() -> int:
    """floor(2/pi * 2^_TWO_OVER_PI_BITS), from Machin's formula in integers."""
    def atan_inv(k, bits):          # atan(1/k) * 2^bits
        term = (1 << bits) // k
        total, j, sign = term, 1, -1
        while term:
            term //= k * k
            total += sign * (term // (2 * j + 1))
            sign, j = -sign, j + 1
        return total
    bits = _TWO_OVER_PI_BITS + 64
    pi = 16 * atan_inv(5, bits) - 4 * atan_inv(239, bits)
    return (2 << (2 * bits)) // pi >> 64


def _bits_of_2_over_pi(first: int, count: int) -> int:
    """Bits ``first`` .. ``first + count - 1`` of 2/pi = 0.b1 b2 b3... (zero before b1)."""
    last = first + count - 1
    if last <= 0:
        return 0
    return _two_over_pi() >> (_TWO_OVER_PI_BITS - last) & ((1 << count) - 1)


def _table(module: ir.Module, name: str, words) -> ir.GlobalVariable:
    if name not in module.globals:
        ty = ir.ArrayType(I32, len(words))
        g = ir.GlobalVariable(module, ty, name)
        g.linkage, g.global_constant = "internal", True
        g.initializer = ir.Constant(ty, [ir.Constant(I32, w) for w in words])
    return module.globals[name]


@functools.lru_cache(maxsize=None)
def _f32_windows() -> tuple:
    """For each float exponent field B: the 96 bits of 2/pi whose product with the 24-bit
    significand gives |x| * 2/pi mod 4 (bits B-151 ... B-56), as three 32-bit words."""
    out = []
    for B in range(256):
        w = _bits_of_2_over_pi(B - 151, 96)
        out.extend(((w >> 64) & 0xFFFFFFFF, (w >> 32) & 0xFFFFFFFF, w & 0xFFFFFFFF))
    return tuple(out)


#: 2/pi as 32-bit words after 64 zero bits (the f64 reduction reads any 192-bit window of it)
_F64_WORDS = 40


def _quadrant(e: _Emit, x, n, sin_r, cos_r, cos: bool):
    """sin(x) or cos(x) from r = |x| - n pi/2: sin, cos, -sin, -cos for n = 0..3."""
    b = e.b
    k = b.add(n, I32(1)) if cos else n          # cos(x) = sin(x + pi/2)
    val = b.select(b.trunc(k, ir.IntType(1)), cos_r, sin_r)
    neg = b.icmp_unsigned("!=", b.and_(k, I32(2)), I32(0))
    if not cos:                                 # sin is odd (the sign bit: sin(-0) = -0)
        neg = b.xor(neg, b.icmp_signed("<", e.bits(x), e.i(0)))
    return b.select(neg, b.fneg(val), val)


def _sincos_f32(e: _Emit, x, cos: bool):
    """sin or cos of a float: exact Payne-Hanek reduction in integers for every |x| (the
    table lookups become gathers), polynomial in double, one rounding to float."""
    b, d = e.b, _Emit(e.b, DOUBLE, e.module)
    ax = e.intr("fabs", x)
    ab = e.bits(ax)
    sig = b.zext(b.or_(b.and_(ab, e.i(0x7FFFFF)), e.i(0x800000)), I64)
    base = b.mul(b.zext(b.lshr(ab, e.i(23)), I64), I64(3))
    tbl = _table(e.module, "kdsl.two_over_pi.f32", _f32_windows())
    w = [b.zext(b.load(b.gep(tbl, [I64(0), b.add(base, I64(k))], inbounds=True), typ=I32), I64)
         for k in range(3)]
    p2, p1, p0 = (b.mul(sig, wk) for wk in w)
    # bits 95..32 of sig * window (mod 2^96): |x| * 2/pi mod 4 in units of 2^-62
    g = b.add(b.add(b.shl(p2, I64(32)), p1), b.lshr(p0, I64(32)))
    n = b.trunc(b.lshr(b.add(g, I64(1 << 61)), I64(62)), I32)     # the nearest quadrant
    frac = b.shl(g, I64(2))       # as a signed number: the remainder in [-1/2, 1/2), 2^-64 units
    r = d.mul(b.sitofp(frac, DOUBLE), math.pi / 2 * 2.0 ** -64)
    # below pi/4 no reduction is needed (and the window would lack precision for tiny x)
    small = e.cmp("<", ax, math.pi / 4)
    r = b.select(small, b.fpext(ax, DOUBLE), r)
    n = b.select(small, I32(0), n)
    z = d.mul(r, r)
    sin_r = d.fma(d.mul(r, z), d.poly(z, _SIN_S), r)
    cos_r = d.fma(d.mul(z, z), d.poly(z, _COS_C), d.fma(z, -0.5, 1.0))
    res = b.fptrunc(_quadrant(e, x, n, sin_r, cos_r, cos), FLOAT)
    return e.sel(e.cmp("<", ax, math.inf), res, math.nan)       # inf and NaN give NaN


def _reduce_f64(e: _Emit, ax):
    """|x| = n pi/2 + (r + rr), |r + rr| <= pi/4, for |x| >= pi/4 (Payne-Hanek, exact in
    integers: 53-bit significand times a 192-bit window of 2/pi, mod 4)."""
    b = e.b
    m32 = I64(0xFFFFFFFF)
    ab = e.bits(ax)
    ex = b.lshr(ab, I64(52))
    ex = b.select(b.icmp_unsigned("<", ex, I64(1022)), I64(1022), ex)   # keep loads in range
    sig = b.or_(b.and_(ab, I64((1 << 52) - 1)), I64(1 << 52))
    # the window starts at bit B-1076 of 2/pi, i.e. bit B-1012 of the table (64 zeros first)
    pos = b.sub(ex, I64(1013))
    q, sh = b.lshr(pos, I64(5)), b.sub(I64(32), b.and_(pos, I64(31)))
    tbl = _table(e.module, "kdsl.two_over_pi.f64",
                 [_bits_of_2_over_pi(32 * j - 63, 32) for j in range(_F64_WORDS)])
    z = [b.zext(b.load(b.gep(tbl, [I64(0), b.add(q, I64(k))], inbounds=True), typ=I32), I64)
         for k in range(7)]
    # window words, least significant first: v[j] has weight 2^(32 j)
    v = [b.and_(b.lshr(b.or_(b.shl(z[k], I64(32)), z[k + 1]), sh), m32) for k in range(6)][::-1]
    ml, mh = b.and_(sig, m32), b.lshr(sig, I64(32))
    pl = [b.mul(ml, vj) for vj in v]
    ph = [b.mul(mh, vj) for vj in v[:5]]
    lo, hi = (lambda t: b.and_(t, m32)), (lambda t: b.lshr(t, I64(32)))
    limbs, carry = {}, I64(0)
    for c in range(1, 6):           # 32-bit columns of the product mod 2^192 (column 0 dropped)
        t = b.add(b.add(lo(pl[c]), hi(pl[c - 1])), b.add(lo(ph[c - 1]), carry))
        if c >= 2:
            t = b.add(t, hi(ph[c - 2]))
        limbs[c], carry = lo(t), hi(t)
    top = b.or_(b.shl(limbs[5], I64(32)), limbs[4])       # |x| 2/pi mod 4 in 2^-62 units
    low = b.or_(b.shl(limbs[3], I64(32)), limbs[2])       # and the next 64 bits
    n = b.trunc(b.lshr(b.add(top, I64(1 << 61)), I64(62)), I32)
    fh = b.or_(b.shl(top, I64(2)), b.lshr(low, I64(62)))   # signed remainder, 2^-64 units
    fl = b.shl(low, I64(2))                                 # its next 64 bits
    # the remainder as an unevaluated sum hi + lo of doubles (pieces of <= 32 bits are exact)
    a = e.mul(b.sitofp(b.ashr(fh, I64(32)), DOUBLE), 2.0 ** 32)
    c = b.sitofp(b.and_(fh, m32), DOUBLE)
    f_hi = e.add(a, c)
    f_lo = e.add(e.sub(a, f_hi), c)                        # exact (Fast2Sum, |a| >= c or a = 0)
    tail = e.fma(b.sitofp(b.and_(fl, m32), DOUBLE), 2.0 ** -64,
                 e.mul(b.sitofp(hi(fl), DOUBLE), 2.0 ** -32))
    f_lo = e.add(f_lo, tail)
    # times pi/2 (and 2^-64) in double-double
    r = e.mul(f_hi, _PIO2_HI)
    rr = e.add(e.fma(f_hi, _PIO2_HI, e.b.fneg(r)), e.fma(f_hi, _PIO2_LO, e.mul(f_lo, _PIO2_HI)))
    r2 = e.add(r, rr)
    return n, r2, e.add(e.sub(r, r2), rr)


def _sincos_f64(e: _Emit, x, cos: bool):
    """sin or cos of a double: Payne-Hanek reduction to r + rr, fdlibm-style kernels."""
    b = e.b
    ax = e.intr("fabs", x)
    n, r, rr = _reduce_f64(e, ax)
    small = e.cmp("<", ax, math.pi / 4)
    r, rr = e.sel(small, ax, r), e.sel(small, 0.0, rr)
    n = b.select(small, I32(0), n)
    z = e.mul(r, r)
    # sin(r + rr) = r + r^3 S(z) + rr (1 - z/2)
    sin_r = e.add(r, e.fma(e.mul(r, z), e.poly(z, _SIN_S64), e.mul(rr, e.fma(z, -0.5, 1.0))))
    # cos(r + rr) = (1 - z/2) + z^2 C(z) - r rr, with the rounding error of 1 - z/2 kept
    hz = e.mul(z, 0.5)
    w = e.sub(1.0, hz)
    cos_r = e.add(w, e.add(e.sub(e.sub(1.0, w), hz),
                           e.fma(e.mul(z, z), e.poly(z, _COS_C64), e.b.fneg(e.mul(r, rr)))))
    res = _quadrant(e, x, n, sin_r, cos_r, cos)
    return e.sel(e.cmp("<", ax, math.inf), res, math.nan)       # inf and NaN give NaN


def _sin(e: _Emit, x):
    return _sincos_f64(e, x, False) if e.f64 else _sincos_f32(e, x, False)


def _cos(e: _Emit, x):
    return _sincos_f64(e, x, True) if e.f64 else _sincos_f32(e, x, True)


_BODIES = {"exp": _exp, "log": _log, "tanh": _tanh, "erf": _erf, "sin": _sin, "cos": _cos}


#: functions also defined on vector types (vector.py's explicit vector code: a loop of
#: ``exp`` emitted at the loop's own width, not at the loop vectoriser's preferred one)
VECTOR_NAMES = ("exp",)


def has(name: str, t: ir.Type) -> bool:
    """Whether ``make`` defines ``name`` for ``t`` (float or double, or a vector of them for
    the functions of ``VECTOR_NAMES``)."""
    if isinstance(t, ir.VectorType):
        return name in VECTOR_NAMES and t.element in NAMES.get(name, ())
    return t in NAMES.get(name, ())


def make(module: ir.Module, name: str, t: ir.Type) -> ir.Function:
    """The function ``kdsl.<name>.<f32|f64|vNf32|vNf64>`` of ``module`` (defined on first
    use)."""
    vec = isinstance(t, ir.VectorType)
    suffix = "f64" if (t.element if vec else t) == DOUBLE else "f32"
    if vec:
        suffix = f"v{t.count}{suffix}"
    fname = f"kdsl.{name}.{suffix}"
    if fname in module.globals:
        return module.globals[fname]
    if not has(name, t):
        raise InternalCompilerError(f"vecmath has no {name} for {t}")
    f = ir.Function(module, ir.FunctionType(t, [t]), fname)
    f.linkage = "internal"
    for attr in ("alwaysinline", "nounwind"):
        f.attributes.add(attr)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    b.ret(_BODIES[name](_Emit(b, t, module), f.args[0]))
    return f


__all__ = ["NAMES", "has", "make"]
