"""kdsl's dtypes and numpy's promotion rules, bfloat16 included.

``DType`` objects are interned singletons (compare with ``is`` or ``==``).
numpy dtypes, scalar types and names are accepted wherever a dtype is, through
``as_dtype``.  ``promote`` follows numpy (NEP 50: Python scalars are weak);
bfloat16 promotes like torch (bf16 with fp16 gives float32).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class DType:
    """A scalar element type: ``kind`` is 'f', 'i', 'u' or 'b'; ``bits`` its width."""

    name: str
    kind: str
    bits: int

    def __repr__(self) -> str:
        return f"kd.{self.name}"

    __str__ = lambda self: self.name  # noqa: E731

    def __reduce__(self):
        return (as_dtype, (self.name,))

    def __eq__(self, other):
        """Equal to itself and to the numpy dtype/type/name it stands for (``== np.float32``)."""
        if isinstance(other, DType):
            return self is other
        try:
            return as_dtype(other) is self
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.name)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def np(self) -> np.dtype:
        """The numpy dtype that stores this type (bfloat16 needs ``ml_dtypes``)."""
        if self is bfloat16:
            try:
                import ml_dtypes  # optional: only to hold bfloat16 arrays in numpy
            except ImportError:
                raise TypeError("bfloat16 arrays in numpy need the ml_dtypes package "
                                "(pip install ml_dtypes)") from None
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(_NP_NAMES[self.name])

    @property
    def compute(self) -> "DType":
        """The type arithmetic runs in: 16-bit floats compute in float32."""
        return float32 if self.kind == "f" and self.bits == 16 else self


float16 = DType("float16", "f", 16)
bfloat16 = DType("bfloat16", "f", 16)
float32 = DType("float32", "f", 32)
float64 = DType("float64", "f", 64)
int8 = DType("int8", "i", 8)
int16 = DType("int16", "i", 16)
int32 = DType("int32", "i", 32)
int64 = DType("int64", "i", 64)
uint8 = DType("uint8", "u", 8)
uint16 = DType("uint16", "u", 16)
uint32 = DType("uint32", "u", 32)
uint64 = DType("uint64", "u", 64)
bool_ = DType("bool", "b", 8)

#: the type of loop variables, shapes, strides and indices
index = int64
INT64_MAX = 2 ** 63 - 1

ALL = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32,
       uint64, bool_)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["bool_"] = bool_
_NP_NAMES = {d.name: d.name for d in ALL if d is not bfloat16}


def is_dtype_like(x) -> bool:
    try:
        as_dtype(x)
        return True
    except TypeError:
        return False


def as_dtype(x) -> DType:
    """Turn a kdsl dtype, numpy dtype/type or a name into a ``DType``."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    if x is bool:
        return bool_
    if x is int:
        return int64
    if x is float:
        return float64
    try:
        npd = np.dtype(x)
    except TypeError:
        npd = None
    if npd is not None:
        if npd.name in _BY_NAME:
            return _BY_NAME[npd.name]
        if npd.name == "bfloat16":
            return bfloat16
    supported = ", ".join(d.name for d in ALL)
    raise TypeError(f"dtype {x!r} is not supported by kdsl; supported dtypes: {supported}")


def _np_for_promotion(d: DType):
    return np.dtype("float16") if d is bfloat16 else d.np


def promote(*args) -> DType:
    """numpy's result type of dtypes and weak Python scalars (int/float/bool values).

    Python scalars (``True``, ``2``, ``2.0``) are weak: they take the array's type
    when they fit its kind (NEP 50).
    """
    strong = [as_dtype(a) for a in args if not isinstance(a, (bool, int, float))]
    weak = [a for a in args if isinstance(a, (bool, int, float))]
    if not strong:
        return as_dtype(np.result_type(*weak)) if weak else float64
    has_bf16 = any(d is bfloat16 for d in strong)
    if has_bf16:
        others = [d for d in strong if d is not bfloat16]
        if any(d.is_float for d in others):
            # bf16 with fp16 -> float32 (neither holds the other); with wider floats -> the wider
            wide = max((d.bits for d in others if d.is_float), default=16)
            base = float32 if wide <= 32 else float64
        else:
            base = bfloat16
        if base is bfloat16:
            return bfloat16
        strong = [base] + [d for d in others if not d.is_float]
    res = np.result_type(*[_np_for_promotion(d) for d in strong], *weak)
    return as_dtype(res)


def weak_like(value, dtype: DType):
    """The weak Python scalar kind of a kdsl dtype, for promotion of scalar args."""
    if dtype.is_bool:
        return True
    if dtype.is_int:
        return 0
    return 0.0


def can_cast_value(value, dtype: DType) -> bool:
    """Whether a Python scalar literal is representable in ``dtype`` (for int overflow checks)."""
    if dtype.is_int and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype.np)
        return info.min <= value <= info.max
    return True
