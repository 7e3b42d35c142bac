"""``kd.random``: counter-based random numbers inside kernels (Philox-4x32-10).

Like Triton's ``tl.rand(seed, offset)``, every element is a pure function of a seed and
its own counter (its *offset*), so the same seed and offsets give the same bits on every
backend, in any schedule, with no state.  The generator is Random123's Philox-4x32 with 10
rounds (Salmon et al., SC'11), the one Triton, cuRAND and JAX use:

- key ``(k0, k1)`` = the seed's low and high 32 bits;
- counter ``(c0, c1, c2, c3)`` = the offset's low and high 32 bits, then ``c2``, ``c3``
  (``philox``'s arguments, 0 in the helpers below).  For offsets below 2**32 this is
  Triton's ``tl.randint4x(seed, offset)``.

Functions (``seed``: a Python int or a traced integer scalar, e.g. a kernel argument;
``offsets``: an integer array or scalar, broadcast like numpy):

- ``philox(seed, c0, c1=0, c2=0, c3=0)`` -> four uint32 arrays (the raw block);
- ``randint(seed, offsets)`` -> uint32 (the first word), ``randint4x`` -> all four;
- ``uniform(seed, offsets, dtype=float32)`` -> floats in [0, 1): the top bits of the first
  word (float16: 11, bfloat16: 8, float32: 24 bits) times 2**-bits; float64 takes 53 bits
  from the first two words;
- ``normal(seed, offsets, dtype=float32)`` -> standard normal floats by Box-Muller
  (``sqrt(-2 log u1) cos(2 pi u2)``, u1 in (0, 1] from word 0, u2 from word 1; float64 uses
  words 0-1 and 2-3; 16-bit types compute in float32).  Bits are identical on every backend;
  the floats differ by the few ulp of each backend's log/cos/sqrt;
- ``rand(seed, shape, dtype)`` / ``randn(seed, shape, dtype)``: ``uniform``/``normal`` at
  offsets ``0 .. prod(shape) - 1`` in row-major order.

Dropout: ``keep = kd.random.uniform(seed, offsets) >= p; y = kd.where(keep, x / (1 - p), 0)``
with a fresh seed per step.  A stream of numbers should use distinct offsets (or seeds):
the same (seed, offset) always gives the same number.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from .errors import KernelError
from .frontend.array import Array, index_expr  # noqa: I001  (array first: ops' import cycle)
from .frontend import ops
from .ir import make as mk
from .ir import nodes as n

__all__ = ["philox", "randint", "randint4x", "uniform", "normal", "rand", "randn"]

B = n.BinOp
_M0, _M1 = 0xD2511F53, 0xCD9E8D57          # Philox-4x32 multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85          # Weyl key increments
ROUNDS = 10
_U32, _U64 = dt.uint32, dt.uint64


def _c(v, d=_U32):
    return n.const(v & ((1 << d.bits) - 1), d)


def _u32_words(x, what: str):
    """The low and high 32-bit words of integer ``x`` (a Python int or an integer array)."""
    if isinstance(x, (bool, np.bool_)) or (isinstance(x, Array) and x.dtype.is_bool):
        raise KernelError(f"kd.random {what} must be an integer, got a bool",
                          hint="pass an int or an integer array")
    if isinstance(x, (int, np.integer)):
        v = int(x) & ((1 << 64) - 1)
        return ops.asarray(np.uint32(v & 0xFFFFFFFF)), ops.asarray(np.uint32(v >> 32))
    a = ops.asarray(x)
    if not a.dtype.is_int:
        raise KernelError(f"kd.random {what} must be integers, got {a.dtype.name} values",
                          hint="offsets and seeds are integer arrays or scalars "
                               "(e.g. .astype(kd.int64))")
    lo = ops.elementwise("philox_lo", [a], lambda e: ops.cast_to(ops.cast_to(e, _U64), _U32), _U32)
    hi = ops.elementwise("philox_hi", [a], lambda e: ops.cast_to(
        mk.binary(B.SHR, ops.cast_to(e, _U64), _c(32, _U64)), _U32), _U32)
    return lo, hi


def _mulhilo(m: int, x: n.Expr):
    wide = mk.binary(B.MUL, ops.cast_to(x, _U64), _c(m, _U64))
    hi = ops.cast_to(mk.binary(B.SHR, wide, _c(32, _U64)), _U32)
    return hi, mk.binary(B.MUL, x, _c(m))


def _round(words, keys):
    """One Philox round on four uint32 arrays (keys: two uint32 arrays)."""
    c0, c1, c2, c3 = words
    k0, k1 = keys

    def w0(x1, x2, k):
        hi, _ = _mulhilo(_M1, x2)
        return mk.binary(B.XOR, mk.binary(B.XOR, hi, x1), k)

    def w2(x0, x3, k):
        hi, _ = _mulhilo(_M0, x0)
        return mk.binary(B.XOR, mk.binary(B.XOR, hi, x3), k)

    return (ops.elementwise("philox", [c1, c2, k0], w0, _U32),
            ops.elementwise("philox", [c2], lambda x2: _mulhilo(_M1, x2)[1], _U32),
            ops.elementwise("philox", [c0, c3, k1], w2, _U32),
            ops.elementwise("philox", [c0], lambda x0: _mulhilo(_M0, x0)[1], _U32))


def _bump(k: Array, inc: int) -> Array:
    if inc % (1 << 32) == 0:
        return k
    return ops.elementwise("philox_key", [k], lambda e: mk.binary(B.ADD, e, _c(inc)), _U32)


def philox(seed, c0, c1=0, c2=0, c3=0) -> tuple:
    """The Philox-4x32-10 block of counter ``(c0, c1, c2, c3)`` (uint32 words; ``c0``... may
    be arrays, broadcast together) under key = ``seed``'s low and high 32 bits: four uint32
    arrays.  ``philox(0, 0)`` is Random123's known answer (0x6627e8d5, 0xe169c58d, ...)."""
    k0, k1 = _u32_words(seed, "seed")
    words = [_u32_words(c, "counter")[0] for c in (c0, c1, c2, c3)]
    for r in range(ROUNDS):     # round r's key: the seed's words plus r Weyl steps (one add)
        words = _round(words, (_bump(k0, r * _W0), _bump(k1, r * _W1)))
    return tuple(words)


def randint4x(seed, offsets) -> tuple:
    """Four uint32 arrays of random bits per offset (counter = the offset's two words, 0, 0)."""
    lo, hi = _u32_words(offsets, "offsets")
    return philox(seed, lo, hi)


def randint(seed, offsets) -> Array:
    """uint32 random bits per offset (the first Philox word, Triton's ``tl.randint``)."""
    return randint4x(seed, offsets)[0]


_UNIFORM_BITS = {dt.float16: 11, dt.bfloat16: 8, dt.float32: 24}


def _unit(word: Array, d: dt.DType, plus_one: bool = False) -> Array:
    """[0, 1) (``plus_one``: (0, 1]) from the top bits of a uint32 word, exact in ``d``."""
    bits = _UNIFORM_BITS[d]

    def build(e):
        top = mk.binary(B.SHR, e, _c(32 - bits))
        if plus_one:
            top = mk.binary(B.ADD, top, _c(1))
        return mk.binary(B.MUL, ops.cast_to(top, d), n.const(2.0 ** -bits, d))
    return ops.elementwise("uniform", [word], build, d)


def _unit53(w_hi: Array, w_lo: Array, plus_one: bool = False) -> Array:
    def build(a, b):
        top = mk.binary(B.OR, mk.binary(B.SHL, ops.cast_to(a, _U64), _c(21, _U64)),
                        ops.cast_to(mk.binary(B.SHR, b, _c(11)), _U64))
        if plus_one:
            top = mk.binary(B.ADD, top, _c(1, _U64))
        return mk.binary(B.MUL, ops.cast_to(top, dt.float64), n.const(2.0 ** -53, dt.float64))
    return ops.elementwise("uniform", [w_hi, w_lo], build, dt.float64)


def _float_dtype(dtype) -> dt.DType:
    d = dt.as_dtype(dtype)
    if not d.is_float:
        raise KernelError(f"kd.random floats are float16, bfloat16, float32 or float64, "
                          f"not {d.name}", hint="use kd.random.randint for integer bits")
    return d


def uniform(seed, offsets, dtype=dt.float32) -> Array:
    """Uniform floats in [0, 1), one per offset (see the module docstring for the bits)."""
    d = _float_dtype(dtype)
    w = randint4x(seed, offsets)
    return _unit53(w[0], w[1]) if d is dt.float64 else _unit(w[0], d)


def normal(seed, offsets, dtype=dt.float32) -> Array:
    """Standard normal floats, one per offset (Box-Muller on the offset's Philox block)."""
    d = _float_dtype(dtype)
    w = randint4x(seed, offsets)
    if d is dt.float64:
        u1, u2 = _unit53(w[0], w[1], plus_one=True), _unit53(w[2], w[3])
    else:
        u1, u2 = _unit(w[0], dt.float32, plus_one=True), _unit(w[1], dt.float32)
    c = u1.dtype
    r = ops.sqrt(ops.binary("multiply", ops.log(u1), np.array(-2.0, c.np)[()], strong=True))
    z = ops.binary("multiply", r, ops.cos(ops.binary(
        "multiply", u2, np.array(2 * math.pi, c.np)[()], strong=True)), strong=True)
    return z if c is d else ops.astype(z, d)


def _flat_offsets(shape) -> Array:
    if isinstance(shape, (int, np.integer, Array)):
        shape = (shape,)
    dims = tuple(index_expr(s, "size in kd.random's shape") for s in shape)

    def fn(idx):
        flat = n.const(0, dt.index)
        for i, d in zip(idx, dims):
            flat = mk.add(mk.mul(flat, d), i)
        return flat
    return Array(dims, dt.index, fn, op="offsets")


def rand(seed, shape, dtype=dt.float32) -> Array:
    """``uniform`` over an array of ``shape`` (offsets 0, 1, ... in row-major order)."""
    return uniform(seed, _flat_offsets(shape), dtype)


def randn(seed, shape, dtype=dt.float32) -> Array:
    """``normal`` over an array of ``shape`` (offsets 0, 1, ... in row-major order)."""
    return normal(seed, _flat_offsets(shape), dtype)


# ---------------------------------------------------------------- reference (pure numpy)
def philox_numpy(key0, key1, c0, c1=0, c2=0, c3=0, rounds: int = ROUNDS) -> tuple:
    """Philox-4x32 in numpy (uint32 arrays in and out): the reference the tests check against."""
    u32 = np.uint32
    c = [np.asarray(v).astype(np.uint64) & 0xFFFFFFFF for v in np.broadcast_arrays(c0, c1, c2, c3)]
    k0 = np.asarray(key0).astype(np.uint64) & 0xFFFFFFFF
    k1 = np.asarray(key1).astype(np.uint64) & 0xFFFFFFFF
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(rounds):
        p0 = c[0] * np.uint64(_M0)
        p1 = c[2] * np.uint64(_M1)
        c = [((p1 >> np.uint64(32)) ^ c[1] ^ k0) & mask, p1 & mask,
             ((p0 >> np.uint64(32)) ^ c[3] ^ k1) & mask, p0 & mask]
        k0 = (k0 + np.uint64(_W0)) & mask
        k1 = (k1 + np.uint64(_W1)) & mask
    return tuple(x.astype(u32) for x in c)
