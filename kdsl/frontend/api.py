"""The frontend's public names, for ``kdsl/__init__.py`` to re-export (``from .frontend.api import *``)."""
from __future__ import annotations

from .compute import compute, reduce_axis
from .linalg import matmul
from .ops import (abs, astype, ceil, clip, cos, erf, exp, floor, isnan, log, maximum, minimum,
                  rsqrt, sigmoid, sin, sqrt, tanh, where)
from .reduce import Reducer, all, any, argmax, argmin, max, mean, min, prod, reducer, sum
from .spec import ScalarSpec, TensorSpec

__all__ = ["compute", "reduce_axis", "matmul", "abs", "astype", "ceil", "clip", "cos", "erf", "exp",
           "floor", "isnan", "log", "maximum", "minimum", "rsqrt", "sigmoid", "sin", "sqrt", "tanh",
           "where", "Reducer", "all", "any", "argmax", "argmin", "max", "mean", "min", "prod",
           "reducer", "sum", "ScalarSpec", "TensorSpec"]

from .array_funcs import KD_NAMES as _KD_NAMES  # noqa: E402  (issue 25: kd.einsum, kd.var, ...)
globals().update(_KD_NAMES)
__all__ += list(_KD_NAMES)
