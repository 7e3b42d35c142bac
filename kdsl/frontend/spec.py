"""Argument specs for tracing: what stands for an array or a scalar argument.

``TensorSpec`` is public as ``kd.TensorSpec``: it stands for an array argument
in ``kernel.lower``/``kernel.source`` and is what dispatch builds from real
arrays.  Shape entries are ints (static), strings (a named symbolic size: the
same name means the same size) or None (a fresh symbolic size).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError


def user_dtype(x) -> dt.DType:
    """``x`` as a kdsl dtype, or a DTypeError listing the supported ones."""
    try:
        return dt.as_dtype(x)
    except TypeError as e:
        raise DTypeError(str(e), hint="use one of kd.float16, bfloat16, float32, float64, "
                                      "int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
                                      "bool_") from None


@dataclass(frozen=True, init=False)
class TensorSpec:
    """An array argument: ``shape`` (ints, names or None), ``dtype``, layout class."""

    shape: tuple
    dtype: dt.DType
    contiguous: bool = True

    def __init__(self, shape, dtype, contiguous: bool = True):
        if isinstance(shape, (int, str)) or shape is None:
            shape = (shape,)
        shape = tuple(int(s) if isinstance(s, (int, np.integer)) else s for s in shape)
        for s in shape:
            if not (s is None or isinstance(s, (int, str))):
                raise TypeError(f"TensorSpec shape entries are ints, names or None, got {s!r}")
            if isinstance(s, int) and s < 0:
                raise ValueError(f"TensorSpec shape entries must be >= 0, got {s}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", user_dtype(dtype))
        object.__setattr__(self, "contiguous", bool(contiguous))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def from_array(cls, a, *, specialize: bool = False) -> "TensorSpec":
        """The spec of a real array: symbolic sizes unless ``specialize``."""
        a_shape = tuple(a.shape)
        flags = getattr(a, "flags", None)
        contig = bool(flags["C_CONTIGUOUS"]) if flags is not None else True
        shape = a_shape if specialize else (None,) * len(a_shape)
        return cls(shape, a.dtype, contig)


@dataclass(frozen=True, init=False)
class ScalarSpec:
    """A Python scalar argument: symbolic of ``dtype`` (int64/float64/bool) or a constant ``value``."""

    dtype: dt.DType
    value: object = None

    def __init__(self, dtype, value=None):
        object.__setattr__(self, "dtype", user_dtype(dtype))
        object.__setattr__(self, "value", value)

    @classmethod
    def from_value(cls, v, constant: bool = False) -> "ScalarSpec":
        """The spec of a Python scalar (bool -> bool, int -> int64, float -> float64)."""
        d = dt.bool_ if isinstance(v, (bool, np.bool_)) else dt.int64 if isinstance(
            v, (int, np.integer)) else dt.float64
        return cls(d, v if constant else None)
