"""Simplification of index arithmetic and guards, and of statements built from them.

Integer expressions of the index types (int64, int32) are put in a linear form
``sum(coeff * term) + const`` (terms are Vars or opaque sub-expressions, kept
in order of first appearance, structurally equal terms merged) and rebuilt;
floordiv/mod by positive constants, min/max and comparisons use interval
bounds (kdsl.ir.bounds) over the given ranges.  Index arithmetic is assumed not
to overflow.  Other dtypes are only constant-folded, and floats only where the
result is exact IEEE arithmetic (float32/float64 + - * /): floats are never
reassociated.  Every function returns its argument itself when nothing changed.

``ranges`` map Var -> ``Range(min, extent)`` (half-open) or an inclusive
``(lo, hi)`` tuple whose sides may be None (unbounded).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from . import nodes as n
from .visitor import Mutator, allocate_chain, rewrap, substitute

B, C = n.BinOp, n.CmpOp
#: beyond this nesting of simplify -> bounds -> simplify, range-based rules are skipped
MAX_DEPTH = 3


def is_index_type(d: dt.DType) -> bool:
    """Types whose arithmetic the simplifier treats as exact integers (no overflow)."""
    return d is dt.int64 or d is dt.int32


def _c(v, d):
    return n.Const(d, v)


# ----------------------------------------------------------------- linear form
class Linear:
    """``sum(coeff * term) + const`` over one integer dtype; terms in first-seen order."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype, terms=None, const=0):
        self.dtype, self.terms, self.const = dtype, terms if terms is not None else {}, const

    @property
    def is_const(self) -> bool:
        return not self.terms

    def add(self, other: "Linear", sign: int = 1) -> "Linear":
        terms = dict(self.terms)
        for t, c in other.terms.items():
            v = terms.get(t, 0) + sign * c
            if v:
                terms[t] = v
            else:
                terms.pop(t, None)
        return Linear(self.dtype, terms, self.const + sign * other.const)

    def scale(self, k: int) -> "Linear":
        if k == 0:
            return Linear(self.dtype)
        return Linear(self.dtype, {t: c * k for t, c in self.terms.items()}, self.const * k)

    def to_expr(self) -> n.Expr:
        """Rebuild: positive terms lead, ``t*c`` for coefficients, ``- t`` for negatives."""
        d = self.dtype
        terms, const = self.terms, self.const
        if len(terms) <= 1:     # (most forms: the same nodes as the loop below, built directly)
            if not terms:
                return n.Const(d, const)
            (t, c), = terms.items()
            if c > 0:
                out = t if c == 1 else n.Binary(t.dtype, B.MUL, t, n.Const(t.dtype, c))
                if const:
                    out = n.Binary(d, B.ADD if const > 0 else B.SUB, out, n.Const(d, abs(const)))
                return out
            neg = t if c == -1 else n.Binary(t.dtype, B.MUL, t, n.Const(t.dtype, -c))
            if const > 0:
                return n.Binary(d, B.SUB, n.Const(d, const), neg)
            out = n.Unary(d, n.UnOp.NEG, neg)
            return n.Binary(d, B.SUB, out, n.Const(d, -const)) if const else out
        items = list(terms.items())
        first = next((k for k, (_, c) in enumerate(items) if c > 0), None)
        if first is not None:
            items.insert(0, items.pop(first))
        out = None
        if first is None and self.const > 0:
            out = _c(self.const, d)
        for t, c in items:
            if out is None:
                out = _scaled(t, c) if c > 0 else n.Unary(d, n.UnOp.NEG, _scaled(t, -c))
            else:
                op = B.ADD if c > 0 else B.SUB
                out = n.Binary(d, op, out, _scaled(t, abs(c)))
        if out is None:
            return _c(self.const, d)
        if self.const and not (first is None and self.const > 0):
            op = B.ADD if self.const > 0 else B.SUB
            out = n.Binary(d, op, out, _c(abs(self.const), d))
        return out


def _scaled(t, c):
    return t if c == 1 else n.Binary(t.dtype, B.MUL, t, _c(c, t.dtype))


def linear(e: n.Expr) -> Linear:
    """The linear form of an index-typed expression (non-linear parts become terms)."""
    d = e.dtype
    t = type(e)
    if t is n.Const:
        return Linear(d, const=e.value)
    if t is n.Binary:
        if e.op is B.ADD or e.op is B.SUB:
            out = linear(e.a).add(linear(e.b), 1 if e.op is B.ADD else -1)
            return _merge_divmod(out)
        if e.op is B.MUL:
            la, lb = linear(e.a), linear(e.b)
            if la.is_const:
                return lb.scale(la.const)
            if lb.is_const:
                return la.scale(lb.const)
    elif t is n.Unary and e.op is n.UnOp.NEG:
        return linear(e.a).scale(-1)
    return Linear(d, {e: 1})


#: id(e) -> (e, ``linear(e).to_expr()``) for index sums and products: a function of the node
#: alone (no ranges), asked again for the same nodes by every simplification of the
#: expressions that contain them (interval analysis re-simplifies its bounds at each step)
_normal_memo: dict = {}
_NORMAL_MEMO_SIZE = 8192


def _normal_form(e):
    hit = _normal_memo.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    out = linear(e).to_expr()
    if out == e:
        out = e         # already normal: the caller keeps its object (and skips comparing)
    if len(_normal_memo) >= _NORMAL_MEMO_SIZE:
        _normal_memo.clear()
    _normal_memo[id(e)] = (e, out)
    return out


def _divmod_parts(t):
    if type(t) is n.Binary and t.op in (B.FLOORDIV, B.MOD) and type(t.b) is n.Const:
        return t.op, t.a, t.b.value
    return None, None, None


def _merge_divmod(lin: Linear) -> Linear:
    """``(x // c)*c*k + (x % c)*k -> x*k``: what fusing then splitting an axis leaves."""
    for t in lin.terms:
        if type(t) is n.Binary and t.op is B.MOD:
            break
    else:
        return lin          # (no remainder term: the common case, without copying the terms)
    for t, k in list(lin.terms.items()):
        if type(t) is not n.Binary or t.op is not B.MOD:
            continue
        x, y = t.a, t.b
        quot = n.Binary(t.dtype, B.FLOORDIV, x, y)
        if type(y) is n.Const:
            partners = [(quot, k * y.value)]
        else:   # symbolic divisor: the product term (x // y)*y, either order
            partners = [(n.Binary(t.dtype, B.MUL, quot, y), k), (n.Binary(t.dtype, B.MUL, y, quot), k)]
        for partner, want in partners:
            if lin.terms.get(partner) == want:
                rest = Linear(lin.dtype, {u: v for u, v in lin.terms.items()
                                          if u != t and u != partner}, lin.const)
                return _merge_divmod(rest.add(linear(x).scale(k)))
    return lin


# ----------------------------------------------------------------- constant folding
#: int DType -> (min, max): ``np.iinfo`` is slow, and folding asks for every constant
_INT_LIMITS: dict = {}


def _fits(v, d) -> bool:
    """``dt.can_cast_value(v, d) and not (unsigned d and v < 0)``, with the int limits cached."""
    if d.is_int and isinstance(v, int) and not isinstance(v, bool):
        lim = _INT_LIMITS.get(d)
        if lim is None:
            info = np.iinfo(d.np)
            lim = _INT_LIMITS[d] = (int(info.min), int(info.max))
        return lim[0] <= v <= lim[1]     # (an unsigned type's min is 0)
    return dt.can_cast_value(v, d) and not (d.kind == "u" and v < 0)


_INT_FOLD = {
    B.ADD: lambda a, b: a + b, B.SUB: lambda a, b: a - b, B.MUL: lambda a, b: a * b,
    B.FLOORDIV: lambda a, b: a // b if b else None, B.MOD: lambda a, b: a % b if b else None,
    B.MIN: min, B.MAX: max, B.AND: lambda a, b: a & b, B.OR: lambda a, b: a | b,
    B.XOR: lambda a, b: a ^ b,
    B.POW: lambda a, b: a ** b if 0 <= b <= 64 else None,
}
_FLOAT_NP = {"float32": np.float32, "float64": np.float64}
_FLOAT_FOLD = {
    B.ADD: lambda a, b: a + b, B.SUB: lambda a, b: a - b, B.MUL: lambda a, b: a * b,
    B.DIV: lambda a, b: a / b if b != 0 else None,
    B.MIN: lambda a, b: None if (a != a or b != b) else min(a, b),
    B.MAX: lambda a, b: None if (a != a or b != b) else max(a, b),
}
_CMP_FOLD = {
    C.EQ: lambda a, b: a == b, C.NE: lambda a, b: a != b, C.LT: lambda a, b: a < b,
    C.LE: lambda a, b: a <= b, C.GT: lambda a, b: a > b, C.GE: lambda a, b: a >= b,
}


def _fold_binary(op, a, b, d):
    """The folded Const of ``a op b`` (Python values) or None when not exact/representable."""
    if d.is_bool:
        if op in (B.AND, B.OR, B.XOR):
            return _c(bool(_INT_FOLD[op](a, b)), d)
        return None
    if d.is_int:
        f = _INT_FOLD.get(op)
        v = f(a, b) if f is not None else None
        return _c(v, d) if v is not None and _fits(v, d) else None
    npt = _FLOAT_NP.get(d.name)
    f = _FLOAT_FOLD.get(op)
    if npt is None or f is None:
        return None
    with np.errstate(all="ignore"):
        v = f(npt(a), npt(b))
    return None if v is None else _c(float(v), d)


def _fold_cast(v, src, d):
    if d.is_bool:
        return _c(bool(v), d)
    if d.is_int:
        if isinstance(v, float):
            if not math.isfinite(v):
                return None
            v = int(v)   # truncation toward zero, as C and numpy's astype
        v = int(v)
        return _c(v, d) if _fits(v, d) else None
    npt = _FLOAT_NP.get(d.name) or (np.float16 if d.name == "float16" else None)
    if npt is None:
        return None
    with np.errstate(all="ignore"):
        return _c(float(npt(v)), d)


def _fold_unary(op, v, d, src_d):
    U = n.UnOp
    if op is U.ISNAN:
        return _c(isinstance(v, float) and v != v, dt.bool_) if not src_d.is_bool else None
    if op is U.NEG and not d.is_bool:
        r = -v
    elif op is U.ABS and not d.is_bool:
        r = abs(v)
    elif op is U.NOT:
        if d.is_bool:
            return _c(not v, d)
        if not d.is_int:
            return None
        r = ((1 << d.bits) - 1 - v) if d.kind == "u" else ~v
    elif op in (U.FLOOR, U.CEIL) and d.is_float and math.isfinite(v):
        r = float(math.floor(v) if op is U.FLOOR else math.ceil(v))
    else:
        return None
    if d.is_int:
        return _c(int(r), d) if _fits(int(r), d) else None
    return _c(float(r), d)


# ----------------------------------------------------------------- ranges
def _ranges(ranges):
    return _bounds.RangeMap.of(ranges)


def _interval_of(e, rm, depth):
    return _bounds.interval(e, rm, depth)


def _const_of(x):
    return x.value if type(x) is n.Const else None


# ----------------------------------------------------------------- the simplifier
class _Simplifier:
    """One simplification run: a RangeMap, a nesting depth and a memo of done nodes."""

    def __init__(self, rm, depth: int):
        self.rm, self.depth = rm, depth
        self.use_ranges = depth < MAX_DEPTH
        if depth == 0:
            _bounds.reset_budget()
        self.memo: dict[int, tuple] = {}

    def __call__(self, e):
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        fn = _SIMPLIFIER_TABLE.get(type(e))     # leaves (Var, Const, others): themselves
        r = e if fn is None else fn(self, e)
        if r is not e and r == e:
            r = e   # structurally unchanged: keep the caller's object
        self.memo[id(e)] = (e, r)
        return r

    def _leaf(self, e):
        return e

    def _generic(self, e):
        return _GenericKids(self).visit(e)

    # -- range queries
    def _interval(self, e):
        if not self.use_ranges:
            return None, None
        return _interval_of(e, self.rm, self.depth + 1)

    def _sign_of_diff(self, a, b):
        """(lo, hi) constant bounds of ``a - b`` (None where unknown)."""
        d = linear(a).add(linear(b), -1)
        if d.is_const:
            return d.const, d.const
        lo, hi = self._interval(d.to_expr())
        return _const_of(lo) if lo is not None else None, _const_of(hi) if hi is not None else None

    def le(self, a, b) -> bool:
        """Provably a <= b (index types)."""
        hi = self._sign_of_diff(a, b)[1]
        return hi is not None and hi <= 0

    def lt(self, a, b) -> bool:
        hi = self._sign_of_diff(a, b)[1]
        return hi is not None and hi < 0

    # -- nodes
    def _binary(self, e):
        a, b = self(e.a), self(e.b)
        d, op = e.dtype, e.op
        ca, cb = type(a) is n.Const, type(b) is n.Const
        if ca and cb:
            f = _fold_binary(op, a.value, b.value, d)
            if f is not None:
                return f
        if d.is_bool:
            return self._logic(op, a, b, d)
        if is_index_type(d):
            if op in (B.ADD, B.SUB, B.MUL):
                if a is e.a and b is e.b:      # e itself: its normal form, once per node
                    return _normal_form(e)
                return linear(n.Binary(d, op, a, b)).to_expr()
            if op in (B.FLOORDIV, B.MOD):
                return self._divmod(op, a, b, d)
            if op in (B.MIN, B.MAX):
                if a == b:
                    return a
                # max(max(x, c1), c2) -> max(x, max(c1, c2)): a chain of slices of a symbolic
                # size would otherwise nest one max per slice
                x, c = (a, b) if cb else (b, a) if ca else (None, None)
                if x is not None and type(x) is n.Binary and x.op is op:
                    for y, cy in ((x.a, x.b), (x.b, x.a)):
                        if type(cy) is n.Const:
                            f = _fold_binary(op, cy.value, c.value, d)
                            if f is not None:
                                return self(n.Binary(d, op, y, f))
                if self.le(a, b):
                    return a if op is B.MIN else b
                if self.le(b, a):
                    return b if op is B.MIN else a
        return n.Binary(d, op, a, b)

    def _logic(self, op, a, b, d):
        for x, y in ((a, b), (b, a)):
            if type(x) is n.Const:
                if op is B.AND:
                    return y if x.value else x
                if op is B.OR:
                    return x if x.value else y
                if op is B.XOR and not x.value:
                    return y
        if a == b and op in (B.AND, B.OR):
            return a
        return n.Binary(d, op, a, b)

    def _divmod(self, op, a, b, d):
        if type(a) is n.Const and a.value == 0:
            return a
        c = _const_of(b)
        if c is None:   # symbolic divisor: only the "already in range" rule
            if self.use_ranges and self.le(_c(0, d), a) and self.lt(a, b):
                return _c(0, d) if op is B.FLOORDIV else a
            return n.Binary(d, op, a, b)
        if c <= 0:
            return n.Binary(d, op, a, b)
        if c == 1:
            return a if op is B.FLOORDIV else _c(0, d)
        # nested divisions: (x // c1) // c2 -> x // (c1*c2); (x % c1) % c2 -> x % c2 if c2 | c1
        iop, ix, ic = _divmod_parts(a)
        if iop is B.FLOORDIV and op is B.FLOORDIV and ic is not None and ic > 0:
            return self._divmod(op, ix, _c(ic * c, d), d)
        if iop is B.MOD and op is B.MOD and ic is not None and ic > 0 and ic % c == 0:
            return self._divmod(op, ix, b, d)
        lin = linear(a)
        q0, r0 = divmod(lin.const, c)
        quot = Linear(d, const=q0)
        rest = Linear(d)
        for t, k in lin.terms.items():
            (quot if k % c == 0 else rest).terms[t] = k // c if k % c == 0 else k
        # (g*R + r0) // (g*c') == (R + r0 // g) // c'  for integer R and 0 <= r0 < g*c'
        g = c
        for k in rest.terms.values():
            g = math.gcd(g, k)
        cc, low = c // g, r0 % g
        rest = Linear(d, {t: k // g for t, k in rest.terms.items()}, r0 // g)
        inner = self._small_divmod(op, rest, cc, d)   # rest // cc or rest % cc
        if op is B.FLOORDIV:
            return quot.add(linear(inner)).to_expr()
        return linear(inner).scale(g).add(Linear(d, const=low)).to_expr()

    def _small_divmod(self, op, rest: Linear, c: int, d):
        """``rest // c`` or ``rest % c`` with range knowledge (no further rewriting)."""
        if rest.is_const:
            v = rest.const // c if op is B.FLOORDIV else rest.const % c
            return _c(v, d)
        x = rest.to_expr()
        if c == 1:
            return x if op is B.FLOORDIV else _c(0, d)
        lo, hi = self._interval(x)
        lo, hi = (_const_of(lo) if lo is not None else None), (_const_of(hi) if hi is not None else None)
        if lo is not None and hi is not None and lo // c == hi // c:
            q = lo // c
            return _c(q, d) if op is B.FLOORDIV else linear(x).add(Linear(d, const=-q * c)).to_expr()
        return n.Binary(d, op, x, _c(c, d))

    def _compare(self, e):
        a, b = self(e.a), self(e.b)
        op = e.op
        if type(a) is n.Const and type(b) is n.Const:
            return _c(bool(_CMP_FOLD[op](a.value, b.value)), dt.bool_)
        if is_index_type(a.dtype):
            lo, hi = self._sign_of_diff(a, b)
            decided = _decide(op, lo, hi)
            if decided is not None:
                return _c(decided, dt.bool_)
        elif a.dtype.is_int or a.dtype.is_bool:
            if a == b:
                return _c(op in (C.EQ, C.LE, C.GE), dt.bool_)
        return n.Compare(dt.bool_, op, a, b)

    def _unary(self, e):
        a = self(e.a)
        if type(a) is n.Const:
            f = _fold_unary(e.op, a.value, e.dtype, a.dtype)
            if f is not None:
                return f
        if e.op is n.UnOp.NEG and is_index_type(e.dtype):
            return linear(n.Unary(e.dtype, e.op, a)).to_expr()
        if e.op is n.UnOp.NOT and e.dtype.is_bool:
            if type(a) is n.Unary and a.op is n.UnOp.NOT:
                return a.a
            if type(a) is n.Compare and (a.a.dtype.is_int or a.a.dtype.is_bool):
                return n.Compare(dt.bool_, _NEGATE[a.op], a.a, a.b)   # no NaN for ints
        return n.Unary(e.dtype, e.op, a)

    def _select(self, e):
        cond = self(e.cond)
        if type(cond) is n.Const:
            return self(e.t) if cond.value else self(e.f)
        t, f = self(e.t), self(e.f)
        if t == f:
            return t
        return n.Select(e.dtype, cond, t, f)

    def _cast(self, e):
        a = self(e.a)
        if a.dtype is e.dtype:
            return a
        if type(a) is n.Const:
            f = _fold_cast(a.value, a.dtype, e.dtype)
            if f is not None:
                return f
        return n.Cast(e.dtype, a)


#: node type -> the _Simplifier method that rewrites it (a class table: a simplifier is made
#: per query, thousands of times per lowering)
_SIMPLIFIER_TABLE = {
    n.Binary: _Simplifier._binary, n.Compare: _Simplifier._compare, n.Unary: _Simplifier._unary,
    n.Select: _Simplifier._select, n.Cast: _Simplifier._cast, n.Load: _Simplifier._generic,
    n.TensorRead: _Simplifier._generic, n.Reduce: _Simplifier._generic,
}

_NEGATE = {C.EQ: C.NE, C.NE: C.EQ, C.LT: C.GE, C.GE: C.LT, C.GT: C.LE, C.LE: C.GT}


def _decide(op, lo, hi):
    """The value of ``d op 0`` given constant bounds lo <= d <= hi (None: unknown)."""
    if op is C.LT:
        return True if hi is not None and hi < 0 else False if lo is not None and lo >= 0 else None
    if op is C.LE:
        return True if hi is not None and hi <= 0 else False if lo is not None and lo > 0 else None
    if op is C.GT:
        return True if lo is not None and lo > 0 else False if hi is not None and hi <= 0 else None
    if op is C.GE:
        return True if lo is not None and lo >= 0 else False if hi is not None and hi < 0 else None
    if lo is not None and hi is not None and lo == hi == 0:
        return op is C.EQ
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        return op is C.NE
    return None


class _GenericKids(Mutator):
    """Simplify the direct expression children of a node the simplifier does not rewrite."""

    def __init__(self, s: _Simplifier):
        super().__init__()
        self.s, self.top = s, True

    def visit(self, node):
        if self.top:
            self.top = False
            return self.generic(node)
        return self.s(node)


def simplify(expr: n.Expr, ranges=None, *, _depth: int = 0) -> n.Expr:
    """``expr`` simplified; the same object when nothing changed.

    ``ranges``: Var -> Range or inclusive (lo, hi) tuple, for the range-based rules.
    """
    return _bounds.simplified(expr, _ranges(ranges), _depth)    # (memoised)


def prove(cond: n.Expr, ranges=None) -> bool | None:
    """True/False when ``cond`` is decidable from ``ranges``, else None."""
    r = simplify(cond, ranges)
    return bool(r.value) if type(r) is n.Const else None


# ----------------------------------------------------------------- statements
_EMPTY = n.Seq(())


def _is_empty(s) -> bool:
    return type(s) is n.Seq and not s.stmts


class _StmtSimplifier(Mutator):
    """Simplify expressions with loop ranges in scope; prune dead loops and branches."""

    def __init__(self, rm):
        super().__init__()
        self.rm = rm
        self._expr = _Simplifier(rm, 0)
        #: the expressions of this scope answered by ``bounds.simplified`` (a fresh simplifier,
        #: memoised across scopes and passes) while ``_exact`` is False; see ``_e``
        self._done: list = []
        self._exact = False
        #: Var -> Expr: the loops of extent 1 removed around the statement being visited (their
        #: var set to their min), substituted into each expression as it is simplified: what
        #: substituting into the whole body first would give, without rebuilding its statements
        #: once per such loop
        self.env: dict = {}

    def _e(self, e):
        """``e`` simplified as by ``self._expr``, the simplifier of the current scope (one run
        of expressions under the same ranges), whose memo is shared by the scope's
        expressions, the budget reset before each.  A fresh simplifier's answer (memoised by
        ``bounds.simplified`` across scopes and passes) is the same whenever it did not run out
        of budget: its answers are then those of an unlimited budget, and the scope's
        simplifier charges no more than a fresh one (its memo only skips work), so it did not
        run out either.  At the first expression that ran out, the scope's simplifier takes
        over for the rest of the scope, after re-running the expressions answered so far (its
        memo is then what it would have been)."""
        if e is None:
            return None
        if self.env:
            e = substitute(e, self.env)
        if self._expr.rm is not self.rm:
            self._expr = _Simplifier(self.rm, 0)
            self._done, self._exact = [], False
        if not self._exact:
            refused = _bounds.refusals()
            r = _bounds.simplified(e, self.rm, 0)
            if _bounds.refusals() == refused:
                self._done.append(e)
                return r
            self._exact = True
            for x in self._done:
                _bounds.reset_budget()
                self._expr(x)
            self._done = []
        _bounds.reset_budget()      # the budget is per expression; the memo is per scope
        return self._expr(e)

    def visit(self, node):
        if isinstance(node, n.Expr):
            return self._e(node)
        return super().visit(node)

    def _scoped(self, rm, node):
        old, self.rm = self.rm, rm
        try:
            return self.visit(node)
        finally:
            self.rm = old

    def visit_For(self, s):
        mn, ext = self._e(s.min), self._e(s.extent)
        e = _const_of(ext)
        bound = s.kind is n.ForKind.BOUND   # thread loops shape the launch: always kept
        if e is not None and e <= 0 and not bound:
            return _EMPTY
        if e == 1 and not bound:
            old = self.env
            self.env = {**old, s.var: mn}
            try:
                return self.visit(s.body)
            finally:
                self.env = old
        body = self._scoped(self.rm.with_range(s.var, mn, ext), s.body)
        if _is_empty(body) and not bound:
            return _EMPTY
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return n.For(s.var, mn, ext, s.kind, body, s.thread)

    def visit_IfThenElse(self, s):
        cond = self._e(s.cond)
        if type(cond) is n.Const:
            if cond.value:
                return self.visit(s.then)
            return _EMPTY if s.otherwise is None else self.visit(s.otherwise)
        then = self.visit(s.then)
        other = None if s.otherwise is None else self.visit(s.otherwise)
        if other is not None and _is_empty(other):
            other = None
        if _is_empty(then):
            if other is None:
                return _EMPTY
            # if c: pass / else: S  ->  if not c: S
            return n.IfThenElse(self._e(n.Unary(dt.bool_, n.UnOp.NOT, cond)), other)
        if cond is s.cond and then is s.then and other is s.otherwise:
            return s
        return n.IfThenElse(cond, then, other, s.alternatives and other is not None)

    def visit_LetStmt(self, s):
        value = self._e(s.value)
        _bounds.reset_budget()
        lo, hi = _interval_of(value, self.rm, 1) if is_index_type(value.dtype) else (None, None)
        rm = self.rm.with_bounds(s.var, lo, hi) if (lo is not None or hi is not None) else self.rm
        body = self._scoped(rm, s.body)
        if value is s.value and body is s.body:
            return s
        return n.LetStmt(s.var, value, body)

    def visit_Allocate(self, s):
        chain, inner = allocate_chain(s)     # iterative: thousands of stages nest as deep
        body = self.visit(inner)
        if _is_empty(body):
            return _EMPTY
        return rewrap(chain, body)

    def visit_Seq(self, s):
        out = []
        for x in s.stmts:
            y = self.visit(x)
            if type(y) is n.Seq:
                out.extend(y.stmts)
            else:
                out.append(y)
        if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
            return s
        if len(out) == 1:
            return out[0]
        return n.Seq(tuple(out))


def simplify_stmt(stmt: n.Stmt, ranges=None) -> n.Stmt:
    """``stmt`` with every expression simplified (enclosing loops give their vars' ranges).

    Drops ``if True``, ``if False`` branches, loops of constant extent <= 0 and
    empty Seqs, flattens nested Seqs, replaces non-BOUND loops of extent 1 by
    their body with the var set to min.  The same object when nothing changed.
    """
    return _StmtSimplifier(_ranges(ranges)).visit(stmt)


from . import bounds as _bounds  # noqa: E402  (a cycle: bounds simplifies its answers; last, so
#                                  that either module may be imported first)
