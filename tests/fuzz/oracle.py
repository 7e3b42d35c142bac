"""The oracle: evaluates a generated kernel's value tree with numpy, floats in float64 with
a rigorous error bound per element.

Every value is an ``OVal``: its numpy result dtype (from numpy itself, ``fdtypes.resolve``),
its value (float64 for float types; the native integer/bool array otherwise, so integer
arithmetic wraps exactly as numpy's does), for floats a bound on how far any correct
evaluation in that dtype may lie from it (``err``: each operation adds the rounding of its
result type; functions propagate their operands' bounds through their derivatives;
transcendental functions add ``TRANS_ULPS`` ulps; sums the worst case of any summation
order, ``gamma(n-1)``), and a mask of *undetermined* elements: where a discontinuous
operation (comparison, floor, cast to int, argmax, ...) sees an operand within its error
bound of the discontinuity, or a result may overflow, the exact answer is not defined by
the dtype's arithmetic and the element is not compared (downstream elements inherit it).

Where numpy raises (promotion, empty max, index out of range), ``OracleRaise`` says so:
the backend must then raise a fair kdsl user error.
"""
from __future__ import annotations

import numpy as np

from . import fdtypes as fd
from .fdtypes import PromotionError, resolve

#: ulps a vector math library may be off on exp/log/sin/cos/tanh/erf/sigmoid/rsqrt/pow
TRANS_ULPS = 4


class OracleRaise(Exception):
    """numpy (or kdsl's documented semantics) raises for this kernel and these inputs."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


class OVal:
    """A value: dtype name, values, float error bounds, undetermined mask, weak kind."""

    __slots__ = ("dtype", "val", "err", "mask", "weak", "pyval")

    def __init__(self, dtype, val, err=None, mask=None, weak=None, pyval=None):
        self.dtype, self.val, self.err, self.mask = dtype, val, err, mask
        self.weak, self.pyval = weak, pyval

    @property
    def shape(self):
        return np.shape(self.val)

    def E(self):
        return np.zeros(np.shape(self.val)) if self.err is None else self.err

    def M(self):
        return np.zeros(np.shape(self.val), bool) if self.mask is None else self.mask

    def spec(self):
        return (self.dtype, self.weak, self.pyval)


def _abs(x):
    with np.errstate(all="ignore"):
        return np.abs(x)


def gamma(n, u):
    """Higham's gamma_n = n u / (1 - n u): the bound of n rounding errors."""
    nu = np.asarray(n, np.float64) * u
    return np.where(nu < 0.5, nu / np.maximum(1 - nu, 0.5), np.inf)


def finish(dtype, val, err, mask, incoming=None):
    """A float result: mask possible overflows and non-finite results of inexact operands,
    zero what is masked so that it cannot pollute later operations."""
    val = np.asarray(val, np.float64)
    err = np.broadcast_to(np.asarray(err, np.float64), val.shape).copy()
    mask = np.broadcast_to(np.asarray(mask, bool), val.shape).copy()
    inc = np.zeros(val.shape) if incoming is None else np.broadcast_to(incoming, val.shape)
    fin = np.isfinite(val)
    with np.errstate(all="ignore"):
        mask |= ~fin & (inc > 0)
        mask |= fin & (_abs(val) + err >= fd.MAXF[dtype])
        mask |= np.isnan(err) & fin
    err = np.where(fin, err, 0.0)
    val = np.where(mask, 0.0, val)
    err = np.where(mask, 0.0, err)
    return OVal(dtype, val, err, mask)


# ------------------------------------------------------------------ conversions
def _int_to_float_err(v: np.ndarray, d: str):
    """Conversion bound of integers ``v`` into float type ``d``."""
    f = v.astype(np.float64)
    if v.dtype.kind in "iu" and v.size and np.max(_abs(f)) >= 2.0 ** 53:
        exact = np.array([float(int(a) - int(b)) for a, b in zip(
            v.ravel().tolist(), f.astype(object).ravel().tolist())]).reshape(v.shape)
        conv = _abs(exact)
    else:
        conv = np.zeros(v.shape)
    rep = fd.representable(f, d) & (conv == 0)
    return f, np.where(rep, 0.0, fd.round_unit(d) * _abs(f) + conv)


def as_float(o: OVal, d: str):
    """(value, error, mask) of ``o`` converted into float type ``d``."""
    if o.weak is not None and o.pyval is not None:
        v = np.asarray(float(o.pyval))
        if fd.is_float(o.dtype) or isinstance(o.pyval, float):
            rep = fd.representable(v, d)
            return v, np.where(rep, 0.0, fd.round_unit(d) * _abs(v)), np.asarray(False)
    if fd.is_float(o.dtype):
        v, e = np.asarray(o.val, np.float64), o.E()
        if fd.UNIT[d] > fd.UNIT[o.dtype]:     # narrowing (astype, weak floats)
            rep = fd.representable(v, d) & (e == 0)
            e = e + np.where(rep, 0.0, fd.round_unit(d) * _abs(v) + fd.TINY[d])
        return v, e, o.M()
    v = np.asarray(o.val if o.pyval is None else o.pyval)
    if v.dtype == bool:
        return v.astype(np.float64), np.zeros(v.shape), o.M()
    f, e = _int_to_float_err(v.astype(np.int64) if v.dtype == object else v, d)
    return f, e, o.M()


def native(o: OVal, d: str):
    """The values of integer/bool ``o`` as numpy dtype ``d`` (wrapping, like numpy's casts)."""
    if o.pyval is not None:
        return np.asarray(o.pyval).astype(d) if not isinstance(o.pyval, bool) else np.asarray(o.pyval, d)
    with np.errstate(all="ignore"):
        return np.asarray(o.val).astype(d)


def truth(o: OVal):
    """(bool values, undetermined) of ``o != 0``."""
    if fd.is_float(o.dtype):
        v, e = np.asarray(o.val, np.float64), o.E()
        t = v != 0
        return t, o.M() | ((e > 0) & (_abs(v) <= e))
    v = native(o, o.dtype if o.dtype != "bool" else "bool")
    return v != 0, o.M()


# ------------------------------------------------------------------ elementwise
_NP_BIN = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide",
           "fdiv": "floor_divide", "mod": "remainder", "pow": "power", "max": "maximum",
           "min": "minimum", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
           "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
           "ge": "greater_equal", "land": "logical_and", "lor": "logical_or", "lxor": "logical_xor"}
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
LOGICAL = ("land", "lor", "lxor")


def _kind(d: str) -> str:
    """The weak (Python scalar) kind of dtype ``d``."""
    return "b" if d == "bool" else "f" if fd.is_float(d) else "i"


def _round(R, r, exact):
    """The rounding term of a result ``r`` of type R; 0 where the result is exact."""
    rep = fd.representable(np.where(np.isfinite(r), r, 0.0), R)
    return np.where(exact & rep, 0.0, fd.round_unit(R) * _abs(np.where(np.isfinite(r), r, 0)) + fd.TINY[R])


def _short(v):
    """Values whose mantissa fits float32's (products of two such are exact in float64)."""
    with np.errstate(all="ignore"):
        return np.asarray(v, np.float64).astype(np.float32).astype(np.float64) == v


#: operators that Python applies to bools as ints (True + True == 2, -True == -1)
PY_INT_BIN = ("add", "sub", "mul", "div", "fdiv", "mod", "pow")
PY_INT_UN = ("neg", "invert", "abs")


def py_int(o: OVal) -> OVal:
    """A weak bool as the weak int Python's arithmetic makes of it."""
    if o.weak != "b":
        return o
    return OVal("int64", np.asarray(o.val).astype(np.int64), None, o.mask, "i",
                None if o.pyval is None else int(o.pyval))


def binary(op: str, a: OVal, b: OVal, weak_result: bool = True) -> OVal:
    fname = _NP_BIN[op]
    both_weak = weak_result and a.weak is not None and b.weak is not None
    if both_weak and op in PY_INT_BIN:     # an operator on Python scalars: Python's rules
        a, b = py_int(a), py_int(b)
    try:
        R = resolve(fname, [a.spec(), b.spec()])
    except PromotionError as e:
        raise OracleRaise("promotion", f"np.{fname}: {e}") from None
    mask = a.M() | b.M()
    weak = _kind(R) if (weak_result and a.weak is not None and b.weak is not None) else None
    if op in COMPARE:
        cmp = getattr(np, fname)
        if not fd.is_float(a.dtype) and not fd.is_float(b.dtype):
            av = a.pyval if a.pyval is not None else np.asarray(a.val)
            bv = b.pyval if b.pyval is not None else np.asarray(b.val)
            return OVal("bool", np.asarray(cmp(av, bv)), None, mask, "b" if both_weak else None)
        try:
            C = resolve("add", [a.spec(), b.spec()])
        except PromotionError:
            C = "float64"
        C = C if fd.is_float(C) else "float64"
        A, ea, ma = as_float(a, C)
        B, eb, mb = as_float(b, C)
        with np.errstate(all="ignore"):
            r = cmp(A, B)
            und = (ea + eb > 0) & (_abs(A - B) <= ea + eb)
        return OVal("bool", np.asarray(r), None, mask | und, "b" if both_weak else None)
    if op in LOGICAL:
        ta, ua = truth(a)
        tb, ub = truth(b)
        r = getattr(np, fname)(ta, tb)
        und = ua | ub
        if op == "land":
            und = (ua & ~(~tb & ~ub)) | (ub & ~(~ta & ~ua))
        elif op == "lor":
            und = (ua & ~(tb & ~ub)) | (ub & ~(ta & ~ua))
        return OVal("bool", np.asarray(r), None, mask | und)
    if fd.is_float(R):
        return _float_binary(op, R, a, b, mask, weak)
    av, bv = native(a, R), native(b, R)
    with np.errstate(all="ignore"):
        try:
            r = getattr(np, fname)(av, bv)
        except ValueError as e:
            raise OracleRaise("value", f"np.{fname}: {e}") from None
    return OVal(R, np.asarray(r).astype(R), None, mask, weak)


def _float_binary(op, R, a, b, mask, weak):
    A, ea, ma = as_float(a, R)
    B, eb, mb = as_float(b, R)
    A, B = np.broadcast_arrays(A, B)
    ea, eb = np.broadcast_to(ea, A.shape), np.broadcast_to(eb, A.shape)
    mask = np.broadcast_to(mask | ma | mb, A.shape).copy()
    exact_in = (ea == 0) & (eb == 0)
    inc = ea + eb
    aA, aB = _abs(A), _abs(B)
    with np.errstate(all="ignore"):
        if op in ("add", "sub"):
            r = A + B if op == "add" else A - B
            Bs = B if op == "add" else -B
            bb = r - A
            exact = exact_in & ((A - (r - bb)) + (Bs - bb) == 0)
            err = ea + eb + _round(R, r, exact)
        elif op == "mul":
            r = A * B
            exact = exact_in & _short(A) & _short(B)
            err = aA * eb + aB * ea + ea * eb + _round(R, r, exact)
        elif op == "div":
            r = A / B
            mask |= (aB <= eb) | (B == 0)
            exact = exact_in & _short(r) & _short(B) & (r * B == A)
            err = (ea + _abs(r) * eb) / np.maximum(aB - eb, 1e-300) + _round(R, r, exact)
        elif op in ("fdiv", "mod"):
            q = A / B
            mask |= (aB <= eb) | (B == 0)
            exact = exact_in & _short(q) & _short(B) & (q * B == A)
            eq = np.where(exact, 0.0, (ea + _abs(q) * eb) / np.maximum(aB - eb, 1e-300)
                          + 2 * fd.round_unit(R) * _abs(q) + fd.TINY[R])
            fq = np.floor(q)
            # numpy floors the exact quotient: undetermined when q is within eq of an integer
            mask |= np.floor(q - eq) != np.floor(q + eq)
            if op == "fdiv":
                r, err = fq, np.zeros(q.shape)
            else:
                p = B * fq
                r = A - p
                bb = r - A
                rexact = exact & _short(fq) & ((A - (r - bb)) + (-p - bb) == 0)
                err = ea + _abs(fq) * eb + np.where(rexact & fd.representable(r, R), 0.0,
                                                    fd.round_unit(R) * (aA + _abs(p)) + fd.TINY[R])
            # infinite operands: numpy's own rules (inf // x is nan, 3 // inf is 0, -3 % inf is inf)
            nonfin = ~np.isfinite(A) | ~np.isfinite(B)
            native = np.floor_divide(A, B) if op == "fdiv" else np.remainder(A, B)
            r = np.where(nonfin, native, r)
            err = np.where(nonfin, 0.0, err)
            mask |= nonfin & (ea + eb > 0)
        elif op == "pow":
            r = np.power(A, B)
            isint = (B == np.round(B)) & (eb == 0)
            small = (aA <= ea) & (ea > 0)
            mask |= small | ((A < 0) & ~isint)
            ln = np.log(np.maximum(aA, 1e-300))
            rel = _abs(B) * ea / np.maximum(aA, 1e-300) + _abs(ln) * eb
            exact = exact_in & isint & (_abs(B) <= 2) & (B >= 0) & _short(A)
            err = _abs(r) * rel + np.where(exact, _round(R, r, exact),
                                           TRANS_ULPS * fd.UNIT[fd.compute_dtype(R)] * _abs(r)
                                           + fd.round_unit(R) * _abs(r) + fd.TINY[R])
            err = np.where((A == 0) & (B >= 0) & exact_in, 0.0, err)
        elif op in ("max", "min"):
            r = np.maximum(A, B) if op == "max" else np.minimum(A, B)
            err = np.maximum(ea, eb)
        else:
            raise OracleRaise("promotion", f"np.{_NP_BIN[op]} on floats")
    out = finish(R, r, err, mask, inc)
    out.weak = weak
    return out


_NP_UN = {"neg": "negative", "abs": "absolute", "invert": "invert", "exp": "exp", "log": "log",
          "sqrt": "sqrt", "rsqrt": "sqrt", "sin": "sin", "cos": "cos", "tanh": "tanh",
          "erf": "exp", "sigmoid": "exp", "floor": "floor", "ceil": "ceil"}
#: derivative bounds of the bounded functions (|f'| <= c everywhere)
_LIPSCHITZ = {"sin": 1.0, "cos": 1.0, "tanh": 1.0, "erf": 1.1284, "sigmoid": 0.25}


def unary(op: str, x: OVal, weak_result=False) -> OVal:
    mask = x.M()
    if op == "isnan":
        if fd.is_float(x.dtype):
            return OVal("bool", np.isnan(np.asarray(x.val, np.float64)), None, mask)
        return OVal("bool", np.zeros(x.shape, bool), None, mask)
    if op == "lnot":
        t, u = truth(x)
        return OVal("bool", ~t, None, mask | u)
    if weak_result and op in PY_INT_UN:    # -True == -1, ~True == -2, abs(True) == 1
        x = py_int(x)
    try:
        R = resolve(_NP_UN[op], [x.spec()])
    except PromotionError as e:
        raise OracleRaise("promotion", f"np.{_NP_UN[op]}: {e}") from None
    weak = x.weak if weak_result else None
    if not fd.is_float(R):
        v = native(x, R)
        with np.errstate(all="ignore"):
            r = getattr(np, _NP_UN[op])(v) if op != "rsqrt" else None
        return OVal(R, np.asarray(r).astype(R), None, mask, weak)
    A, ea, m = as_float(x, R)
    mask = mask | m
    T = TRANS_ULPS * fd.UNIT[fd.compute_dtype(R)]
    ru, tiny = fd.round_unit(R), fd.TINY[R]
    with np.errstate(all="ignore"):
        aA = _abs(A)
        if op in ("neg", "abs"):
            r, err = (-A if op == "neg" else aA), ea
        elif op in ("floor", "ceil"):
            f = np.floor if op == "floor" else np.ceil
            r = f(A)
            mask = mask | (f(A - ea) != f(A + ea))
            err = np.zeros(np.shape(A))
        elif op == "exp":
            r = np.exp(A)
            err = np.abs(r) * np.expm1(ea) + (T + ru) * r + tiny
        elif op == "log":
            r = np.log(A)
            mask = mask | ((ea > 0) & (A - ea <= 0))
            err = -np.log1p(-np.minimum(ea / np.maximum(A, 1e-300), 0.5)) * 2 + (T + ru) * _abs(r) + tiny
            err = np.where((ea == 0) & (A == 1), 0.0, err)
        elif op in ("sqrt", "rsqrt"):
            s = np.sqrt(A)
            mask = mask | ((ea > 0) & (A - ea < 0) & (A + ea > 0))
            lo = np.sqrt(np.maximum(A - ea, 0))
            es = ea / np.maximum(s + lo, 1e-300)
            if op == "sqrt":
                r = s
                exact = (ea == 0) & _short(s) & (s * s == A)
                err = es + _round(R, r, exact)
            else:
                r = 1.0 / s
                mask = mask | ((ea > 0) & (lo <= 0))
                err = es / np.maximum(s * lo, 1e-300) + (T + ru) * _abs(r) + tiny
        elif op in _LIPSCHITZ:
            fn = {"sin": np.sin, "cos": np.cos, "tanh": np.tanh, "sigmoid": _sigmoid,
                  "erf": _erf}[op]
            r = fn(A)
            err = _LIPSCHITZ[op] * ea + (T + ru) * _abs(r) + tiny
            if op in ("sin", "cos"):
                err = err + T * np.minimum(1.0, aA)     # range reduction: absolute ulps of |x|
        else:
            raise OracleRaise("promotion", f"np.{_NP_UN[op]} on {x.dtype}")
    out = finish(R, r, err, mask, ea)
    out.weak = weak
    return out


def _sigmoid(x):
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _erf(x):
    import math
    f = np.vectorize(math.erf, otypes=[np.float64])
    return f(x) if np.size(x) else np.zeros(np.shape(x))


def cast(x: OVal, d: str) -> OVal:
    """``x.astype(d)``."""
    mask = x.M()
    if fd.is_float(d):
        v, e, m = as_float(x, d)
        return finish(d, v, e, mask | m, e)
    if not fd.is_float(x.dtype):
        return OVal(d, native(x, d), None, mask)
    v, e = np.asarray(x.val, np.float64), x.E()
    if d == "bool":
        t, u = truth(x)
        return OVal("bool", t, None, mask | u)
    info = np.iinfo(d)
    with np.errstate(all="ignore"):
        t = np.trunc(v)
        bad = ~np.isfinite(v) | (t < info.min) | (t > info.max)
        lo, hi = np.trunc(v - e), np.trunc(v + e)
        bad |= (lo != hi) & (e > 0)
        r = np.where(bad, 0, t).astype(d)
    return OVal(d, r, None, mask | bad)


def where(c: OVal, a: OVal, b: OVal) -> OVal:
    t, u = truth(c)
    try:
        R = resolve("where", [("bool", None, None), a.spec(), b.spec()])
    except PromotionError as e:
        raise OracleRaise("promotion", f"np.where: {e}") from None
    if fd.is_float(R):
        A, ea, ma = as_float(a, R)
        B, eb, mb = as_float(b, R)
        r = np.where(t, A, B)
        err = np.where(t, ea, eb)
        mask = u | np.where(t, ma | a.M(), mb | b.M())
        return finish(R, r, err, mask)
    r = np.where(t, native(a, R), native(b, R))
    return OVal(R, np.asarray(r), None, u | np.where(t, a.M(), b.M()))


def clip(x: OVal, lo, hi) -> OVal:
    try:
        R = fd.resolve_clip(x.spec(), lo, hi)
    except PromotionError as e:
        raise OracleRaise("promotion", f"np.clip: {e}") from None
    if not fd.is_float(R):
        v = np.asarray(x.val) if x.pyval is None else np.asarray(x.pyval)
        with np.errstate(all="ignore"):
            r = np.clip(v.astype(np.int64) if v.dtype.kind in "iub" else v, lo, hi).astype(R)
        return OVal(R, r, None, x.M())
    A, ea, m = as_float(x, R)
    e2 = 0.0
    for bnd in (lo, hi):
        if bnd is not None:
            bv = np.asarray(float(bnd))
            e2 = np.maximum(e2, np.where(fd.representable(bv, R), 0.0, fd.round_unit(R) * abs(float(bnd))))
    with np.errstate(all="ignore"):
        r = np.clip(A, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    return finish(R, r, ea + e2, x.M() | m, ea)


def view(x: OVal, kind: str, params) -> OVal:
    def ap(a):
        if a is None:
            return None
        if kind == "transpose":
            return np.transpose(a, params)
        return np.asarray(a)[params]
    return OVal(x.dtype, ap(np.asarray(x.val)), ap(x.err), ap(x.mask), x.weak, None)
