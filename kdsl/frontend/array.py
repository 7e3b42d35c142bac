"""The traced array: a lazy proxy ``(shape, dtype, indices -> Expr)``.

Elementwise ops, broadcasting, basic indexing, transposes, reshapes and casts
only compose index functions; stages are made by reductions, matmul,
``kd.compute`` and at the kernel's return.  ``at(indices)`` is memoised per
index tuple so a value used twice shares its sub-tree (no exponential growth
for ``x = x * x + x`` in a loop), and a proxy whose tree grows past
``MAX_TREE`` is materialised into a stage.

Every proxy also knows the ``depth`` of the expressions it builds (how many
ops are chained below it).  One whose depth would pass ``MAX_DEPTH`` computes
itself into a stage at once and reads that back, so no expression of a trace,
and no recursive walk over one (simplifier, printers, code generators, LLVM),
is ever deeper than that, whatever the length of the user's chain of ops.  A
value that depends on index-style axes (``x = x * A[i] + 1`` repeated inside a
``kd.compute`` lambda) is computed into a stage over those axes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import dtypes as dt
from ..errors import KernelError, KernelValueError, user_location
from ..ir import make as mk
from ..ir import nodes as n
from . import context

#: estimated tree size above which an elementwise operand is materialised
MAX_TREE = 2000
#: chained ops above which a lazy value is computed into a stage (bounds expression depth)
MAX_DEPTH = 64

_HINT_CF = ("use kd.where(cond, a, b) to select values; Python control flow may only "
            "depend on static shapes or constants (kd.kernel(constants=...))")


_HINT_SIZE = ("for an array of a traced size write kd.arange(n), kd.zeros(shape), np.zeros_like(x) "
              "or numpy's like= (np.arange(n, like=x)); Python control flow may only depend on "
              "static shapes or constants")


class NoAttributeError(KernelError, AttributeError):
    """A traced array has no such attribute (an AttributeError, so ``hasattr`` works)."""


class Array:
    """A traced tensor value (also 0-d values: elements, axes, sizes, scalar arguments)."""

    __array_priority__ = 1000

    def __init__(self, dims: tuple, dtype: dt.DType, fn: Callable, *, op: str, weak: bool = False,
                 size: int = 1, tensor=None, iv=None, pyvalue=None, depth: int = 1):
        self.dims = tuple(dims)         # index Exprs
        self.dtype = dtype
        self._fn = fn
        self._memo = {}
        self.weak = weak                # promotes like a Python scalar (NEP 50)
        self.op = op                    # last op, names the copy stage made at the return
        self.size_est = size            # estimated expression tree size
        self.tensor = tensor            # the graph Tensor this proxy reads verbatim, if any
        self.iv = iv                    # IterVar when this is an index-style axis
        self.pyvalue = pyvalue          # the Python scalar this stands for, if any
        self.materialized = None        # the stage-output proxy once computed into a stage
        self.depth = depth              # ops chained below this value (bounded by MAX_DEPTH)
        self.loc = user_location()
        if depth > MAX_DEPTH and context.active() is not None:
            self._spill()

    def _spill(self):
        """Become a read of a stage computing this value (keeps expressions shallow)."""
        out = _ops.spill(self)
        self._fn, self._memo = out._fn, {}
        self.tensor, self.size_est, self.depth = out.tensor, out.size_est, out.depth

    # ------------------------------------------------------------ core
    def at(self, idx: tuple) -> n.Expr:
        """The element expression at index expressions ``idx`` (memoised)."""
        try:
            return self._memo[idx]
        except KeyError:
            e = self._fn(idx)
            self._memo[idx] = e
            return e

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def shape(self) -> tuple:
        """Static sizes as ints, symbolic ones as 0-d traced int64 values."""
        return tuple(size_value(d) for d in self.dims)

    @property
    def size(self):
        return size_value(_prod(self.dims))

    @property
    def T(self):
        return self.transpose()

    def copy(self):
        """Values are immutable while tracing: a copy is the array itself."""
        return self

    def __repr__(self) -> str:
        from ..ir.printer import format_expr as expr_str
        return f"<traced {self.dtype.name} array shape=({', '.join(expr_str(d) for d in self.dims)})>"

    # ------------------------------------------------------------ untraceable Python
    def __bool__(self):
        raise KernelError("the truth value of a traced array is not known while tracing "
                          "(data-dependent control flow)", hint=_HINT_CF)

    def _no_scalar(self, what):
        """The Python value of a 0-d value known while tracing (a static size, e.g. once
        unified with a constant), else a KernelError with the hint that fits: a size known
        only at call time can be computed on in the kernel (``d ** -0.5``), data cannot."""
        value, size = _static_scalar(self)
        if value is not None:
            return value
        if size:
            from ..ir.printer import format_expr
            ctx = context.active()
            name = ctx.describe(self.at(())) if ctx else format_expr(self.at(()))
            raise KernelError(
                f"{what}() of the size {name}, which is only known when the kernel is called",
                hint="compute with it inside the kernel instead: d ** -0.5 for 1 / math.sqrt(d), "
                     "kd.sqrt(d) / kd.log(d) (strong float64: np.sqrt(d) too, which promotes "
                     "a float16 kernel to float64; d ** -0.5 stays weak), or use "
                     "@kd.kernel(specialize=True) so that shapes are static ints (scalar "
                     "arguments: kd.kernel(constants=...))")
        raise KernelError(f"{what}() of a traced value is not known while tracing", hint=_HINT_CF)

    def __int__(self):
        return int(self._no_scalar("int"))

    def __float__(self):
        return float(self._no_scalar("float"))

    def __complex__(self):
        return complex(self._no_scalar("complex"))

    def __index__(self):
        v = self._no_scalar("operator.index")
        if not isinstance(v, int) or isinstance(v, bool):
            raise KernelError(f"a {self.dtype.name} value is not an index",
                              hint="use an integer (a size or an int)")
        return v

    def __len__(self):
        if self.ndim == 0:
            raise KernelError("len() of a 0-d traced value", hint="use .shape on arrays")
        d = context.active().resolve(self.dims[0]) if context.active() else self.dims[0]
        if isinstance(d, n.Const):
            return int(d.value)
        raise KernelError("len() of an array with a symbolic first dimension is not known while "
                          "tracing", hint="use A.shape[0] (a traced size) instead of len(A), or "
                          "@kd.kernel(specialize=True) for static shapes")

    def __array__(self, dtype=None, copy=None):
        raise KernelError("a traced array has no values while tracing, so numpy cannot convert it",
                          hint="use kdsl/numpy operations on it (np.exp(x), x.sum(...)) instead of "
                               "np.asarray / np.array; " + _HINT_SIZE)

    def __iter__(self):
        raise KernelError("iterating over a traced array is not supported",
                          hint="index it (A[i]) or write the loop as kd.compute(shape, lambda i: ...)")

    def __setitem__(self, key, value):
        raise KernelError("traced arrays are immutable: item assignment is not supported",
                          hint="build the new values with kd.where(mask, new, old) or kd.compute")

    def __getattr__(self, name):
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise KernelError(f"ndarray method .{name}() is not supported on traced arrays",
                              hint="see the supported operations in kdsl's docs/kernels.md")
        if name.startswith("_"):   # protocol probes (hasattr(x, "__array_interface__")...)
            raise AttributeError(name)
        raise NoAttributeError(f"traced arrays have no attribute {name!r}",
                               hint="arrays have numpy's attributes and methods (.shape, .T, "
                                    ".sum(), .astype(...)); see kdsl's docs/kernels.md for the list")

    __hash__ = None


def _static_scalar(a: "Array"):
    """(Python value or None, whether ``a`` is a size expression: no data read, no axes)."""
    if a.ndim != 0:
        return None, False
    e = a.at(())
    ctx = context.active()
    if ctx is not None:
        e = ctx.resolve(e)
    from ..ir.visitor import collect
    data = collect(e, lambda x: type(x) in (n.TensorRead, n.Load, n.Reduce) or (
        type(x) is n.Var and ctx is not None and x in getattr(ctx, "ivs", {})))
    if data:
        return None, False
    from ..ir.simplify import simplify
    r = simplify(e)
    if isinstance(r, n.Const):
        return r.value, True
    return None, a.dtype.is_int or a.weak


def shallow(e: n.Expr, limit: int = 12) -> n.Expr:
    """A size or offset expression, simplified when it nests deeper than ``limit`` (a chain of
    slices of a symbolic size would otherwise nest one level per slice)."""
    stack = [(e, 0)]
    while stack:
        x, d = stack.pop()
        if d > limit:
            from ..ir.simplify import simplify
            return simplify(e)
        if type(x) is n.Binary:
            stack.append((x.a, d + 1))
            stack.append((x.b, d + 1))
    return e


def _prod(dims):
    out = mk.as_expr(1)
    for d in dims:
        out = mk.mul(out, d)
    return out


def size_value(d: n.Expr):
    """A size as the user sees it: an int if static, else a 0-d traced int64."""
    ctx = context.active()
    r = ctx.resolve(d) if ctx else d
    if isinstance(r, n.Const):
        return int(r.value)
    return Array((), dt.index, lambda _idx: d, op="shape", weak=True)


def from_tensor(t, op: str | None = None) -> Array:
    """A proxy that reads graph tensor ``t`` (an input or a stage output)."""
    return Array(t.shape, t.dtype, lambda idx: n.TensorRead(t.dtype, t, tuple(idx)),
                 op=op or (t.name if t.stage is not None else "copy"), tensor=t)


def scalar(e: n.Expr, *, weak: bool = False, op: str = "scalar", iv=None, pyvalue=None) -> Array:
    """A 0-d proxy for expression ``e``."""
    return Array((), e.dtype, lambda _idx: e, op=op, weak=weak, iv=iv, pyvalue=pyvalue)


def index_expr(x, what: str = "index") -> n.Expr:
    """An int, numpy integer or 0-d traced integer as an int64 expression."""
    if isinstance(x, (bool, np.bool_)):
        raise KernelError(f"a boolean is not a valid {what}", hint="use an int or a traced integer")
    if isinstance(x, (int, np.integer)):
        return n.const(int(x), dt.index)
    if isinstance(x, Array) and x.ndim == 0 and (x.dtype.is_int or x.dtype.is_bool):
        return mk.cast(x.at(()), dt.index)
    if isinstance(x, Array):
        raise KernelError(f"a {x.ndim}-d {x.dtype.name} array is not a valid {what}",
                          hint="sizes and indices are ints or 0-d traced integers")
    raise KernelError(f"{type(x).__name__} is not a valid {what}",
                      hint="sizes and indices are ints or 0-d traced integers")


def is_static(d: n.Expr) -> bool:
    ctx = context.active()
    return isinstance(ctx.resolve(d) if ctx else d, n.Const)


def static_value(d: n.Expr):
    ctx = context.active()
    r = ctx.resolve(d) if ctx else d
    return int(r.value) if isinstance(r, n.Const) else None


def norm_axis(axis, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``range(ndim)`` (negative counts from the end), else KernelValueError."""
    if isinstance(axis, Array) or not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise KernelError(f"{what} must be an int, got {type(axis).__name__}",
                          hint="pass a Python int (negative counts from the end)")
    a = int(axis)
    if not -ndim <= a < ndim:
        raise KernelValueError(f"{what} {a} is out of bounds for an array of dimension {ndim}",
                               hint=f"use an axis in range({-ndim}, {ndim})" if ndim else
                               "a 0-d array has no axes: use axis=None")
    return a % ndim if ndim else 0


from . import indexing as _indexing  # noqa: E402  (methods live in their own modules)
from . import ops as _ops  # noqa: E402

Array.__getitem__ = _indexing.getitem
Array.transpose = _indexing.transpose
Array.reshape = _indexing.reshape
Array.astype = lambda self, dtype: _ops.astype(self, dtype)
Array.view = lambda self, dtype=None, type=None: _ops.view(self, dtype, type)  # noqa: A002
_ops.install_operators(Array)
from . import array_funcs as _array_funcs  # noqa: E402,F401  (np.var, x.std()... register)
