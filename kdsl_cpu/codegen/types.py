"""kdsl dtypes in LLVM: the type a value has in registers and the type it has in memory.

| dtype          | value (register)  | storage (memory)            |
|----------------|-------------------|-----------------------------|
| bool           | i1                | i8 (numpy's 0/1 byte)       |
| int8..int64    | iN                | iN                          |
| uint8..uint64  | iN (unsigned ops) | iN                          |
| float16        | half              | half (LLVM promotes each op to float and rounds back,
|                |                   | which is numpy's float16 semantics)                      |
| bfloat16       | float, rounded to bfloat16 after every op | i16 (the top half of a float) |
| float32/64     | float / double    | float / double              |
"""
from __future__ import annotations

from llvmlite import ir

from kdsl import dtypes as dt
from kdsl.errors import InternalCompilerError

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_VALUE = {dt.bool_: I1, dt.int8: I8, dt.int16: I16, dt.int32: I32, dt.int64: I64, dt.uint8: I8,
          dt.uint16: I16, dt.uint32: I32, dt.uint64: I64,
          dt.float16: HALF, dt.bfloat16: FLOAT, dt.float32: FLOAT, dt.float64: DOUBLE}
_STORAGE = dict(_VALUE)
_STORAGE[dt.bool_] = I8
_STORAGE[dt.bfloat16] = I16


def value_type(d: dt.DType) -> ir.Type:
    """The LLVM type of a value of ``d`` in registers."""
    try:
        return _VALUE[d]
    except KeyError:
        raise InternalCompilerError(f"the cpu backend has no LLVM type for dtype {d!r}") from None


def storage_type(d: dt.DType) -> ir.Type:
    """The LLVM type of an element of ``d`` in memory (its size is numpy's itemsize)."""
    try:
        return _STORAGE[d]
    except KeyError:
        raise InternalCompilerError(f"the cpu backend has no LLVM type for dtype {d!r}") from None


def const(d: dt.DType, value) -> ir.Constant:
    """An LLVM constant of ``d``'s value type (bfloat16 constants are rounded first)."""
    t = value_type(d)
    if d.is_bool:
        return ir.Constant(t, int(bool(value)))
    if d.is_int:
        v = int(value) & ((1 << d.bits) - 1)           # two's complement wrap, as numpy
        if v >= 1 << (d.bits - 1):     # the same bits, written as LLVM's signed literal
            v -= 1 << d.bits
        return ir.Constant(t, v)
    if d is dt.bfloat16:
        return ir.Constant(t, bf16_round_py(float(value)))
    if d is dt.float16:   # LLVM rejects half literals that are not exactly representable
        import numpy as np
        with np.errstate(all="ignore"):
            return ir.Constant(t, float(np.float16(value)))
    return ir.Constant(t, float(value))


def bf16_round_py(x: float) -> float:
    """``x`` rounded to float32 and then to the nearest bfloat16 (ties to even), as a float."""
    import struct
    if x != x:
        return x
    try:
        (u,) = struct.unpack("<I", struct.pack("<f", x))
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]


def bf16_round(b: ir.IRBuilder, x):
    """Round the float ``x`` to the nearest bfloat16, ties to even, NaN kept (stays a float)."""
    u = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(u, I32(16)), I32(1))
    r = b.and_(b.add(b.add(u, I32(0x7FFF)), lsb), I32(0xFFFF0000 - (1 << 32)))
    rounded = b.bitcast(r, FLOAT)
    isnan = b.fcmp_unordered("uno", x, x)
    return b.select(isnan, x, rounded)


def to_storage(b: ir.IRBuilder, d: dt.DType, v):
    """A register value of ``d`` converted to its memory form."""
    if d.is_bool:
        return b.zext(v, I8)
    if d is dt.bfloat16:
        # values are already rounded to bfloat16: the top half is exact; keep NaNs quiet
        u = b.bitcast(v, I32)
        hi = b.trunc(b.lshr(u, I32(16)), I16)
        isnan = b.fcmp_unordered("uno", v, v)
        return b.select(isnan, b.or_(hi, I16(0x40)), hi)
    return v


def from_storage(b: ir.IRBuilder, d: dt.DType, v):
    """A memory element of ``d`` converted to its register form."""
    if d.is_bool:
        return b.icmp_unsigned("!=", v, I8(0))
    if d is dt.bfloat16:
        return b.bitcast(b.shl(b.zext(v, I32), I32(16)), FLOAT)
    return v


def compute_float(d: dt.DType) -> ir.Type:
    """The type 16-bit float math runs in (float); other floats compute in their own type."""
    return FLOAT if d.bits == 16 else value_type(d)


def widen(b: ir.IRBuilder, d: dt.DType, v):
    """A float value of ``d`` in its compute type (half -> float; bfloat16 is a float already)."""
    return b.fpext(v, FLOAT) if d is dt.float16 else v


def narrow(b: ir.IRBuilder, d: dt.DType, v):
    """A compute-type float back to ``d``'s value type, rounding once."""
    if d is dt.float16:
        return b.fptrunc(v, HALF)
    if d is dt.bfloat16:
        return bf16_round(b, v)
    return v
