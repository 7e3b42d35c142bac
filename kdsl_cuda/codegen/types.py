"""kdsl dtypes -> CUDA C++ types and literals (no headers: the typedefs live in the prelude).

16-bit floats have two types: in memory (buffers, parameters) the raw 16 bits (``uint16_t``),
in registers a ``float`` holding a value rounded to the 16-bit type after every operation
(numpy's float16 semantics; bfloat16 rounds to nearest even like the interpreter).
``ctype`` is the register type, ``stype`` the memory type; ``load``/``store``/``rounded``
wrap expression text with the prelude's conversions.
"""
from __future__ import annotations

import math

import numpy as np

from kdsl import dtypes as dt
from kdsl.errors import BackendCompileError

#: the line that marks a module needing the sm_90a target (Hopper's wgmma, codegen/wgmma.py;
#: here so that the build reads it without importing the tensor-core code generators)
SM90A_MARK = "#define KD_NEEDS_SM90A 1"

#: C type of each supported dtype (the prelude typedefs the fixed-width names)
_CTYPES = {
    dt.float32: "float", dt.float64: "double", dt.bool_: "bool",
    dt.int8: "int8_t", dt.int16: "int16_t", dt.int32: "int32_t", dt.int64: "int64_t",
    dt.uint8: "uint8_t", dt.uint16: "uint16_t", dt.uint32: "uint32_t", dt.uint64: "uint64_t",
}

#: dtypes whose arithmetic C++ promotes to int: results are cast back to wrap like numpy
SMALL_INTS = frozenset({dt.int8, dt.int16, dt.uint8, dt.uint16})


#: 16-bit floats: (to memory, from memory, round a float to the type) prelude helpers
_HALF = {dt.float16: ("kd_f2h", "kd_h2f", "kd_rh"), dt.bfloat16: ("kd_f2bf", "kd_bf2f", "kd_rbf")}


#: id(DType) -> ``ctype`` of it, for kdsl's own (interned) dtypes: the printer asks for every
#: node, and a DType hashes in Python
CTYPE_BY_ID = {id(d): ("float" if d in _HALF else t) for d, t in
                list(_CTYPES.items()) + [(h, "float") for h in _HALF]}


def ctype(d) -> str:
    """The C type of dtype ``d``'s values in registers (16-bit floats: ``float``)."""
    t = CTYPE_BY_ID.get(id(d))
    if t is not None:
        return t
    if d in _HALF:
        return "float"
    t = _CTYPES.get(d)
    if t is None:
        raise BackendCompileError(f"the cuda backend does not generate {d.name} code (use a "
                                  "float, integer or bool dtype)")
    return t


def stype(d) -> str:
    """The C type of dtype ``d``'s elements in memory (16-bit floats: their raw bits)."""
    return "uint16_t" if d in _HALF else ctype(d)


def is_half(d) -> bool:
    return d in _HALF


def load(d, text: str) -> str:
    """A memory element ``text`` of dtype ``d`` as a register value."""
    return f"{_HALF[d][1]}({text})" if d in _HALF else text


def store(d, text: str) -> str:
    """A register value ``text`` of dtype ``d`` in its memory form.  A value already rounded to
    the 16-bit type (``kd_rh(x)``: a cast's result) is converted from ``x`` itself: the same
    bits (rounding a value of the type again changes nothing, NaNs keep sign and payload),
    two conversions fewer per element."""
    if d not in _HALF:
        return text
    inner = _unwrap(text, _HALF[d][2])
    return f"{_HALF[d][0]}({text if inner is None else inner})"


def value_only(text: str) -> str:
    """``text`` (a float register value) with an exact float16 -> float conversion of its
    outermost call (``kd_h2f(x)``, ``((float)(kd_h2f(x)))``, a rounding ``kd_rh(x)``) made
    value-only (``kd_h2fv(x)``, ``kd_h2fv(kd_f2h(x))``:
    one ``cvt``, a NaN's payload not kept), for an operand of an operator whose NaN result
    is canonical anyway (expr.py ``_VALUE_OPS``); any other text as it is."""
    t = text
    group = _unwrap(t, "")
    if group is not None and group.startswith("(float)"):
        t = _unwrap(group[len("(float)"):], "") or t
    inner = _unwrap(t, "kd_h2f")
    if inner is not None:
        return f"kd_h2fv({inner})"
    inner = _unwrap(t, "kd_rh")     # a float rounded to float16: its bits, back by value
    return text if inner is None else f"kd_h2fv(kd_f2h({inner}))"


def _unwrap(text: str, fn: str) -> str | None:
    """``x`` when ``text`` is exactly ``fn(x)`` (one call around the whole text), else None."""
    if not (text.startswith(fn + "(") and text.endswith(")")):
        return None
    depth = 0
    for pos in range(len(fn), len(text)):
        depth += {"(": 1, ")": -1}.get(text[pos], 0)
        if depth == 0 and pos != len(text) - 1:
            return None     # fn(a) op (b): the first call closes early
    return text[len(fn) + 1:-1]


def rounded(d, text: str) -> str:
    """A float result ``text`` of an operation of dtype ``d`` (rounded when ``d`` is 16-bit)."""
    return f"{_HALF[d][2]}({text})" if d in _HALF else text


def literal(value, d) -> str:
    """A C literal of ``value`` in dtype ``d`` (exact for every value of the dtype)."""
    if d.is_bool:
        return "true" if value else "false"
    if d.is_float:
        v = float(value)
        single = d is not dt.float64
        if d is dt.float16:
            with np.errstate(over="ignore"):
                v = float(np.float16(v))
        elif d is dt.bfloat16:
            v = _bf16(v)
        if math.isnan(v):
            return "__int_as_float(0x7fc00000)" if single else "__longlong_as_double(0x7ff8000000000000LL)"
        if math.isinf(v):
            pos = "__int_as_float(0x7f800000)" if single else "__longlong_as_double(0x7ff0000000000000LL)"
            return pos if v > 0 else f"(-{pos})"
        if single:
            v = float(np.float32(v))
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"{text}f" if single else text
    v = int(value)
    if d is dt.int64:
        if v == -(1 << 63):
            return "(-9223372036854775807LL - 1)"
        return f"{v}LL" if v >= 0 else f"({v}LL)"
    if d is dt.uint64:
        return f"{v}ULL"
    if d is dt.int32:
        if v == -(1 << 31):
            return "(-2147483647 - 1)"
        return str(v) if v >= 0 else f"({v})"
    if d is dt.uint32:
        return f"{v}U"
    return f"(({ctype(d)}){v})"


def is_index(d) -> bool:
    return d == dt.index


def _bf16(x: float) -> float:
    """``x`` rounded to float32 then to the nearest bfloat16, ties to even (the interpreter's
    ``round_bf16``)."""
    from kdsl.numerics.numpy_eval import round_bf16
    with np.errstate(over="ignore"):
        return float(round_bf16(np.float32(x)))
