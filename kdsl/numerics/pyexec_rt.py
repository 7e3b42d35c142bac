"""Scalar run-time helpers that the interpreter's generated Python links against.

Values in generated code are numpy scalars of the node's dtype, so numpy does
the rounding (float16) and the wrap-around (integers) of every op.  Two
exceptions keep index arithmetic fast: int64 loop variables, shapes and
constants are plain Python ints (exact; they turn into ``np.int64`` when they
meet array data), and bfloat16 values are float32 scalars rounded to bfloat16
after each op (``round_bf16``).  The semantics match ``numpy_eval``: integer
``//``/``%`` floor and give 0 for a zero divisor, MIN/MAX propagate NaN,
float->int casts follow ``numpy_eval.float_to_int`` (numpy's x86 results).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import InternalCompilerError


class OutOfBounds(InternalCompilerError, IndexError):
    """A Load or Store of the interpreted IR indexed outside its buffer (a bad guard)."""


def round_bf16(x):
    """A float32 scalar rounded to the nearest bfloat16 (ties to even), kept as float32."""
    x = np.float32(x)
    if x != x:
        return x
    u = int(x.view(np.uint32))
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return np.uint32(u).view(np.float32)


def rep_type(d: dt.DType):
    """The numpy scalar type that holds values of ``d`` in generated code."""
    return np.float32 if d is dt.bfloat16 else d.np.type


def storage_np(d: dt.DType) -> np.dtype:
    """The numpy dtype of a temporary buffer of ``d`` (bfloat16 as float32 without ml_dtypes)."""
    if d is dt.bfloat16:
        try:
            return d.np
        except TypeError:
            return np.dtype(np.float32)
    return d.np


def make_value(v, d: dt.DType):
    """The generated-code representation of the Python scalar ``v`` as dtype ``d``."""
    if d is dt.bfloat16:
        return round_bf16(np.float32(v))
    if d.is_int:
        v, info = int(v), np.iinfo(d.np)
        if not info.min <= v <= info.max:   # wrap like a C cast (np.int8(300) would raise)
            v = (v - info.min) % (1 << d.bits) + info.min
    return d.np.type(v)


# ----------------------------------------------------------------- arithmetic
def sel(c, t, f):
    """Select: both sides were evaluated already (eager, like a hardware select)."""
    return t if c else f


def fmin(a, b):
    """Float minimum propagating NaN, like np.minimum."""
    if a != a:
        return a
    return a if a <= b else b


def fmax(a, b):
    if a != a:
        return a
    return a if a >= b else b


def ifloordiv(a, b):
    """Integer floor division; a zero divisor gives 0 (numpy's result) instead of raising."""
    return a // b if b != 0 else a * 0


def imod(a, b):
    return a % b if b != 0 else a * 0


def make_ipow(d: dt.DType):
    """Integer power in ``d``; negative exponents give the C-like 1, +-1 or 0."""
    def ipow(a, b):
        if b < 0:
            r = 1 if a == 1 else ((1 if b % 2 == 0 else -1) if a == -1 else 0)
            return make_value(r, d)
        return make_value(a, d) ** make_value(b, d)
    ipow.__name__ = f"ipow_{d.name}"
    return ipow


def make_cast(src: dt.DType, dst: dt.DType):
    """A function converting a value of ``src`` into the representation of ``dst``."""
    src_np = np.dtype(np.float32) if src is dt.bfloat16 else src.np
    if dst is dt.bfloat16:
        return lambda x: round_bf16(np.float32(x))
    if dst.is_bool:
        return np.bool_
    if dst.is_float:
        return dst.np.type
    dst_np = dst.np
    if src.is_float:
        return lambda x: float_to_int(x, dst)
    if src.is_int or src.is_bool:
        lo, hi = np.iinfo(dst_np).min, np.iinfo(dst_np).max
        if src.is_bool or (np.iinfo(src_np).min >= lo and np.iinfo(src_np).max <= hi):
            return dst_np.type           # widening: exact
    # narrowing ints wrap: numpy's astype does it
    return lambda x: np.asarray(x, dtype=src_np).astype(dst_np)[()]


def float_to_int(x, d: dt.DType):
    """A float scalar as integer dtype ``d``, as numpy on x86 (``numpy_eval.float_to_int``)."""
    from .numpy_eval import float_to_int as vec
    return vec(np.asarray(x), d)[()]


def make_shl(d: dt.DType):
    """``a << b`` in ``d`` (wrapping; the amount is in [0, bits), which the frontend ensures)."""
    return lambda a, b: make_value(int(a) << int(b), d)


def make_bitcast(src: dt.DType, dst: dt.DType):
    """The bits of a ``src`` value as a ``dst`` value (equal item sizes)."""
    s, t = src.np, dst.np
    return lambda x: np.asarray(x, dtype=s).view(t)[()]


def make_int_div(d: dt.DType):
    """True division with an integer result type (computed in float64, then cast)."""
    cast = make_cast(dt.float64, d)
    return lambda a, b: cast(np.float64(a) / np.float64(b))


def make_math(op: str, d: dt.DType):
    """Unary math in ``d``: rsqrt/sigmoid of 16-bit floats run in float32 and round once
    (as numpy_eval does); erf goes through math.erf in float64."""
    out = make_cast(dt.float64, d) if d is not dt.bfloat16 else (lambda x: round_bf16(x))
    if op == "erf":
        return lambda x: out(math.erf(float(x)))
    wide = d.bits == 16
    t = np.float32 if wide else d.np.type
    one = t(1)
    rnd = (round_bf16 if d is dt.bfloat16 else np.float16) if wide else None
    if op == "rsqrt":
        f = (lambda x: one / np.sqrt(t(x)))
    elif op == "sigmoid":
        f = (lambda x: one / (one + np.exp(-t(x))))
    else:
        raise InternalCompilerError(f"no scalar helper for {op}")
    if rnd is None:
        return f
    return lambda x: rnd(f(x))


# ----------------------------------------------------------------- memory
def alloc(shape, np_dtype, name):
    """A fresh temporary, poisoned (NaN / a junk integer) so that reads before writes show."""
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise InternalCompilerError(f"allocation of buffer {name!r} with negative shape {shape}")
    kind = np.dtype(np_dtype).kind
    fill = np.nan if kind == "f" else True if kind == "b" else 0x5A
    return np.full(shape, fill, dtype=np_dtype)


def oob(kernel, what, buf, idx, shape):
    """Raise ``OutOfBounds`` for an access of ``buf`` at ``idx`` outside ``shape``."""
    idx = tuple(int(i) if isinstance(i, (int, np.integer)) else i for i in idx)
    raise OutOfBounds(f"{what} of buffer {buf!r} at index {idx} is outside its shape "
                      f"{tuple(shape)} (in kernel {kernel!r}): a missing or wrong guard")


def stride_of(arr, dim, kernel, name=None):
    """Stride of ``arr`` along ``dim`` in elements; a view whose byte stride is not a whole
    number of elements is the user's ArgumentError (the cpu backend's message)."""
    s = arr.strides[dim]
    if s % arr.itemsize:
        from ..errors import ArgumentError
        raise ArgumentError(f"{'argument ' + repr(name) if name else 'an argument'} of kernel "
                            f"{kernel!r} has a stride of {s} bytes, which is not a multiple of "
                            f"its item size {arr.itemsize}",
                            hint="pass a copy (np.ascontiguousarray) of this view")
    return s // arr.itemsize


def bad_shape(kernel, buf, got, want):
    raise InternalCompilerError(f"kernel {kernel!r}: argument {buf!r} has shape {tuple(got)} "
                                f"but the lowered IR expects {tuple(int(w) for w in want)}")


def intrinsic(name):
    raise NotImplementedError(f"the IR interpreter cannot execute the intrinsic {name!r} "
                              f"(tensor-core intrinsics need the cuda backend)")


#: names every generated module sees
GLOBALS = {
    "np": np, "math": math, "_sel": sel, "_fmin": fmin, "_fmax": fmax,
    "_ifloordiv": ifloordiv, "_imod": imod, "_rb": round_bf16, "_alloc": alloc, "_oob": oob,
    "_stride": stride_of, "_bad_shape": bad_shape, "_intrinsic": intrinsic,
}
