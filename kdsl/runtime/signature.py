"""Call signatures: what a compiled specialisation of a kernel depends on.

On a cache miss the arguments give a ``Signature`` (validated, with kdsl dtypes), which gives
the trace specs: per array its dtype, rank, size-1 dims (the whole shape with ``specialize``),
layout class and Python type; per scalar its kind (numpy scalars are strong, as in numpy 2)
or, for ``constants`` and None, its value; per ``out=`` array its layout class.  Backends with
``size_classes`` (cuda) also key each dim's bit length (``size_classes``): one compiled kernel
serves the sizes within a power of two.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError
from .arrays import array_info

_PY_SCALARS = {bool: dt.bool_, int: dt.int64, float: dt.float64}


# ----------------------------------------------------------------- size classes (hot path)
def size_classes(args) -> tuple:
    """Per argument, the bit lengths of an array's dims (``()`` for scalars and constants)."""
    out = []
    for a in args:      # (a TensorSpec's named dims have no size: None)
        sh = getattr(a, "shape", None)
        out.append(() if sh is None else tuple([int(s).bit_length() if type(s) is int or
                                                isinstance(s, np.integer) else None for s in sh]))
    return tuple(out)


def size_range(cls: int) -> tuple:
    """The sizes a dim of bit length ``cls`` can have: ``(lo, hi)``."""
    return (0, 0) if cls == 0 else (1 << (cls - 1), (1 << cls) - 1)


# ----------------------------------------------------------------- signatures
@dataclass(frozen=True)
class ArraySig:
    """An array argument: ``shape`` entries are 1 (static), None (symbolic) or ints (specialized)."""

    dtype: dt.DType
    shape: tuple
    contiguous: bool
    kind: type = np.ndarray

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class ScalarSig:
    """A scalar argument; ``value`` is set for compile-time constants.  ``strong``: a numpy
    scalar (promotes by its dtype), not a Python one."""

    dtype: dt.DType
    value: object = None
    constant: bool = False
    strong: bool = False


@dataclass(frozen=True)
class ConstSig:
    """A compile-time constant argument (listed in ``constants``, or None): traced as its value.

    ``kind`` is the value's type, so that ``1``, ``1.0``, ``True`` and ``np.float32(1)``
    (equal as Python values) trace separately."""

    value: object
    kind: type = None


@dataclass(frozen=True)
class Signature:
    """Everything a compiled specialisation depends on (hashable)."""

    params: tuple            # ArraySig | ScalarSig, in call order
    out_contiguous: tuple = ()   # per output, when out= was given; () = allocated (contiguous)
    specialize: bool = False
    size_classes: tuple = ()     # per param: dims' bit lengths (size-classed backends), or ()

    def specs(self) -> list:
        """The trace specs (kdsl.frontend.spec TensorSpec/ScalarSpec), one per parameter."""
        from ..frontend.spec import ScalarSpec, TensorSpec
        out = []
        for p in self.params:
            if isinstance(p, ArraySig):
                out.append(TensorSpec(p.shape, p.dtype, contiguous=p.contiguous))
            elif isinstance(p, ConstSig):
                out.append(p.value)
            else:
                out.append(ScalarSpec(p.dtype, value=p.value if p.constant else None,
                                      weak=not p.strong))
        return out

    def describe(self) -> str:
        """Short human form, e.g. ``(float32[n, 1] strided, int)``."""
        parts = []
        for p in self.params:
            if isinstance(p, ArraySig):
                dims = ", ".join("?" if s is None else str(s) for s in p.shape)
                parts.append(f"{p.dtype.name}[{dims}]" + ("" if p.contiguous else " strided"))
            elif isinstance(p, ConstSig):
                parts.append(repr(p.value))
            else:
                parts.append(f"{p.dtype.name}={p.value!r}" if p.constant else p.dtype.name)
        return "(" + ", ".join(parts) + ")"


MASKED_HINT = ("pass a plain array: a.filled(fill_value) to replace the masked elements, or "
               "a.data to ignore the mask")


def masked_message(what: str) -> str:
    """The error text for a numpy masked array, which kdsl would silently read without its mask."""
    return (f"{what} is a numpy masked array: kdsl kernels read and write plain arrays and would "
            "ignore the mask")


def signature_from_args(args, names, constants, specialize, out, loc=None,
                        classes: bool = False) -> Signature:
    """Validate the arguments of a call and build its Signature (the cache-miss path)."""
    params = []
    for a, name in zip(args, names):
        if name in constants:
            try:
                hash(a)
            except TypeError:
                raise ArgumentError(f"constant argument {name!r} must be hashable, got "
                                    f"{type(a).__name__}", hint="pass a tuple instead of a list",
                                    loc=loc) from None
            params.append(ConstSig(a, type(a)))
            continue
        if a is None:
            params.append(ConstSig(None, type(None)))
            continue
        if isinstance(a, (bool, int, float, np.generic)):
            try:
                d = _PY_SCALARS.get(type(a)) or dt.as_dtype(a.dtype)
            except TypeError as e:
                raise ArgumentError(f"argument {name!r}: {e}", loc=loc, hint="pass a Python "
                                    "or numpy scalar of a supported dtype") from None
            params.append(ScalarSig(d, strong=type(a) not in _PY_SCALARS))
            continue
        # numpy.ma loads lazily (~50 ms): while it is not imported no masked array exists
        if "numpy.ma" in sys.modules and isinstance(a, np.ma.MaskedArray):
            raise ArgumentError(masked_message(f"argument {name!r}"), hint=MASKED_HINT, loc=loc)
        info = array_info(a)
        if info is None:
            raise ArgumentError(f"argument {name!r} must be an array or a Python scalar, got "
                                f"{type(a).__name__}", loc=loc, hint="pass a numpy array "
                                "(np.asarray(x)) or an array with __cuda_array_interface__ / DLPack")
        npd, shape, contiguous = info
        try:
            d = dt.as_dtype(npd)
        except TypeError as e:
            raise ArgumentError(f"argument {name!r} has unsupported dtype {npd}", loc=loc,
                                hint=str(e).split("; ")[-1] + f"; convert it first, e.g. "
                                f"{name}.astype(np.float32)") from None
        dims = tuple(int(s) for s in shape) if specialize else tuple(1 if s == 1 else None
                                                                    for s in shape)
        params.append(ArraySig(d, dims, bool(contiguous), type(a)))
    outs = ()
    if out is not None:
        outs = tuple(bool(array_info(o)[2]) if array_info(o) else True
                     for o in (out if isinstance(out, tuple) else (out,)))
    return Signature(tuple(params), outs, bool(specialize),
                     size_classes(args) if classes else ())


def signature_from_specs(specs, out_contiguous=()) -> Signature:
    """A Signature for ``kernel.lower``/``source`` given TensorSpec/ScalarSpec objects."""
    params = []
    for s in specs:
        if hasattr(s, "shape") and hasattr(s, "contiguous"):
            params.append(ArraySig(dt.as_dtype(s.dtype), tuple(s.shape),
                                   bool(getattr(s, "contiguous", True))))
        elif not (hasattr(s, "dtype") and hasattr(s, "value")):
            params.append(ConstSig(s, type(s)))  # a constant's value, given directly
        else:
            v = getattr(s, "value", None)
            params.append(ScalarSig(dt.as_dtype(s.dtype), v, v is not None,
                                    not getattr(s, "weak", True)))
    return Signature(tuple(params), tuple(out_contiguous))
