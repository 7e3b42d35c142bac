"""``np.gcd`` / ``np.lcm`` inside kernels: a bounded Euclid loop, as a scan.

numpy's rules (``npy_gcd``/``npy_lcm``): integers only (bools, floats and bfloat16 are
refused, as numpy has no loop for them); both work on the magnitudes, so
``gcd(-4, 6) == 2``; ``gcd(0, 0) == 0``; the magnitude of the type's minimum is taken as
unsigned (``gcd(int8(-128), 0)`` is 128, which wraps to -128 in int8, as in numpy);
``lcm(a, b) = |a| // gcd * |b|`` wraps in the result type, and is 0 when either is 0.

Euclid's remainder sequence ``r0 = |a|, r1 = |b|, r[t] = r[t-2] % r[t-1]`` (``r[t-2]``
once ``r[t-1]`` is 0, so the tail alternates ``g, 0, g, 0``) reaches 0 within the
Fibonacci bound of Lamé's theorem: fewer than ``steps(bits)`` terms for magnitudes below
``2**bits``.  It is a ``kd.scan`` along one extra, trailing axis of that fixed length
(every element runs the same trip count; the other axes stay parallel), computed in
uint64; ``gcd = r[L-1] + r[L-2]`` (one of the two is 0).
"""
from __future__ import annotations

from functools import lru_cache

from .. import dtypes as dt
from ..errors import DTypeError, KernelError
from ..ir import make as mk
from ..ir import nodes as n
from .array import Array  # noqa: I001  (array first: it completes ops' import cycle)
from . import ops


@lru_cache(maxsize=None)
def steps(bits: int) -> int:
    """The length of the remainder sequence that always ends in ``g, 0`` (or ``0, g``) for
    magnitudes below ``2**bits``: the Fibonacci numbers up to ``2**bits`` (Lamé's bound on the
    divisions), plus the two starting terms, a swap step (``a < b``) and one more term."""
    a, b, k = 1, 2, 1
    while b <= 2 ** bits:
        a, b, k = b, a + b, k + 1
    return k + 4


def _operands(name: str, x, y):
    x, y = ops.asarray(x), ops.asarray(y)
    from . import context
    from .stages import free_axes
    ctx = context.current()
    for a in (x, y):
        if a.ndim == 0 and free_axes(ctx, a.at(())):
            raise KernelError(f"np.{name} of a value inside a kd.compute body is not supported: "
                              "its Euclid loop is a scan stage of its own",
                              hint=f"apply np.{name} to whole arrays outside kd.compute "
                                   f"(g = np.{name}(A, B)) and read g[i] inside")
    d = ops.result_dtype(getattr(__import__("numpy"), name), [x, y], f"np.{name}")
    if not d.is_int or d.is_bool:      # (bfloat16 promotes without numpy's type check)
        kinds = ", ".join(a.dtype.name for a in (x, y))
        raise DTypeError(f"np.{name} is not supported for operands of type {kinds}",
                         hint=f"np.{name} takes integer arrays (numpy has no float or bool "
                              f"loop): cast with .astype(kd.int64)")
    return x, y, d


def _magnitude(e: n.Expr, d: dt.DType) -> n.Expr:
    """``|e|`` as uint64, exact for the type's minimum (unsigned negation wraps)."""
    u = ops.cast_to(ops.cast_to(e, d), dt.uint64)
    if not d.is_signed:
        return u
    neg = mk.compare(n.CmpOp.LT, ops.cast_to(e, d), n.const(0, d))
    return mk.select(neg, mk.binary(n.BinOp.SUB, n.const(0, dt.uint64), u), u)


def _euclid(name: str, x, y):
    """(|x|, |y|, gcd) as uint64 arrays of the broadcast shape, and the result dtype."""
    from .scan import scan
    x, y, d = _operands(name, x, y)
    ax = ops.elementwise(name, [x, y], lambda a, b: _magnitude(a, d), dt.uint64)
    by = ops.elementwise(name, [x, y], lambda a, b: _magnitude(b, d), dt.uint64)
    L = steps(d.bits)
    nd = ax.ndim

    def init(*ix):
        rest = tuple(ix[:nd])
        return ops.where(ix[nd] == 0, ax[rest], by[rest])

    def update(s, *ix):
        rest, t = tuple(ix[:nd]), ix[nd]
        r1, r2 = s[rest + (t - 1,)], s[rest + (t - 2,)]
        live = r1 != 0
        return ops.where(live, r2 % ops.where(live, r1, 1), r2)

    seq = scan(tuple(ax.shape) + (L,), init, update, axis=nd, init_steps=2, dtype=dt.uint64,
               name=name)
    g = seq[(Ellipsis, L - 1)] + seq[(Ellipsis, L - 2)]
    return ax, by, g, d


def gcd(x, y) -> Array:
    """numpy's ``gcd`` (see the module docstring)."""
    _, _, g, d = _euclid("gcd", x, y)
    return ops.astype(g, d)


def lcm(x, y) -> Array:
    """numpy's ``lcm``: ``|x| // gcd * |y|`` wrapping in the result type, 0 when gcd is 0."""
    ax, by, g, d = _euclid("lcm", x, y)
    zero = g == 0
    r = ops.where(zero, 0, (ax // ops.where(zero, 1, g)) * by)
    return ops.astype(r, d)
