"""The fuzzer's own view of dtypes: names, numpy promotion (bfloat16 included) and rounding units.

Written from numpy's documented rules (NEP 50: Python scalars are weak) and
kdsl's documented bfloat16 rule (it promotes like torch: bf16 with fp16 gives
float32, with integers bf16), independently of ``kdsl.dtypes`` (under test).
numpy itself answers every question that does not involve bfloat16.
"""
from __future__ import annotations

import numpy as np

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8")
#: dtypes an input array may have (bfloat16 needs ml_dtypes to live in numpy: internal only)
ARRAY_DTYPES = ("bool",) + INTS + ("float16", "float32", "float64")
ALL = ARRAY_DTYPES + ("bfloat16",)

#: unit roundoff (half an ulp of 1) and smallest normal of each float type
UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24, "float64": 2.0 ** -53}
TINY = {"float16": 2.0 ** -14, "bfloat16": 2.0 ** -126, "float32": 2.0 ** -126,
        "float64": 2.0 ** -1022}
MAXF = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
        "float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}
#: mantissa bits (with the implicit one)
MANT = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def is_float(d: str) -> bool:
    return d in FLOATS


def is_int(d: str) -> bool:
    return d in INTS or d in ("uint64", "uint16", "uint32")


def compute_dtype(d: str) -> str:
    """The type 16-bit floats compute (and accumulate) in."""
    return "float32" if d in ("float16", "bfloat16") else d


def round_unit(d: str) -> float:
    """Rounding error bound of one operation whose result has dtype ``d`` (relative), covering
    double rounding through the compute type."""
    u = UNIT[d]
    c = compute_dtype(d)
    return u + (UNIT[c] if c != d else 0.0)


def np_dtype(d: str) -> np.dtype:
    """numpy storage dtype (bfloat16 values live in float32 inside the oracle)."""
    return np.dtype("float32" if d == "bfloat16" else d)


def code(d: str) -> str:
    """How generated kernels spell a dtype."""
    return "kd.bfloat16" if d == "bfloat16" else ("np.bool_" if d == "bool" else f"np.{d}")


def representable(v: np.ndarray, d: str) -> np.ndarray:
    """Which float64 values are exactly representable in float type ``d`` (finite ones)."""
    with np.errstate(all="ignore"):
        if d == "float64":
            return np.ones(np.shape(v), bool)
        if d == "bfloat16":
            x = np.asarray(v, np.float64).astype(np.float32)
            ok = x.astype(np.float64) == v
            return ok & ((x.view(np.uint32) & 0xFFFF) == 0)
        return np.asarray(v, np.float64).astype(d).astype(np.float64) == v


class PromotionError(Exception):
    """numpy (or kdsl's documented bf16 rule) rejects these operand types."""


def _proxy(dtype, weak, pyval):
    if weak is not None:
        if pyval is not None:
            return pyval
        return {"b": True, "i": 1, "f": 1.0}[weak]
    return np.ones(1, np_dtype(dtype))


def resolve(fname: str, operands) -> str:
    """Result dtype of numpy function ``fname`` on ``operands`` = [(dtype, weak, pyval)].

    ``weak`` is None for strong operands, else 'b'/'i'/'f' (a Python scalar's kind).
    Raises PromotionError where numpy raises.
    """
    has_bf = any(d == "bfloat16" and w is None for d, w, _ in operands)
    fn = getattr(np, fname)
    if not has_bf:
        try:
            with np.errstate(all="ignore"):
                return np.asarray(fn(*[_proxy(*o) for o in operands])).dtype.name
        except (TypeError, OverflowError, ValueError) as e:
            raise PromotionError(f"{type(e).__name__}: {e}") from None
    # bfloat16: torch-like.  Other strong floats decide; else bf16 absorbs ints, bools, weak.
    others = [d for d, w, _ in operands if w is None and d != "bfloat16"]
    fl = [d for d in others if is_float(d)]
    if fl:
        wide = max(np.dtype(d).itemsize for d in fl)
        base = "float64" if wide > 4 else "float32"
        return resolve(fname, [(base, None, None)] + [o for o in operands if o[0] != "bfloat16"
                                                      or o[1] is not None])
    # what numpy gives for float16 in its place tells the kind of result (bool, float)
    ops16 = [("float16" if d == "bfloat16" and w is None else d, w, p) for d, w, p in operands]
    r = resolve(fname, ops16)
    return "bfloat16" if is_float(r) else r


def resolve_clip(spec, lo, hi) -> str:
    """Result dtype of ``np.clip(x, lo, hi)`` (bounds: Python scalars or None)."""
    d, w, p = spec
    if d == "bfloat16" and w is None:
        r = resolve_clip(("float16", None, None), lo, hi)
        return "bfloat16" if r == "float16" else r
    try:
        with np.errstate(all="ignore"):
            return np.asarray(np.clip(_proxy(d, w, p), lo, hi)).dtype.name
    except (TypeError, OverflowError, ValueError) as e:
        raise PromotionError(f"{type(e).__name__}: {e}") from None
