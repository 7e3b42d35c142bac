"""kdsl: numpy-like Python functions compiled into kernels for pluggable backends.

Only public names live here (docs/kernels.md lists them).  They are imported lazily through the
module ``__getattr__`` so that ``import kdsl`` stays light (numpy only) and the
parts behind each name load when first used.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_FRONT = "kdsl.frontend.api"  # the frontend re-exports its public names there

#: public name -> (module, attribute); attribute None means the module itself.
#: The one table to fix when a name moves.
_LAZY = {
    # kernels and dispatch
    "kernel": ("kdsl.kernel", "kernel"),
    "Kernel": ("kdsl.kernel", "Kernel"),
    "backends": ("kdsl.backends", None),   # the package, callable: kd.backends() lists them
    "register_backend": ("kdsl.backends.registry", "register_backend"),
    "use_backend": ("kdsl.backends.registry", "use_backend"),
    "get_backend": ("kdsl.backends.registry", "get_backend"),
    # schedules
    "schedule": ("kdsl.schedule.hints", "schedule"),
    "intrin": ("kdsl.schedule.intrin", None),
    "random": ("kdsl.random", None),      # counter-based Philox random numbers
    "tune": ("kdsl.tune", None),          # autotuning: kd.tune.export / kd.tune.load (kdsl/tune)
    "dask": ("kdsl.dask", None),          # kernels on dask arrays (docs/scaling.md)
    # the cpu backend's thread count (process-wide, read at every call)
    **{name: ("kdsl.threads", name) for name in (
        "set_num_threads", "get_num_threads", "num_threads", "ThreadCountError")},
    # tracing: index style and numpy style
    **{name: (_FRONT, name) for name in (
        "compute", "reduce_axis", "reducer", "sum", "prod", "max", "min", "mean", "argmax",
        "argmin", "any", "all", "where", "maximum", "minimum", "clip", "exp", "log", "sqrt",
        "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "matmul", "TensorSpec", "ScalarSpec")},
    # sequential scans with carried state (TVM's te.scan) and the cumulative ops on them
    **{name: ("kdsl.frontend.scan", name) for name in (
        "scan", "cumsum", "cumprod", "cummax", "cummin")},
    "fori_loop": ("kdsl.frontend.fori", "fori_loop"),   # a loop over a run-time count
    # the online-softmax tuple reducer (running max, rescaled sum) the fusion streams with
    "online_softmax": ("kdsl.frontend.online_softmax", "online_softmax"),
    # numpy's ufuncs under numpy's names (kd.abs, kd.square, kd.left_shift...): every
    # kdsl.frontend.ufuncs.PUBLIC name the entries above do not already give
    **{name: ("kdsl.frontend.ufunc_public", name) for name in (
        "abs", "absolute", "acos", "acosh", "add", "arccos", "arccosh", "arcsin", "arcsinh",
        "arctan", "arctan2", "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
        "bitwise_count", "bitwise_invert", "bitwise_left_shift", "bitwise_not", "bitwise_or",
        "bitwise_right_shift", "bitwise_xor", "cbrt", "ceil", "conj", "conjugate", "copysign",
        "cosh", "deg2rad", "degrees", "divide", "divmod", "equal", "exp2", "expm1", "fabs",
        "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod", "frexp", "gcd", "greater",
        "greater_equal", "heaviside", "hypot", "invert", "isfinite", "isinf", "isnan",
        "lcm", "ldexp", "left_shift", "less", "less_equal", "log10", "log1p", "log2", "logaddexp",
        "logaddexp2",
        "logical_and", "logical_not", "logical_or", "logical_xor", "matvec", "mod", "modf",
        "multiply", "negative", "nextafter", "not_equal", "positive", "pow", "power",
        "rad2deg", "radians", "reciprocal", "remainder", "right_shift", "rint", "sign",
        "signbit", "sinh", "spacing", "square", "subtract", "tan", "true_divide", "trunc",
        "vecdot", "vecmat")},
    # errors
    **{name: ("kdsl.errors", name) for name in (
        "KdslError", "KernelError", "KernelValueError", "KernelIndexError", "ShapeError",
        "DTypeError", "IntegerOverflowError", "ArgumentError", "ScheduleError",
        "BackendNotInstalled", "BackendUnavailable",
        "BackendCompileError", "InternalCompilerError", "SourceLoc", "ScheduleWarning",
        "StaleGlobalWarning", "UnknownBackendError")},
    # dtypes
    **{name: ("kdsl.dtypes", name) for name in (
        "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
        "uint8", "uint16", "uint32", "uint64", "bool_", "DType")},
}

#: numpy's array functions (issue 25; kdsl/frontend/array_funcs.py KD_NAMES)
_LAZY.update({name: (_FRONT, name) for name in (
    "arange", "argsort", "around", "broadcast_arrays", "broadcast_to", "concat", "concatenate",
    "count_nonzero", "cumprod", "cumsum", "cumulative_prod", "cumulative_sum", "diff", "dot",
    "einsum", "empty", "empty_like", "expand_dims", "eye", "flip", "fliplr", "flipud", "full",
    "full_like", "hstack", "identity", "inner", "linspace", "meshgrid", "moveaxis", "nan_to_num",
    "ones", "ones_like", "outer", "pad", "ravel", "repeat", "roll", "round", "sort", "squeeze",
    "stack", "std", "swapaxes", "take", "take_along_axis", "tensordot", "tile", "tri", "tril",
    "triu", "unstack", "var", "vdot", "vstack", "zeros", "zeros_like",)})

__all__ = sorted(_LAZY)

# `kernel`, `backends` and `schedule` are also submodule names (kdsl/kernel.py,
# kdsl/backends/, kdsl/schedule/): bind them now, so that a later `import kdsl.kernel` (etc.)
# elsewhere cannot replace the public functions with the modules.  All are light.
# `backends` is the package itself, callable (kdsl/backends/__init__.py): `kd.backends()` and
# `kdsl.backends.interpreter` both work, in any import order.
# Compiling the methods of kdsl's dataclasses is most of this import (~0.8 ms a class): an
# earlier process's code objects are reused (kdsl/_dataclass_code.py).  config first: the
# table's location is read from it.
from . import config  # noqa: E402
from ._dataclass_code import install as _install_dataclass_code  # noqa: E402
_install_dataclass_code()
from . import backends  # noqa: E402
from .backends.registry import register_backend, use_backend  # noqa: E402
from .kernel import Kernel, kernel  # noqa: E402

try:
    from .schedule.hints import schedule  # noqa: E402
except Exception:  # not written yet / broken: resolved lazily (and loudly) on first use
    pass


def __getattr__(name: str):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'kdsl' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
