"""Proving integer index expressions non-negative over a box of variable ranges.

``Prover(ranges).nonneg(e)`` answers "is ``e >= 0`` wherever every variable is in
its range?" -- True only when it can show it (a False answer means "not shown").
It is what kdsl.frontend.access uses to prove tensor reads in range at trace time.

Expressions become polynomials (``Poly``: monomials of *atoms* -- variables or
opaque sub-expressions -- with integer coefficients), so ``a*b - (a - 1)*b - b``
cancels to 0.  Then:

- ``min``/``max``/``//``/``%``/``select`` atoms are removed first, by rules that are
  exact or sound (``R - X // Y >= 0`` iff ``(R + 1)*Y - 1 - X >= 0`` for ``Y >= 1``;
  ``P(min(x, y))`` is ``P(x)`` or ``P(y)``; ...);
- variables are eliminated one at a time: a polynomial linear in ``v`` over
  ``[L, H]`` is smallest at an end, so ``P >= 0`` iff ``P(L) >= 0`` and ``P(H) >= 0``
  (with ``H`` unbounded: ``P(L) >= 0`` and the coefficient of ``v`` ``>= 0``).

Ranges are inclusive ``(lo, hi)`` pairs of Exprs (or None: unbounded); they may
mention other variables (a variable is eliminated before those its range uses).
``refine`` narrows ranges by a condition (``i > 0``, ``(i >= 1) & (j < m - 1)``).
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify
from ..ir.visitor import collect

B, C = n.BinOp, n.CmpOp

#: elementary proof steps one ``nonneg`` question may take (past it: "not shown")
BUDGET = 4000


class _Giveup(Exception):
    """The budget ran out or an expression is outside what the prover models."""


# ----------------------------------------------------------------- polynomials
class Atoms:
    """Numbers the atoms of polynomials: Vars by identity, other Exprs structurally."""

    def __init__(self):
        self.ids: dict = {}
        self.exprs: list = []

    def id(self, e: n.Expr) -> int:
        k = self.ids.get(e)
        if k is None:
            k = self.ids[e] = len(self.exprs)
            self.exprs.append(e)
        return k


def _padd(p: dict, q: dict, scale: int = 1) -> dict:
    out = dict(p)
    for m, c in q.items():
        v = out.get(m, 0) + scale * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def _pmul(p: dict, q: dict) -> dict:
    out: dict = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = tuple(sorted(m1 + m2))
            v = out.get(m, 0) + c1 * c2
            if v:
                out[m] = v
            else:
                out.pop(m, None)
    return out


def _const(c: int) -> dict:
    return {(): c} if c else {}


def _is_index(e: n.Expr) -> bool:
    return e.dtype.is_int and e.dtype.bits >= 32


class Poly:
    """Expr <-> polynomial over atoms (integer arithmetic of >= 32-bit ints; never overflows)."""

    def __init__(self, atoms: Atoms | None = None):
        self.atoms = atoms or Atoms()

    def of(self, e: n.Expr) -> dict:
        t = type(e)
        if t is n.Const:
            if isinstance(e.value, float):
                raise _Giveup()
            return _const(int(e.value))
        if t is n.Binary and _is_index(e):
            if e.op is B.ADD:
                return _padd(self.of(e.a), self.of(e.b))
            if e.op is B.SUB:
                return _padd(self.of(e.a), self.of(e.b), -1)
            if e.op is B.MUL:
                return _pmul(self.of(e.a), self.of(e.b))
        if t is n.Unary and e.op is n.UnOp.NEG and _is_index(e):
            return _padd({}, self.of(e.a), -1)
        if t is n.Cast and _is_index(e) and _is_index(e.a):
            return self.of(e.a)      # index arithmetic does not overflow: the value carries over
        return {(self.atoms.id(e),): 1}

    def expr(self, p: dict, dtype=dt.index) -> n.Expr:
        """The polynomial as an expression again."""
        out = None
        for m, c in sorted(p.items(), key=lambda mc: (len(mc[0]), mc[0])):
            term = None
            for k in m:
                term = self.atoms.exprs[k] if term is None else mk.mul(term, self.atoms.exprs[k])
            if term is None:
                continue
            term = term if c == 1 else mk.mul(n.const(c, dtype), term)
            out = term if out is None else mk.add(out, term)
        c0 = p.get((), 0)
        if out is None:
            return n.const(c0, dtype)
        return mk.add(out, n.const(c0, dtype)) if c0 else out


def _degree(p: dict, k: int) -> int:
    return max((m.count(k) for m in p), default=0)


def _split(p: dict, k: int):
    """``p = p0 + p1 * atom_k`` (p linear in atom k): (p0, p1)."""
    p0, p1 = {}, {}
    for m, c in p.items():
        if k in m:
            rest = list(m)
            rest.remove(k)
            p1[tuple(rest)] = c
        else:
            p0[m] = c
    return p0, p1


def _subst(p: dict, k: int, q: dict) -> dict:
    """``p`` with atom ``k`` replaced by the polynomial ``q`` (p linear in it)."""
    p0, p1 = _split(p, k)
    return _padd(p0, _pmul(p1, q))


# ----------------------------------------------------------------- the prover
_SPECIAL = (B.MIN, B.MAX, B.FLOORDIV, B.MOD)


class Prover:
    """Decides ``e >= 0`` over ``ranges`` (Var -> (lo | None, hi | None), inclusive Exprs).

    Variables without a range are unbounded.  Opaque integer sub-expressions without
    ranged variables (``n // 2``) count as unknown symbols.
    """

    def __init__(self, ranges: dict, axes=None):
        self.ranges = dict(ranges)
        #: the variables of the domain (an opaque atom holding one cannot be bounded)
        self.axes = axes if axes is not None else {v for v, r in ranges.items() if _bounded_both(r)}
        self.poly = Poly()
        self.steps = 0

    def nonneg(self, e: n.Expr) -> bool:
        """True when ``e >= 0`` holds at every point of the ranges."""
        self.steps = 0
        try:
            return self._nonneg(self.poly.of(e), self.ranges)
        except Exception:   # _Giveup, or an expression outside the model: "not shown"
            return False

    def nonneg_poly(self, p: dict) -> bool:
        self.steps = 0
        try:
            return self._nonneg(p, self.ranges)
        except Exception:
            return False

    # ------------------------------------------------------------- recursion
    def _tick(self):
        self.steps += 1
        if self.steps > BUDGET:
            raise _Giveup()

    def _nonneg(self, p: dict, ranges: dict) -> bool:
        self._tick()
        if not p:
            return True
        if len(p) == 1 and () in p:
            return p[()] >= 0
        atoms = self.poly.atoms
        present = sorted({k for m in p for k in m})
        var_of = {k: atoms.exprs[k] for k in present}
        special = {k: self._special(a) for k, a in var_of.items() if type(a) is not n.Var}
        special = {k: r for k, r in special.items() if r is not None}
        # order: min/max/div/mod/select holding an axis (its insides are eliminated by the
        # rule), then the axes (their ranges may bring in shape-level min/max), then the
        # shape-level special atoms, then the shape variables
        for k, rule in special.items():
            if self._has_axis(var_of[k]):
                return rule(p, k, var_of[k], ranges)
        axes = {k: v for k, v in var_of.items() if type(v) is n.Var and v in self.axes}
        k = self._pick(axes, ranges) if axes else None
        if k is None and special:
            k = next(iter(special))
            return special[k](p, k, var_of[k], ranges)
        if k is None:
            k = self._pick(var_of, ranges)
        if k is None:
            return False
        v = var_of[k]
        if _degree(p, k) > 1:
            return False
        p0, p1 = _split(p, k)
        lo, hi = ranges.get(v, (None, None)) if type(v) is n.Var else self._atom_range(v, ranges)
        if lo is None and hi is None:
            return False
        if lo is not None and hi is not None:
            sign = self._const_sign(p1)
            ends = [lo] if sign == 1 else [hi] if sign == -1 else [lo, hi]
            return all(self._nonneg(_padd(p0, _pmul(p1, self.poly.of(x))), ranges) for x in ends)
        if lo is not None:
            return (self._nonneg(p1, ranges)
                    and self._nonneg(_padd(p0, _pmul(p1, self.poly.of(lo))), ranges))
        return (self._nonneg(_padd({}, p1, -1), ranges)
                and self._nonneg(_padd(p0, _pmul(p1, self.poly.of(hi))), ranges))

    def _has_axis(self, e) -> bool:
        return any(x in self.axes for x in collect(e, lambda x: isinstance(x, n.Var)))

    @staticmethod
    def _const_sign(p: dict) -> int:
        if len(p) == 1 and () in p:
            return 1 if p[()] > 0 else -1
        return 0

    def _pick(self, var_of: dict, ranges: dict):
        """An atom no other present atom's range mentions (eliminated before its dependencies)."""
        used = set()
        for k, v in var_of.items():
            r = ranges.get(v) if type(v) is n.Var else None
            for side in r or ():
                if side is not None:
                    used.update(id(x) for x in collect(side, lambda x: isinstance(x, n.Var)))
        for k, v in var_of.items():
            if type(v) is not n.Var or id(v) not in used:
                return k
        return None

    def _atom_range(self, a: n.Expr, ranges: dict):
        """Constant bounds of an opaque atom free of ranged variables (else unbounded)."""
        vs = collect(a, lambda x: isinstance(x, (n.Var, n.TensorRead, n.Load)))
        if any(not isinstance(x, n.Var) or x in self.axes for x in vs):
            raise _Giveup()        # data, or a domain variable inside something opaque
        if type(a) is n.Cast and a.a.dtype.is_bool or type(a) is n.Compare:
            return n.const(0), n.const(1)
        from ..ir.bounds import RangeMap, interval
        facts = {v: r for v, r in ranges.items() if v in vs}
        lo, hi = interval(a, RangeMap.of(facts)) if facts else (None, None)
        lo = lo if type(lo) is n.Const else None
        hi = hi if type(hi) is n.Const else None
        return lo, hi

    # ------------------------------------------------------------- special atoms
    def _special(self, a):
        if type(a) is n.Binary and a.op in _SPECIAL and _is_index(a):
            return {B.MIN: self._minmax, B.MAX: self._minmax, B.FLOORDIV: self._floordiv,
                    B.MOD: self._mod}[a.op]
        if type(a) is n.Select and _is_index(a):
            return self._select
        return None

    def _either(self, p, k, choices, ranges) -> bool:
        return any(self._nonneg(_subst(p, k, self.poly.of(x)), ranges) for x in choices)

    def _both(self, p, k, choices, ranges) -> bool:
        return all(self._nonneg(_subst(p, k, self.poly.of(x)), ranges) for x in choices)

    def _minmax(self, p, k, a, ranges) -> bool:
        if _degree(p, k) > 1:
            return False
        sign = self._const_sign(_split(p, k)[1])
        # min(x, y) <= x, y: where P falls as the atom grows, either bound suffices
        monotone = sign == -1 if a.op is B.MIN else sign == 1
        choose = self._either if monotone else self._both
        return choose(p, k, (a.a, a.b), ranges)

    def _positive_divisor(self, y, ranges):
        """``y`` as a polynomial known to be >= 1, or None."""
        py = self.poly.of(y)
        return py if self._nonneg(_padd(py, _const(-1)), ranges) else None

    def _floordiv(self, p, k, a, ranges) -> bool:
        if _degree(p, k) > 1:
            return False
        p0, p1 = _split(p, k)
        c = p1.get(()) if len(p1) == 1 else None
        y = self._positive_divisor(a.b, ranges)
        if c is None or y is None:
            return False
        x = self.poly.of(a.a)
        if c == -1:    # R - X//Y >= 0  <=>  X//Y <= R  <=>  X <= (R + 1)*Y - 1
            return self._nonneg(_padd(_padd(_pmul(_padd(p0, _const(1)), y), _const(-1)), x, -1),
                                ranges)
        if c == 1:     # R + X//Y >= 0  <=>  X >= -R*Y
            return self._nonneg(_padd(x, _pmul(p0, y)), ranges)
        if c < 0:      # X//Y <= X/Y: R*Y - k*X >= 0 suffices
            return self._nonneg(_padd(_pmul(p0, y), x, c), ranges)
        # X//Y >= (X - Y + 1)/Y: k*(X - Y + 1) + R*Y >= 0 suffices
        return self._nonneg(_padd(_pmul(p0, y), _padd(_padd(x, y, -1), _const(1)), c), ranges)

    def _mod(self, p, k, a, ranges) -> bool:
        if _degree(p, k) > 1:
            return False
        p0, p1 = _split(p, k)
        c = p1.get(()) if len(p1) == 1 else None
        y = self._positive_divisor(a.b, ranges)
        if c is None or y is None:
            return False
        if c > 0:      # X % Y >= 0
            return self._nonneg(p0, ranges)
        # X % Y <= Y - 1, and X % Y <= X when X >= 0
        if self._nonneg(_padd(p0, _padd(y, _const(-1)), c), ranges):
            return True
        x = self.poly.of(a.a)
        return self._nonneg(x, ranges) and self._nonneg(_padd(p0, x, c), ranges)

    def _select(self, p, k, a, ranges) -> bool:
        if _degree(p, k) > 1:
            return False
        for branch, positive in ((a.t, True), (a.f, False)):
            sub, uniform, rest = refine(ranges, a.cond, positive, self.axes)
            if sub is None:
                continue        # that branch is never taken
            q = _subst(p, k, self.poly.of(branch))
            if self._nonneg(q, sub):
                continue
            # a condition that is no range of an axis (``x % m < d``) is a fact ``h >= 0`` of
            # the branch: ``q - h >= 0`` shows ``q >= 0`` there (np.pad's reflect/symmetric
            # index ``select(p < d, p, 2*d - 1 - p)`` is in range(d) on both sides)
            for x, y, c in _facts(uniform + rest):          # h = x - y - c
                h = _padd(_padd(self.poly.of(x), self.poly.of(y), -1), _const(-c))
                if self._nonneg(_padd(q, h, -1), sub):
                    break
            else:
                return False
        return True


def _facts(conds) -> list:
    """``(x, y, c)`` with ``x - y - c >= 0`` for the integer comparisons among ``conds``."""
    out = []
    for c in conds:
        if type(c) is not n.Compare or not (_is_index(c.a) and _is_index(c.b)):
            continue
        out += {C.GE: [(c.a, c.b, 0)], C.GT: [(c.a, c.b, 1)], C.LE: [(c.b, c.a, 0)],
                C.LT: [(c.b, c.a, 1)], C.EQ: [(c.a, c.b, 0), (c.b, c.a, 0)]}.get(c.op, [])
    return out


def _bounded_both(r) -> bool:
    return r[0] is not None and r[1] is not None


# ----------------------------------------------------------------- conditions -> ranges
_FLIP = {C.LT: C.GT, C.LE: C.GE, C.GT: C.LT, C.GE: C.LE, C.EQ: C.EQ, C.NE: C.NE}
_NEG = {C.LT: C.GE, C.LE: C.GT, C.GT: C.LE, C.GE: C.LT, C.EQ: C.NE, C.NE: C.EQ}


def negate(c: n.Expr) -> n.Expr:
    """The boolean negation of ``c`` (a flipped comparison where possible)."""
    if type(c) is n.Compare:
        return n.Compare(c.dtype, _NEG[c.op], c.a, c.b)
    if type(c) is n.Const:
        return n.const(not c.value)
    if type(c) is n.Unary and c.op is n.UnOp.NOT:
        return c.a
    return mk.unary(n.UnOp.NOT, c)


def refine(ranges: dict, cond: n.Expr, positive: bool = True, axes=None):
    """Narrow the ranges of ``axes`` (default: the variables bounded on both sides) to where
    ``cond`` is ``positive``.

    Returns ``(ranges', uniform, residual)``: ``uniform`` are conditions free of ranged
    variables (known at call time), ``residual`` the parts that could not be turned into
    ranges (so ``ranges'`` is then a superset of the points where ``cond`` holds);
    ``ranges'`` is None where ``cond`` is constant and excludes every point.
    """
    if axes is None:
        axes = {v for v, r in ranges.items() if _bounded_both(r)}
    out, uniform, residual = dict(ranges), [], []
    todo = [(cond, positive)]
    while todo:
        c, pos = todo.pop()
        t = type(c)
        if t is n.Const:
            if bool(c.value) != pos:
                return None, [], []
        elif t is n.Unary and c.op is n.UnOp.NOT and c.dtype.is_bool:
            todo.append((c.a, not pos))
        elif t is n.Binary and c.dtype.is_bool and c.op is (B.AND if pos else B.OR):
            todo += [(c.a, pos), (c.b, pos)]
        elif t is n.Compare and _is_index(c.a) and _is_index(c.b) and _narrow(out, c, pos, axes):
            pass
        else:
            (residual if _mentions(c, axes) else uniform).append(c if pos else negate(c))
    return out, uniform, residual


def _mentions(e, axes) -> bool:
    """Does ``e`` use a domain axis or read data?"""
    return any(not isinstance(x, n.Var) or x in axes
               for x in collect(e, lambda x: isinstance(x, (n.Var, n.TensorRead, n.Load))))


def _narrow(ranges: dict, c: n.Compare, pos: bool, axes) -> bool:
    """Apply ``a op b`` (one axis, coefficient +-1) to ``ranges``; False if not of that form."""
    op = c.op if pos else _NEG[c.op]
    if op is C.NE:
        return False
    poly = Poly()
    try:
        d = _padd(poly.of(c.a), poly.of(c.b), -1)
    except Exception:
        return False
    found = []
    for k, e in enumerate(poly.atoms.exprs):
        if type(e) is n.Var and e in axes:
            found.append(k)
        elif type(e) is not n.Var and _mentions(e, axes):
            return False        # an axis inside something opaque, or data
    if len(found) != 1 or _degree(d, found[0]) != 1:
        return False
    k = found[0]
    v = poly.atoms.exprs[k]
    rest, coef = _split(d, k)
    s = coef.get(()) if len(coef) == 1 else None
    if s not in (1, -1):
        return False
    # s*v + rest op 0  ->  v op' bound
    bound = poly.expr(_padd({}, rest, -s))
    if s == -1:
        op = _FLIP[op]
    lo, hi = ranges[v]
    if op in (C.GE, C.GT, C.EQ):
        b = mk.add(bound, 1) if op is C.GT else bound
        lo = simplify(b if lo is None else mk.max_(lo, b))
    if op in (C.LE, C.LT, C.EQ):
        b = mk.sub(bound, 1) if op is C.LT else bound
        hi = simplify(b if hi is None else mk.min_(hi, b))
    ranges[v] = (lo, hi)
    return True


__all__ = ["Prover", "Poly", "Atoms", "refine", "negate"]
