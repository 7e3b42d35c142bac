"""Vectorised numpy evaluation of stage-graph expressions (the semantic oracle).

An expression is evaluated once over a whole index grid: every axis variable
is bound to an ``np.arange`` shaped to broadcast along its own dimension, so
one numpy op evaluates the node for every grid point.  Values carry the node's
dtype after every op (float16 rounds like numpy, integers wrap), except that
bfloat16 values are held as float32 arrays rounded to bfloat16 after each op.

Semantics shared with the loop-IR interpreter and the cpu backend: integers
wrap, ``//``/``%`` floor, integer division by zero gives 0, MIN/MAX propagate
NaN, float->int casts follow ``float_to_int`` (numpy's x86 results).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import InternalCompilerError
from ..ir import nodes as n
from .numpy_chunks import RANGES, view_read

_BF16_MASK = np.uint32(0xFFFF0000)


def round_bf16(x) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), kept as float32."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & _BF16_MASK).view(np.float32)
    return np.where(np.isnan(x), x, r)


def internal_np(d: dt.DType) -> np.dtype:
    """The numpy dtype that holds values of ``d`` during evaluation."""
    return np.dtype(np.float32) if d is dt.bfloat16 else d.np


def fix(x, d: dt.DType) -> np.ndarray:
    """``x`` as an array of dtype ``d`` (the cast after each op)."""
    x = np.asarray(x)
    if d is dt.bfloat16:
        return round_bf16(x)
    npd = d.np
    if x.dtype == npd:
        return x
    if x.dtype.kind == "f" and d.is_int:
        return float_to_int(x, d)
    return x.astype(npd)


_TWO31, _TWO63 = 2.0 ** 31, 2.0 ** 63


def _cvtt(t, bits: int):
    """x86's ``cvttsd2si`` of width ``bits`` on truncated float64 values ``t``: the value where
    it fits, else (NaN included) the "integer indefinite" INT_MIN; as an int64 array."""
    lim = 2.0 ** (bits - 1)
    ok = (t >= -lim) & (t < lim)
    return np.where(ok, t, -lim).astype(np.int64)


def float_to_int(x, d: dt.DType) -> np.ndarray:
    """Float values converted to integer dtype ``d`` exactly as numpy does on x86, on every
    backend (numpy's results for NaN, infinities and out-of-range values are the C casts its
    loops compile to, the oracle being numpy on this machine):

    - int8, int16, int32, uint8, uint16: through int32 (``cvttsd2si``), then wrapped: a value
      outside int32 (NaN, inf) gives INT32_MIN, i.e. 0 for the 8/16-bit types;
    - int64: the value if int64 holds it, else INT64_MIN;
    - uint64: values >= 2**63 convert as ``x - 2**63`` with the top bit flipped back, others
      as int64 (so NaN gives 2**63, inf 0, -1.5 gives 2**64 - 1);
    - uint32: the same at 32 bits (numpy's contiguous SIMD loop; from float16, numpy goes
      through int64 and keeps the low 32 bits).  numpy's strided/scalar float -> uint32 loop
      differs for values outside [-2**31, 2**32) (it truncates an int64): kdsl follows the
      contiguous ``astype``.
    """
    x = np.asarray(x)
    half = x.dtype == np.float16
    t = np.trunc(x.astype(np.float64))   # exact for every float dtype
    with np.errstate(invalid="ignore"):
        if d is dt.uint64:
            hi = t >= _TWO63
            top = (_cvtt(np.where(hi, t - _TWO63, 0.0), 64).astype(np.uint64)
                   ^ np.uint64(1 << 63))
            return np.where(hi, top, _cvtt(t, 64).astype(np.uint64))
        if d is dt.int64:
            return _cvtt(t, 64)
        if d is dt.uint32:
            if half:
                r = _cvtt(t, 64)
            else:
                hi = t >= _TWO31
                r = np.where(hi, _cvtt(np.where(hi, t - _TWO31, 0.0), 32) ^ (1 << 31), _cvtt(t, 32))
            return (r & 0xFFFFFFFF).astype(np.uint32)
        return _cvtt(t, 32).astype(d.np)


def to_internal(arr: np.ndarray, d: dt.DType) -> np.ndarray:
    """An input array in the evaluator's representation (bfloat16 -> float32, no copy otherwise)."""
    return np.asarray(arr).astype(np.float32) if d is dt.bfloat16 else np.asarray(arr)


# ----------------------------------------------------------------- ops
def _int_pow(a, b):
    """Integer power with C-like results for negative exponents (1, +-1 or 0)."""
    neg = b < 0
    r = np.power(a, np.where(neg, 0, b))
    if np.any(neg):
        one = np.ones_like(r)
        special = np.where(a == 1, one, np.where(a == -1, np.where(b % 2 == 0, one, -one), 0 * one))
        r = np.where(neg, special, r)
    return r


def _floordiv(a, b):
    if a.dtype.kind in "iu":
        return np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b)))
    return np.floor_divide(a, b)


def _mod(a, b):
    if a.dtype.kind in "iu":
        return np.where(b == 0, 0, np.remainder(a, np.where(b == 0, 1, b)))
    return np.remainder(a, b)


def _pow(a, b):
    return _int_pow(a, b) if a.dtype.kind in "iu" else np.power(a, b)


BINARY = {
    n.BinOp.ADD: np.add, n.BinOp.SUB: np.subtract, n.BinOp.MUL: np.multiply,
    n.BinOp.DIV: np.true_divide, n.BinOp.FLOORDIV: _floordiv, n.BinOp.MOD: _mod,
    n.BinOp.POW: _pow, n.BinOp.MIN: np.minimum, n.BinOp.MAX: np.maximum,
    n.BinOp.AND: np.bitwise_and, n.BinOp.OR: np.bitwise_or, n.BinOp.XOR: np.bitwise_xor,
    # shifts: the frontend guarantees an amount in [0, bits)
    n.BinOp.SHL: np.left_shift, n.BinOp.SHR: np.right_shift,
    n.BinOp.ATAN2: np.arctan2, n.BinOp.HYPOT: np.hypot, n.BinOp.FMOD: np.fmod,
    n.BinOp.COPYSIGN: np.copysign,
}
#: numpy's function for each libm-style UnOp (``nodes.LIBM_UNOPS``)
NUMPY_MATH = {n.UnOp.TAN: "tan", n.UnOp.SINH: "sinh", n.UnOp.COSH: "cosh", n.UnOp.ASIN: "arcsin",
              n.UnOp.ACOS: "arccos", n.UnOp.ATAN: "arctan", n.UnOp.ASINH: "arcsinh",
              n.UnOp.ACOSH: "arccosh", n.UnOp.ATANH: "arctanh", n.UnOp.LOG1P: "log1p",
              n.UnOp.EXPM1: "expm1", n.UnOp.LOG2: "log2", n.UnOp.LOG10: "log10",
              n.UnOp.EXP2: "exp2", n.UnOp.CBRT: "cbrt", n.UnOp.RINT: "rint", n.UnOp.TRUNC: "trunc"}
COMPARE = {
    n.CmpOp.EQ: np.equal, n.CmpOp.NE: np.not_equal, n.CmpOp.LT: np.less,
    n.CmpOp.LE: np.less_equal, n.CmpOp.GT: np.greater, n.CmpOp.GE: np.greater_equal,
}
_ERF = np.frompyfunc(math.erf, 1, 1)  # exact to float64 without scipy


def _in_compute(fn):
    """Run ``fn`` in the compute dtype (16-bit floats in float32) to round once at the end."""
    def run(x):
        if x.dtype.kind == "f" and x.dtype.itemsize < 4:
            return fn(x.astype(np.float32))
        return fn(x)
    return run


def _not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def _rounding(fn):
    def run(x):
        return x if x.dtype.kind in "iub" else fn(x)
    return run


UNARY = {
    n.UnOp.NEG: np.negative, n.UnOp.NOT: _not, n.UnOp.ABS: np.abs,
    n.UnOp.EXP: np.exp, n.UnOp.LOG: np.log, n.UnOp.SQRT: np.sqrt,
    n.UnOp.RSQRT: _in_compute(lambda x: 1 / np.sqrt(x)),
    n.UnOp.SIN: np.sin, n.UnOp.COS: np.cos, n.UnOp.TANH: np.tanh,
    n.UnOp.ERF: lambda x: np.asarray(_ERF(x.astype(np.float64)), dtype=np.float64),
    n.UnOp.SIGMOID: _in_compute(lambda x: 1 / (1 + np.exp(-x))),
    n.UnOp.ISNAN: lambda x: np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, np.bool_),
    n.UnOp.FLOOR: _rounding(np.floor), n.UnOp.CEIL: _rounding(np.ceil),
    **{op: _rounding(getattr(np, name)) for op, name in NUMPY_MATH.items()},
}


def bitcast(x, d: dt.DType) -> np.ndarray:
    """The bits of ``x`` as dtype ``d`` (equal item sizes; bfloat16 is refused by the frontend)."""
    return np.asarray(x).view(d.np)


# ----------------------------------------------------------------- evaluator
class ExprEval:
    """Evaluates expressions over a grid.  ``env``: Var -> array (or Python scalar);
    ``tensors``: graph Tensor -> array in internal representation; ``reduce_fn``
    evaluates a ``Reduce`` node (the stage evaluator supplies it)."""

    def __init__(self, env: dict, tensors: dict, reduce_fn=None):
        self.env, self.tensors, self.reduce_fn = env, tensors, reduce_fn
        self._table = {
            n.Var: self._var, n.Const: self._const, n.Binary: self._binary,
            n.Compare: self._compare, n.Unary: self._unary, n.Select: self._select,
            n.Cast: self._cast, n.TensorRead: self._tensor_read, n.Reduce: self._reduce,
        }

    def __call__(self, e: n.Expr) -> np.ndarray:
        fn = self._table.get(type(e))
        if fn is None:
            raise InternalCompilerError(f"the numpy backend cannot evaluate {type(e).__name__} "
                                        "(stage-graph expressions only)")
        return fn(e)

    def _var(self, e):
        try:
            v = self.env[e]
        except KeyError:
            v = self._axis(e)
        return v if isinstance(v, np.ndarray) else fix(v, e.dtype)

    def _axis(self, e):
        """A grid axis's values, made when first used (reads that slice never need them):
        an ``arange`` of the block's range along the axis's own grid dimension."""
        got = self.env.get(RANGES, {}).get(e)
        if got is None:
            raise InternalCompilerError(f"no value for variable {e.name}")
        pos, lo, hi = got
        shape = [1] * len(self.env["__dims__"])
        shape[pos] = hi - lo
        v = np.arange(lo, hi, dtype=internal_np(e.dtype)).reshape(shape)
        self.env[e] = v
        return v

    def _const(self, e):
        v = e.value
        if e.dtype.is_int and not dt.can_cast_value(v, e.dtype):
            # an out-of-range literal wraps like every other integer value
            bits = e.dtype.bits
            v &= (1 << bits) - 1
            if e.dtype.is_signed and v >= 1 << (bits - 1):
                v -= 1 << bits
        return fix(np.asarray(v, dtype=internal_np(e.dtype)), e.dtype)

    def _binary(self, e):
        a, b = self(e.a), self(e.b)
        return fix(BINARY[e.op](a, b), e.dtype)

    def _compare(self, e):
        return np.asarray(COMPARE[e.op](self(e.a), self(e.b)))

    def _unary(self, e):
        if e.op is n.UnOp.BITCAST:
            return bitcast(self(e.a), e.dtype)
        return fix(UNARY[e.op](self(e.a)), e.dtype)

    def _select(self, e):
        c = self(e.cond)
        # both sides are evaluated; reads in the side not taken were clamped into range
        # by kdsl.frontend.access when they could be out of it
        t, f = self(e.t), self(e.f)
        return fix(np.where(c, t, f), e.dtype)

    def _cast(self, e):
        a = self(e.a)
        if e.dtype.is_bool:
            return a != 0
        return fix(a, e.dtype)  # floats -> ints through float_to_int

    def _tensor_read(self, e):
        """A read as a view of the array where its indices allow (numpy_chunks.view_read: no
        copy, no index arrays, a broadcast stays a broadcast), else ``_read``; values come in
        the evaluator's representation (bfloat16 arguments convert here, one block at a time)."""
        arr = self.tensors.get(e.tensor)
        v = None
        if arr is not None and e.indices:
            v = view_read(arr, e.indices, self.env, len(self.env.get("__dims__", ())))
        if v is None:
            v = self._read(e)
        want = internal_np(e.tensor.dtype)
        return v if v.dtype == want else to_internal(v, e.tensor.dtype)

    def _read(self, e):
        try:
            arr = self.tensors[e.tensor]
        except KeyError:
            raise InternalCompilerError(f"tensor {e.tensor.name} is read before it is computed") from None
        idx = tuple(self(i) for i in e.indices)
        if not idx:
            return np.asarray(arr[()])
        if arr.size == 0 and e.tensor.empty_reads:
            # a read in a select's untaken branch (kdsl.frontend.access checked it is never
            # taken where the array is empty): any value, nothing to index
            return np.zeros(np.broadcast_shapes(*(np.shape(i) for i in idx)), arr.dtype)
        # kdsl.frontend.access proved, checked or clamped every index: one out of range here
        # is a kdsl bug (and numpy would wrap a negative one silently)
        for i in idx:
            if np.size(i) and np.min(i) < 0:
                self._out_of_range(e, arr)
        try:
            return np.asarray(arr[idx])
        except IndexError:
            self._out_of_range(e, arr)

    @staticmethod
    def _out_of_range(e, arr):
        raise InternalCompilerError(f"out-of-range read of tensor {e.tensor.name} "
                                    f"(shape {arr.shape}) that no index check caught")

    def _reduce(self, e):
        if self.reduce_fn is None:
            raise InternalCompilerError("a Reduce outside a reduction context")
        return self.reduce_fn(self, e)
