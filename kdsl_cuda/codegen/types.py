"""kdsl dtypes -> CUDA C++ types and literals (no headers: the typedefs live in the prelude)."""
from __future__ import annotations

import math

import numpy as np

from kdsl import dtypes as dt
from kdsl.errors import BackendCompileError

#: C type of each supported dtype (the prelude typedefs the fixed-width names)
_CTYPES = {
    "float32": "float", "float64": "double", "bool": "bool",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
}

#: dtypes whose arithmetic C++ promotes to int: results are cast back to wrap like numpy
SMALL_INTS = frozenset({"int8", "int16", "uint8", "uint16"})


def ctype(d) -> str:
    """The C type of dtype ``d``; 16-bit floats are not supported by this codegen yet."""
    t = _CTYPES.get(d.name)
    if t is None:
        raise BackendCompileError(
            f"the cuda backend does not generate {d.name} code yet (float16/bfloat16 storage with "
            "float32 math is planned: issue 10 item 1); use float32 or float64 for now")
    return t


def literal(value, d) -> str:
    """A C literal of ``value`` in dtype ``d`` (exact for every value of the dtype)."""
    if d.is_bool:
        return "true" if value else "false"
    if d.is_float:
        v = float(value)
        single = d.name == "float32"
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
    if d.name == "int64":
        if v == -(1 << 63):
            return "(-9223372036854775807LL - 1)"
        return f"{v}LL" if v >= 0 else f"({v}LL)"
    if d.name == "uint64":
        return f"{v}ULL"
    if d.name == "int32":
        if v == -(1 << 31):
            return "(-2147483647 - 1)"
        return str(v) if v >= 0 else f"({v})"
    if d.name == "uint32":
        return f"{v}U"
    return f"(({ctype(d)}){v})"


def is_index(d) -> bool:
    return d == dt.index
