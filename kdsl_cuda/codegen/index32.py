"""Which integer index expressions of a device kernel provably fit in 32 bits (issue 10).

Index arithmetic is int64 in the IR; on sm_90 every 64-bit IMAD/IADD costs two or more
instructions.  ``IndexWidths`` runs interval arithmetic over one kernel, with numbers only:
shape parameters range over the specialisation's ``LoweredFunc.size_hints`` (the dispatch key's
bit lengths), block/thread indices over the launch (grid expressions bounded the same way,
never past the hardware's limits), loop variables over their loops, lets over their values.
An int64 expression is *narrow* when it and every int64 sub-expression lie in [-2**31, 2**31):
the codegen prints it in ``int``.  Nothing without a bound is narrow: strides (run-time values
without hints), values loaded from memory (data), scalar arguments, shapes without hints.

The rules are those of ``kdsl.ir.bounds`` (corners for products, floor division monotone in
each operand, Python-sign modulo), on ints instead of symbolic bounds: every intermediate of
every printed index needs a bound, and one bottom-up walk with numbers gives them all, where
``bounds.interval`` would re-bound each sub-expression symbolically.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from kdsl import dtypes as dt
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
#: gridDim limits per axis (x, y, z) on every architecture kdsl targets
GRID_MAX = (INT32_MAX, 65535, 65535)
_AXIS = {"x": 0, "y": 1, "z": 2}
B = n.BinOp


def fits32(iv) -> bool:
    return iv is not None and iv[0] >= INT32_MIN and iv[1] <= INT32_MAX


def _hull(a, b):
    if a is None or b is None:
        return None
    return min(a[0], b[0]), max(a[1], b[1])


def _dtype_range(d):
    """The representable range of an integer dtype of at most 32 bits (else None)."""
    if d.is_bool:
        return 0, 1
    if d.is_int and d.bits <= 32:
        info = np.iinfo(d.np)
        return int(info.min), int(info.max)
    return None


def _floordiv(a, b):
    """Interval of Python ``a // b`` (0 where b == 0: the prelude's kd_sfloordiv)."""
    out = []
    if b[0] <= 0 <= b[1]:
        out.append(0)
    bs = [x for x in (b[0], b[1], -1, 1) if b[0] <= x <= b[1] and x != 0]
    as_ = [x for x in (a[0], a[1], -1, 0) if a[0] <= x <= a[1]]
    # a // b is monotone in a for b fixed, and in b on each sign of a and of b: corners
    out.extend(x // y for x in as_ for y in bs)
    return min(out), max(out)


def _mod(a, b):
    """Interval of Python ``a % b`` (0 where b == 0)."""
    if b[0] >= 1:
        if a[0] >= 0:
            if a[1] < b[0]:
                return a            # already below every divisor
            return 0, min(a[1], b[1] - 1)
        return 0, b[1] - 1
    if b[1] <= -1:
        return b[0] + 1, 0
    return min(b[0] + 1, 0), max(b[1] - 1, 0)


class IndexWidths:
    """The 32-bit proof for one ``DeviceKernel`` of ``func`` (see the module docstring).

    ``narrow(e)``: ``e`` (int64) and all its int64 sub-expressions fit in ``int``;
    ``declared32(v)``: loop/let variable ``v`` is declared ``int`` (every value it takes,
    loop end included, fits); ``scalar32(v)``: shape parameter ``v`` fits (copied into a
    ``const int`` local).  ``interval(e)``: inclusive (lo, hi) ints, or None."""

    def __init__(self, func: n.LoweredFunc, kernel: n.DeviceKernel, block: tuple):
        self.block = block
        self.grid = tuple(kernel.launch.grid)
        self._memo: dict = {}          # id(e) -> (e, interval): e kept alive, ids stay unique
        self._narrow: dict = {}
        self._pure: dict = {}          # id(e) -> (e, reads no memory)
        hints = {v: (int(lo), int(hi)) for v, lo, hi in getattr(func, "size_hints", ()) or ()}
        self._scalars32 = {id(v) for v in func.scalars if fits32(hints.get(v))}
        # ranges: Var -> (lo, hi) | None, every value it takes where used; _decl: the values
        # its C variable holds.  A Var bound by several loops gets the hull of its sites, and
        # ranges derived from it are recomputed (another walk) until nothing widens.
        self.ranges: dict = dict(hints)
        self._below: dict = {}         # Var -> Expr: 0 <= v < Expr wherever v is used
        for _ in range(_MAX_WALKS):
            self._decl, self._lets, self._changed = {}, {}, False
            self._below, self._sites = {}, set()
            self._walk(kernel.body)
            if not self._changed:
                break
            self._memo.clear()
            self._narrow.clear()
        else:                          # no fixed point: prove nothing about loop variables
            self.ranges = {v: None for v in self.ranges if v not in hints} | hints
            self._decl = {v: None for v in self._decl}
            self._memo.clear()
            self._narrow.clear()
        self._declared = {id(v) for v, r in self._decl.items()
                          if v.dtype == dt.index and fits32(r) and self._lets.get(v, True)}

    # ------------------------------------------------------------- variable ranges
    def _bind(self, v, use, decl) -> None:
        """Record one binding site of ``v``."""
        if v in self._decl:
            decl = _hull(self._decl[v], decl)
        self._decl[v] = decl
        old = self.ranges.get(v, ())
        new = use if old == () else _hull(old, use)
        if new != old:
            if old != ():
                self._changed = True  # uses already bounded with the narrower range
                self._memo.clear()
                self._narrow.clear()
            self.ranges[v] = new

    def _walk(self, s) -> None:
        t = type(s)
        if t is n.For:
            self._for(s)
        elif t is n.LetStmt:
            iv = self.interval(s.value)
            self._bind(s.var, iv, iv)
            ok = s.var.dtype == dt.index and self.narrow(s.value)
            self._lets[s.var] = self._lets.get(s.var, True) and ok
        for f in dataclasses.fields(s):
            x = getattr(s, f.name)
            if isinstance(x, n.Stmt):
                self._walk(x)
            elif isinstance(x, tuple):
                for y in x:
                    if isinstance(y, n.Stmt):
                        self._walk(y)

    def _for(self, s: n.For) -> None:
        lo = self.interval(s.min)
        if s.kind is n.ForKind.BOUND and not s.thread.is_vthread:
            reg, ax = s.thread.value.split(".")
            axis = _AXIS[ax]
            if s.thread.is_thread:
                hw = self.block[axis] - 1
            else:
                g = self.interval(self.grid[axis]) if axis < len(self.grid) else (1, 1)
                hw = GRID_MAX[axis] if g is None else max(0, min(g[1], GRID_MAX[axis]) - 1)
            # the C variable is hw + min before the guard: every block/thread computes it
            decl = None if lo is None else (lo[0], lo[1] + hw)
            self._bind(s.var, decl, decl)
            if not s.thread.is_thread and axis < len(self.grid) and self.grid[axis] == s.extent:
                self._below_site(s)
            return
        ext = self.interval(s.extent)
        if lo is None or ext is None:
            self._bind(s.var, None, None)
            return
        end = (lo[0] + ext[0], lo[1] + ext[1])      # the loop variable reaches its end
        use = (lo[0], max(lo[0], end[1] - 1))
        self._bind(s.var, use, (min(lo[0], end[0]), max(lo[1], end[1])))
        self._below_site(s)

    def _below_site(self, s: n.For) -> None:
        """``0 <= var < extent`` where ``s.var`` is used, when the loop starts at 0 (one site
        only: a Var bound twice gets no symbolic bound)."""
        ok = type(s.min) is n.Const and s.min.value == 0
        if s.var in self._below or s.var in self._sites:
            self._below[s.var] = None
        else:
            self._below[s.var] = s.extent if ok else None
        self._sites.add(s.var)

    # ------------------------------------------------------------- queries
    def declared32(self, v) -> bool:
        return id(v) in self._declared

    def scalar32(self, v) -> bool:
        return id(v) in self._scalars32

    def narrow(self, e) -> bool:
        """``e`` is int64 and it and every int64 sub-expression provably fit in ``int``."""
        got = self._narrow.get(id(e))
        if got is not None and got[0] is e:
            return got[1]
        ok = self._narrow_uncached(e)
        self._narrow[id(e)] = (e, ok)
        return ok

    def _narrow_uncached(self, e) -> bool:
        if e.dtype != dt.index or not fits32(self.interval(e)):
            return False
        t = type(e)
        if t is n.Const:
            return True
        if t is n.Var:       # a scalar without a hint has no interval: not reached
            return True
        if t is n.Binary:
            return e.op in _NARROW_OPS and self.narrow(e.a) and self.narrow(e.b)
        if t is n.Unary:
            return e.op is n.UnOp.NEG and self.narrow(e.a)
        if t is n.Select:
            return self.narrow(e.t) and self.narrow(e.f)
        if t is n.Cast:
            src = e.a.dtype
            return src.is_bool or (src.is_int and (src != dt.index or self.narrow(e.a)))
        return False

    def pure_narrow(self, e) -> bool:
        """``narrow(e)`` and ``e`` reads no memory: index arithmetic even where its value is
        data (an index stored as a value is computed in ``int``, then widened where used)."""
        if not self.narrow(e):
            return False
        got = self._pure.get(id(e))
        if got is None or got[0] is not e:
            got = self._pure[id(e)] = (e, not collect(e, lambda x: type(x) is n.Load))
        return got[1]

    def interval(self, e):
        """Inclusive (lo, hi) of integer expression ``e`` as ints, or None (unbounded)."""
        got = self._memo.get(id(e))
        if got is not None and got[0] is e:
            return got[1]
        iv = self._interval(e)
        if iv is not None and e.dtype == dt.index and (iv[0] < INT64_MIN or iv[1] > INT64_MAX):
            iv = None               # int64 arithmetic wraps there
        self._memo[id(e)] = (e, iv)
        return iv

    def _interval(self, e):
        d, t = e.dtype, type(e)
        if d != dt.index:           # data of narrower types: any value of the type
            if t is n.Cast and d.is_int and d.bits <= 32:
                src = self.interval(e.a) if e.a.dtype.is_int or e.a.dtype.is_bool else None
                rng = _dtype_range(d)
                if src is not None and rng[0] <= src[0] and src[1] <= rng[1]:
                    return src
                return rng
            if t is n.Const and (d.is_int or d.is_bool):
                return int(e.value), int(e.value)
            return _dtype_range(d)
        if t is n.Const:
            return int(e.value), int(e.value)
        if t is n.Var:
            return self.ranges.get(e)
        if t is n.Binary:
            a, b = self.interval(e.a), self.interval(e.b)
            if a is None or b is None:
                return None
            op = e.op
            if op is B.ADD:
                return a[0] + b[0], a[1] + b[1]
            if op is B.SUB:
                return a[0] - b[1], a[1] - b[0]
            if op is B.MUL:
                c = [x * y for x in a for y in b]
                return min(c), max(c)
            if op is B.FLOORDIV:
                return self._quotient(e, a, b, _floordiv(a, b))
            if op is B.MOD:
                return _mod(a, b)
            if op is B.MIN:
                return min(a[0], b[0]), min(a[1], b[1])
            if op is B.MAX:
                return max(a[0], b[0]), max(a[1], b[1])
            return None
        if t is n.Unary:
            a = self.interval(e.a)
            if a is None:
                return None
            if e.op is n.UnOp.NEG:
                return -a[1], -a[0]
            if e.op is n.UnOp.ABS:
                if a[0] >= 0:
                    return a
                return (0 if a[1] >= 0 else -a[1]), max(-a[0], a[1])
            return None
        if t is n.Select:
            return _hull(self.interval(e.t), self.interval(e.f))
        if t is n.Cast:
            src = e.a.dtype
            if src.is_bool:
                return 0, 1
            if src.is_int and src is not dt.uint64:
                return self.interval(e.a)
            return None
        return None                 # loads of int64 data, anything else: unbounded

    def _quotient(self, e, a, b, iv):
        """``v // q`` of a fused index ``0 <= v < p * q`` (split of fused axes): at most p - 1."""
        bound = self._below.get(e.a) if type(e.a) is n.Var else None
        if type(bound) is not n.Binary or bound.op is not B.MUL or b[0] < 1 or a[0] < 0:
            return iv
        p = bound.a if bound.b == e.b else bound.b if bound.a == e.b else None
        pi = None if p is None else self.interval(p)
        if pi is None:
            return iv
        return max(iv[0], 0), max(0, min(iv[1], pi[1] - 1))

    # ------------------------------------------------------------- division forms
    def nonneg_by_positive(self, e) -> bool:
        """``e`` (a // b or a % b) has a >= 0 and b >= 1: C's ``/`` and ``%`` on unsigned
        values give Python's results."""
        a, b = self.interval(e.a), self.interval(e.b)
        return a is not None and b is not None and a[0] >= 0 and b[0] >= 1


_MAX_WALKS = 4
_NARROW_OPS = frozenset({B.ADD, B.SUB, B.MUL, B.FLOORDIV, B.MOD, B.MIN, B.MAX})


__all__ = ["IndexWidths", "fits32", "INT32_MIN", "INT32_MAX"]
