"""The oracle of the issue-25 ufuncs (``np.tan``... ``np.gcd``, shifts) and ``.view`` bitcasts.

Integer and bool results: numpy itself on the native operands (strong arrays in their own
dtype, weak values as Python scalars), so wrapping, shifts by out-of-range amounts, integer
division by zero and ``gcd``/``lcm``'s sign rules are numpy's exactly.

Float results: the function in float64 on the float64 values, with an error bound from the
operand bounds by interval evaluation (``f`` at ``x - e`` and ``x + e``; the table says
whether ``f`` is increasing, decreasing, even around 0, 1-Lipschitz or discontinuous, and an
interval that breaks that shape -- a pole, a domain edge -- is undetermined), plus
``ulps`` units of the compute type for the library's own error.  Sign-of-zero and NaN-sign
questions (``signbit``, ``copysign``, ``arctan2``, bitcasts) are undetermined for values
that come out of arithmetic, where IEEE leaves a choice (``0 * -1``, ``inf - inf``).
"""
from __future__ import annotations

import numpy as np

from . import fdtypes as fd
from .fdtypes import PromotionError, resolve
from .oracle import TRANS_ULPS, OracleRaise, OVal, _abs, as_float, finish, native

#: unary float functions: (numpy function, shape, extra ulps of the compute type)
UNARY = {
    "tan": ("inc", TRANS_ULPS), "sinh": ("inc", TRANS_ULPS), "cosh": ("even", TRANS_ULPS),
    "arcsin": ("inc", TRANS_ULPS), "arccos": ("dec", TRANS_ULPS), "arctan": ("inc", TRANS_ULPS),
    "arcsinh": ("inc", TRANS_ULPS), "arccosh": ("inc", TRANS_ULPS),
    "arctanh": ("inc", TRANS_ULPS), "log1p": ("inc", TRANS_ULPS), "expm1": ("inc", TRANS_ULPS),
    "log2": ("inc", TRANS_ULPS), "log10": ("inc", TRANS_ULPS), "exp2": ("inc", TRANS_ULPS),
    "cbrt": ("inc", TRANS_ULPS), "deg2rad": ("inc", 2), "rad2deg": ("inc", 2),
    "square": ("even", 0), "reciprocal": ("dec", 0), "fabs": ("even", 0), "sign": ("disc", 0),
    "rint": ("disc", 0), "trunc": ("disc", 0), "spacing": ("exact", 0),
}
#: binary float functions: shape (see ``_binary_float``), extra ulps
BINARY = {"arctan2": TRANS_ULPS, "hypot": TRANS_ULPS, "copysign": 0, "fmod": 0,
          "logaddexp": TRANS_ULPS, "logaddexp2": TRANS_ULPS, "heaviside": 0, "fmax": 0,
          "fmin": 0, "nextafter": 0, "float_power": TRANS_ULPS}
#: functions of integers only (numpy has no float loop)
INT_ONLY = ("left_shift", "right_shift", "gcd", "lcm", "bitwise_count")
BOOL_OF_FLOAT = ("isinf", "isfinite", "signbit")


def _arith(o: OVal) -> np.ndarray:
    """Where ``o``'s value came out of arithmetic (its sign of zero / NaN is IEEE's choice)."""
    return np.broadcast_to(np.asarray(o.err is not None), np.shape(o.val))


def _operand(o: OVal):
    """``o`` as numpy sees it in the kernel: a Python scalar if weak, else its native array."""
    if o.weak is not None:
        if o.pyval is not None:
            return o.pyval
        v = np.asarray(o.val).item()
        return {"b": bool, "i": int, "f": float}[o.weak](v)
    if fd.is_float(o.dtype):
        return np.asarray(o.val, fd.np_dtype(o.dtype))
    return native(o, o.dtype)


def _resolve(name, args):
    try:
        return resolve(name, [a.spec() for a in args])
    except PromotionError as e:
        raise OracleRaise("promotion", f"np.{name}: {e}") from None


def ufunc(name: str, args: list) -> OVal:
    """``np.<name>(*args)`` with numpy's dtype, float bounds and undetermined elements."""
    R = _resolve(name, args)
    mask = np.zeros((), bool)
    for a in args:
        mask = mask | a.M()
    if name in BOOL_OF_FLOAT and fd.is_float(args[0].dtype):
        return _bool_of_float(name, args[0], mask)
    if not fd.is_float(R):
        # a weak value with many elements (an axis inside kd.compute) meets the others in
        # the result's type, as the Python int each element stands for would
        ops = [(native(a, R if len(args) > 1 else a.dtype) if a.weak is not None and np.ndim(a.val)
                else _operand(a)) for a in args]
        with np.errstate(all="ignore"):
            r = getattr(np, name)(*ops)
        r = np.asarray(r).astype(R)
        return OVal(R, r, None, np.broadcast_to(mask, r.shape).copy())
    if len(args) == 1:
        return _unary_float(name, R, args[0], mask)
    return _binary_float(name, R, args[0], args[1], mask)


def _bool_of_float(name, x: OVal, mask):
    A, ea, m = as_float(x, x.dtype)
    mask = mask | m
    with np.errstate(all="ignore"):
        if name == "signbit":
            r = np.signbit(A)
            mask = mask | ((ea > 0) & (_abs(A) <= ea)) | (_arith(x) & ((A == 0) | np.isnan(A)))
        else:
            r = getattr(np, name)(A)
    return OVal("bool", np.asarray(r), None, np.broadcast_to(mask, np.shape(r)).copy())


def _rounding(R, r, ulps):
    c = fd.compute_dtype(R)
    fin = np.isfinite(r)
    return np.where(fin, (ulps * fd.UNIT[c] + fd.round_unit(R)) * _abs(np.where(fin, r, 0))
                    + fd.TINY[R], 0.0)


def _unary_float(name, R, x: OVal, mask):
    shape, ulps = UNARY[name]
    A, ea, m = as_float(x, R)
    mask = mask | m
    f = getattr(np, name)
    with np.errstate(all="ignore"):
        r = f(A)
        if shape == "exact":      # a function of the bits (spacing): only of exact values
            r = f(np.asarray(A, fd.np_dtype(R))).astype(np.float64)
            mask = mask | (ea > 0)
            err = np.zeros(np.shape(r))
        elif shape == "disc":
            lo, hi = f(A - ea), f(A + ea)
            mask = mask | ((ea > 0) & (lo != hi))
            err = np.zeros(np.shape(r))
        else:
            lo, hi = f(A - ea), f(A + ea)
            dev = np.maximum(_abs(lo - r), _abs(hi - r))
            if shape == "even":
                dev = np.where((A - ea <= 0) & (A + ea >= 0), np.maximum(dev, _abs(f(0.0 * A) - r)), dev)
            elif shape == "inc":
                mask = mask | ((ea > 0) & ~((lo <= r) & (r <= hi)))
            elif shape == "dec":
                mask = mask | ((ea > 0) & ~((lo >= r) & (r >= hi)))
            # an interval that reaches a domain edge (NaN) or a pole (inf) is undetermined
            mask = mask | ((ea > 0) & np.isfinite(r) & ~(np.isfinite(lo) & np.isfinite(hi)))
            err = np.where(ea > 0, dev, 0.0) + _rounding(R, r, ulps)
            if name in ("fabs", "square") or shape == "inc" and name in ("deg2rad", "rad2deg"):
                err = np.where((ea == 0) & (r == 0), 0.0, err)
    return finish(R, r, err, mask, ea)


def _binary_float(name, R, a: OVal, b: OVal, mask):
    A, ea, ma = as_float(a, R)
    B, eb, mb = as_float(b, R)
    A, B = np.broadcast_arrays(A, B)
    ea, eb = np.broadcast_to(ea, A.shape), np.broadcast_to(eb, A.shape)
    mask = np.broadcast_to(mask | ma | mb, A.shape).copy()
    za, zb = np.broadcast_to(_arith(a), A.shape), np.broadcast_to(_arith(b), A.shape)
    f = getattr(np, name)
    ulps = BINARY[name]
    with np.errstate(all="ignore"):
        r = f(A, B)
        near0_b = ((eb > 0) & (_abs(B) <= eb)) | (zb & (B == 0))
        if name in ("fmax", "fmin"):
            err = np.maximum(ea, eb)
        elif name == "copysign":
            err = ea.copy()
            mask |= near0_b | (zb & np.isnan(B))
        elif name == "heaviside":
            err = np.where(A == 0, eb, 0.0)
            mask |= (ea > 0) & (_abs(A) <= ea)
        elif name == "hypot":
            err = ea + eb + _rounding(R, r, ulps)
        elif name in ("logaddexp", "logaddexp2"):
            # max(a, b) + log1p(exp(-|a - b|)) cancels when the result is near 0: its terms'
            # rounding is relative to max(|a|, |b|), not to the result (numpy's formula too)
            big = np.maximum(_abs(A), _abs(B))
            err = np.maximum(ea, eb) + _rounding(R, r, ulps) + _rounding(R, np.where(
                np.isfinite(big), big, 0.0), ulps)
        elif name == "arctan2":
            h = np.hypot(A, B)
            e = ea + eb
            mask |= (e > 0) & (h <= e)
            mask |= (B < 0) & (((ea > 0) & (_abs(A) <= ea)) | (za & (A == 0)))   # the branch cut
            mask |= za & zb & (A == 0) & (B == 0)
            err = e / np.maximum(h - e, 1e-300) + _rounding(R, r, ulps)
        elif name == "fmod":
            q = A / B
            eq = (ea + _abs(q) * eb) / np.maximum(_abs(B) - eb, 1e-300) + 2 * fd.round_unit(R) * _abs(q)
            mask |= np.trunc(q - eq) != np.trunc(q + eq)
            mask |= (eb > 0) & (_abs(B) <= eb)
            err = ea + _abs(np.trunc(q)) * eb + _rounding(R, r, 2) * (ea + eb > 0)
            mask |= za & (r == 0)          # the zero's sign follows the dividend's
        elif name == "nextafter":
            r = f(A.astype(fd.np_dtype(R)), B.astype(fd.np_dtype(R))).astype(np.float64)
            mask |= (ea > 0) | (eb > 0) | (za & (A == 0)) | (zb & (B == 0))
            err = np.zeros(A.shape)
        elif name == "float_power":
            isint = (B == np.round(B)) & (eb == 0)
            mask |= ((ea > 0) & (_abs(A) <= ea)) | ((A < 0) & ~isint)
            ln = np.log(np.maximum(_abs(A), 1e-300))
            rel = _abs(B) * ea / np.maximum(_abs(A), 1e-300) + _abs(ln) * eb
            err = _abs(r) * rel + _rounding(R, r, ulps)
            err = np.where((A == 0) & (B >= 0) & (ea == 0) & (eb == 0), 0.0, err)
        else:
            raise OracleRaise("promotion", f"np.{name} on floats")
    return finish(R, r, err, mask, ea + eb)


def bitview(x: OVal, d: str) -> OVal:
    """``x.view(d)`` (same item size): exact bits of exact values; values out of arithmetic
    whose zero sign or NaN bits IEEE leaves open, and inexact ones, are undetermined."""
    if fd.is_float(x.dtype):
        A, ea, m = as_float(x, x.dtype)
        src = np.asarray(A).astype(fd.np_dtype(x.dtype))
        und = m | (ea > 0) | (_arith(x) & ((A == 0) | np.isnan(A)))
    else:
        src = native(x, x.dtype)
        und = x.M()
    r = np.ascontiguousarray(src).view(np.dtype(d)).reshape(np.shape(src))
    und = np.broadcast_to(und, np.shape(src)).copy()
    if fd.is_float(d):
        v = r.astype(np.float64)
        return OVal(d, np.where(und, 0.0, v), np.zeros(v.shape), und)
    return OVal(d, np.where(und, 0, r).astype(d), None, und)
