"""Interval analysis of integer index expressions: bounds, access regions, their unions.

``ranges`` map Var -> ``kdsl.ir.nodes.Range(min, extent)`` (the half-open
[min, min + extent), as loops and axes carry them) or an inclusive ``(lo, hi)``
tuple whose sides are ints, Exprs or None (unbounded).  Bounds are inclusive
and may be symbolic: a Var without a range is its own bound, and range
endpoints may mention other Vars.  Vars are eliminated in dependency order
(a var before the vars its range mentions), so ``i - n`` with i in [0, n)
bounds to [-n, -1]... then to a constant upper bound -1.
"""
from __future__ import annotations

import threading

from ..errors import KdslError
from . import nodes as n
from .visitor import Mutator, collect, free_vars, substitute
from . import simplify as _simplify     # a cycle (simplify asks interval): attributes at call time

B = n.BinOp


class Unbounded(KdslError, ValueError):
    """The analysis cannot bound an expression (non-affine use or an unbounded range)."""


class RangeMap:
    """Normalised ranges: Var -> (lo | None, hi | None), inclusive; immutable once built."""

    __slots__ = ("bounds", "_levels", "_deps", "_first", "_keys", "_var_keys")

    def __init__(self, bounds: dict):
        self.bounds = bounds
        self._levels = None
        self._keys = None           # id(e) -> (e, key_of(e))
        self._var_keys = None       # frozenset of vars -> the key of expressions of them

    @staticmethod
    def of(ranges) -> "RangeMap":
        """Accept None, a RangeMap or a dict of Range / (lo, hi) tuples."""
        if ranges is None:
            return _EMPTY
        if isinstance(ranges, RangeMap):
            return ranges
        out = {}
        for v, r in ranges.items():
            if isinstance(r, n.Range):
                out[v] = (r.min, _end(r.min, r.extent))
            else:
                lo, hi = r
                out[v] = (_as_bound(lo, v.dtype), _as_bound(hi, v.dtype))
        return RangeMap(out)

    def with_range(self, v: n.Var, mn: n.Expr, extent: n.Expr) -> "RangeMap":
        return self.with_bounds(v, mn, _end(mn, extent))

    def with_bounds(self, v: n.Var, lo, hi) -> "RangeMap":
        d = dict(self.bounds)
        d[v] = (lo, hi)
        return RangeMap(d)

    @property
    def levels(self) -> dict:
        """Var -> elimination round: a var's round is after those of vars whose range use it."""
        if self._levels is None:
            users: dict = {v: [] for v in self.bounds}
            deps: dict = {}
            for u, (lo, hi) in self.bounds.items():
                mentions = set()
                for side in (lo, hi):
                    if side is not None:
                        mentions |= free_vars(side)
                for w in mentions:
                    if w in users and w is not u:
                        users[w].append(u)
                deps[u] = mentions
            levels: dict = {}

            def level(v, stack):
                if v in levels:
                    return levels[v]
                if v in stack:   # a cycle: break it here
                    return 0
                stack.add(v)
                lv = 1 + max((level(u, stack) for u in users[v]), default=-1)
                stack.discard(v)
                levels[v] = lv
                return lv

            for v in self.bounds:
                level(v, set())
            self._levels, self._deps = levels, deps
            self._first = min(levels.values(), default=None)
        return self._levels

    def key_of(self, e) -> tuple:
        """What of this map ``interval(e, self)`` reads: per var of ``e`` and (transitively) of
        the ranges of those vars, its range and the rank of its elimination round among theirs,
        and whether the first round eliminates none of them (it runs all the same, leaving a
        first answer in which no var is replaced).  Two maps with equal keys for ``e`` give
        ``e`` the same interval: the rounds of other vars never replace a var of ``e`` (those
        after the first are skipped).  The memo's key, shared by the many maps of nested loop
        scopes that differ only in vars ``e`` does not mention."""
        keys = self._keys
        if keys is None:
            keys = self._keys = {}
            self._var_keys = {}
        hit = keys.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        vs = _vars_of(e)
        key = self._var_keys.get(vs)    # (a function of the vars alone: shared by their expressions)
        if key is None:
            key = self._var_keys[vs] = self._key_of_vars(vs)
        keys[id(e)] = (e, key)      # (e kept: its id stays its own while the map lives)
        return key

    def _key_of_vars(self, vs) -> tuple:
        levels, deps, bounds = self.levels, self._deps, self.bounds
        out, seen, todo = [], set(), list(vs)
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            b = bounds.get(v)
            if b is not None:
                out.append((v, b, levels[v]))
                todo.extend(deps[v])
        if not out:
            key = _NO_RANGES
        else:
            rounds = sorted({lv for _, _, lv in out})
            rank = {lv: k for k, lv in enumerate(rounds)}
            key = self._first < rounds[0], frozenset((v, b, rank[lv]) for v, b, lv in out)
        return key


_EMPTY = RangeMap({})

#: id(e) -> (e, its free vars) for the index expressions the memo keys ask about: the
#: simplifier builds new nodes over old children, whose vars are then known
_vars_memo: dict = {}
_VARS_MEMO_SIZE = 8192
_NO_VARS = frozenset()


def _vars_of(e, depth: int = 0) -> frozenset:
    """``frozenset(free_vars(e))``, from its children's (memoised by node identity); past a
    nesting of 64 by a walk (iterative: any depth)."""
    t = type(e)
    if t is n.Const:
        return _NO_VARS
    if t is n.Var:
        return frozenset((e,))
    hit = _vars_memo.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    if depth > 64:
        out = frozenset(free_vars(e))
    elif t is n.Binary:
        a, b = _vars_of(e.a, depth + 1), _vars_of(e.b, depth + 1)
        out = a | b if a and b else a or b
    elif t is n.Unary or t is n.Cast:
        out = _vars_of(e.a, depth + 1)
    else:
        out = frozenset(free_vars(e))
    if len(_vars_memo) >= _VARS_MEMO_SIZE:
        _vars_memo.clear()
    _vars_memo[id(e)] = (e, out)
    return out
_NO_RANGES = (False, frozenset())   # RangeMap.key_of of an expression none of whose vars is ranged


def _as_bound(x, d):
    if x is None or isinstance(x, n.Expr):
        return x
    return n.Const(d, int(x))


#: (id(mn), id(extent)) -> (mn, extent, end): RangeMaps are rebuilt from the same loop
#: Ranges for query after query; kept until ``_END_MEMO_SIZE`` entries, then started afresh
_end_memo: dict = {}
_END_MEMO_SIZE = 4096


def _end(mn, extent):
    """mn + extent - 1, simplified (the inclusive end of a Range)."""
    S = _simplify
    if S.is_index_type(mn.dtype) and extent.dtype is mn.dtype:
        key = (id(mn), id(extent))
        hit = _end_memo.get(key)
        if hit is not None and hit[0] is mn and hit[1] is extent:
            return hit[2]
        out = S.linear(mn).add(S.linear(extent)).add(S.Linear(mn.dtype, const=-1)).to_expr()
        if len(_end_memo) >= _END_MEMO_SIZE:
            _end_memo.clear()
        _end_memo[key] = (mn, extent, out)
        return out
    one = n.Const(extent.dtype, 1)
    return n.Binary(mn.dtype, B.SUB, n.Binary(mn.dtype, B.ADD, mn, extent), one)


# ----------------------------------------------------------------- interval arithmetic
class _Iv:
    """One bounding round: ``elim`` are the vars replaced by their range this round."""

    def __init__(self, rm: RangeMap, elim: frozenset, depth: int, signs: RangeMap | None = None):
        self.rm, self.elim, self.depth = rm, elim, depth
        self.signs = rm if signs is None else signs   # ranges for sign tests (rm plus facts)

    # -- helpers on possibly-None symbolic bounds
    def s(self, e):
        if e is None:
            return None
        return simplified(e, self.rm, self.depth + 1)

    def op(self, op, a, b):
        if a is None or b is None:
            return None
        return self.s(n.Binary(a.dtype, op, a, b))

    def c(self, v, d):
        return n.Const(d, v)

    def nonneg(self, x) -> bool:
        """x >= 0 provably."""
        if x is None:
            return False
        if type(x) is n.Const:
            return x.value >= 0
        lo = interval(x, self.signs, self.depth + 1)[0]
        return type(lo) is n.Const and lo.value >= 0

    def nonpos(self, x) -> bool:
        if x is None:
            return False
        if type(x) is n.Const:
            return x.value <= 0
        hi = interval(x, self.signs, self.depth + 1)[1]
        return type(hi) is n.Const and hi.value <= 0

    # -- nodes
    def __call__(self, e):
        if not _simplify.is_index_type(e.dtype):
            return _dtype_range(e.dtype)
        t = type(e)
        if t is n.Const:
            return e, e
        fn = _IV_TABLE.get(t)
        return fn(self, e) if fn is not None else _dtype_range(e.dtype)

    def _var(self, v):
        if v in self.elim:   # an unbounded side keeps the var: it is its own bound
            lo, hi = self.rm.bounds[v]
            return (v if lo is None else lo), (v if hi is None else hi)
        return v, v

    def _linear(self, e):
        linear, Linear = _simplify.linear, _simplify.Linear
        lin = linear(e)
        lo, hi = Linear(e.dtype, const=lin.const), Linear(e.dtype, const=lin.const)
        for t, k in lin.terms.items():
            tl, th = (t, t) if (type(t) is n.Var and t not in self.elim) else self._nonlinear(t)
            if k < 0:
                tl, th = th, tl
            lo = None if (lo is None or tl is None) else lo.add(linear(tl).scale(k))
            hi = None if (hi is None or th is None) else hi.add(linear(th).scale(k))
        return (None if lo is None else self.s(lo.to_expr()),
                None if hi is None else self.s(hi.to_expr()))

    def _binary(self, e):
        op = e.op
        if op in (B.ADD, B.SUB) or (op is B.MUL and (type(e.a) is n.Const or type(e.b) is n.Const)):
            return self._linear(e)
        return self._nonlinear(e)

    def _nonlinear(self, e):
        if type(e) is not n.Binary:
            if type(e) is n.Unary and e.op is n.UnOp.NEG:
                return self._linear(e)
            return self(e)
        op = e.op
        if op in (B.ADD, B.SUB):
            return self._linear(e)
        (al, ah), (bl, bh) = self(e.a), self(e.b)
        if op is B.MUL:
            return self._mul(al, ah, bl, bh)
        if op is B.FLOORDIV:
            return self._floordiv(e, al, ah, bl, bh)
        if op is B.MOD:
            return self._mod(e, al, ah, bl, bh)
        if op is B.MIN:
            return self.op(B.MIN, al, bl), self._one_sided(B.MIN, ah, bh)
        if op is B.MAX:
            return self._one_sided(B.MAX, al, bl), self.op(B.MAX, ah, bh)
        return _dtype_range(e.dtype)

    def _one_sided(self, op, a, b):
        """min/max where a None side is the neutral infinity."""
        if a is None:
            return b
        if b is None:
            return a
        return self.op(op, a, b)

    def _mul(self, al, ah, bl, bh):
        m, MIN, MAX = self.op, B.MIN, B.MAX
        ap, an, bp, bn = self.nonneg(al), self.nonpos(ah), self.nonneg(bl), self.nonpos(bh)
        if ap and bp:
            return m(B.MUL, al, bl), m(B.MUL, ah, bh)
        if ap and bn:
            return m(B.MUL, ah, bl), m(B.MUL, al, bh)
        if an and bp:
            return m(B.MUL, al, bh), m(B.MUL, ah, bl)
        if an and bn:
            return m(B.MUL, ah, bh), m(B.MUL, al, bl)
        if ap:   # for fixed a >= 0, a*b is within [a*bl, a*bh]: linear in a
            return (m(MIN, m(B.MUL, al, bl), m(B.MUL, ah, bl)),
                    m(MAX, m(B.MUL, al, bh), m(B.MUL, ah, bh)))
        if bp:
            return (m(MIN, m(B.MUL, al, bl), m(B.MUL, al, bh)),
                    m(MAX, m(B.MUL, ah, bl), m(B.MUL, ah, bh)))
        corners = [m(B.MUL, x, y) for x in (al, ah) for y in (bl, bh)]
        if any(c is None for c in corners):
            return None, None
        lo, hi = corners[0], corners[0]
        for c in corners[1:]:
            lo, hi = m(MIN, lo, c), m(MAX, hi, c)
        return lo, hi

    def _floordiv(self, e, al, ah, bl, bh):
        d, m = e.dtype, self.op
        if type(e.b) is n.Const:
            c = e.b.value
            if c > 0:
                return m(B.FLOORDIV, al, e.b), m(B.FLOORDIV, ah, e.b)
            if c < 0:
                return m(B.FLOORDIV, ah, e.b), m(B.FLOORDIV, al, e.b)
            return None, None
        if not self.nonneg(bl):
            return None, None
        if bl is not None and bl == bh:
            # one divisor b >= 1 (b >= 0, and index division by zero never runs): a // b grows with a
            return m(B.FLOORDIV, al, bl), m(B.FLOORDIV, ah, bl)
        # b >= 0 and b != 0 where a // b runs (index division by zero never executes): b >= 1
        bl = self._one_sided(B.MAX, bl, self.c(1, d))
        if self.nonneg(al):   # a >= 0, b >= 1: a // b decreases in b
            lo = m(B.FLOORDIV, al, bh) if bh is not None else self.c(0, d)
            return lo, m(B.FLOORDIV, ah, bl)
        return (m(B.MIN, m(B.FLOORDIV, al, bl), m(B.FLOORDIV, al, bh)),
                m(B.MAX, m(B.FLOORDIV, ah, bl), m(B.FLOORDIV, ah, bh)))

    def _mod(self, e, al, ah, bl, bh):
        d, m = e.dtype, self.op
        zero = self.c(0, d)
        if type(e.b) is n.Const:
            c = e.b.value
            if c <= 0:
                return (None, None) if c == 0 else (self.c(c + 1, d), zero)
            if type(al) is n.Const and type(ah) is n.Const and al.value // c == ah.value // c:
                q = al.value // c * c
                return self.c(al.value - q, d), self.c(ah.value - q, d)
            if self.nonneg(al):
                if self.nonneg(m(B.SUB, self.c(c - 1, d), ah)):
                    return al, ah   # already within [0, c)
                return zero, self._one_sided(B.MIN, self.c(c - 1, d), ah)
            return zero, self.c(c - 1, d)
        if not self.nonneg(bl):   # as in _floordiv: a divisor >= 0 is >= 1 where it runs
            return None, None
        if al is not None and al == ah and bl == bh:
            # a fixed value (a fused loop outside the range asked about): itself, exactly
            v = m(B.MOD, al, bl)
            return v, v
        top = m(B.SUB, bh, self.c(1, d))
        if self.nonneg(al):
            return zero, self._one_sided(B.MIN, ah, top)
        return zero, top

    def _unary(self, e):
        if e.op is n.UnOp.NEG:
            return self._linear(e)
        if e.op is n.UnOp.ABS:
            al, ah = self(e.a)
            if self.nonneg(al):
                return al, ah
            neg = lambda x: None if x is None else self.s(n.Unary(x.dtype, n.UnOp.NEG, x))  # noqa: E731
            if self.nonpos(ah):
                return neg(ah), neg(al)
            return self.c(0, e.dtype), self.op(B.MAX, neg(al), ah)
        return _dtype_range(e.dtype)

    def _select(self, e):
        cond = simplified(e.cond, self.rm, self.depth + 1)
        if type(cond) is n.Const:
            return self(e.t if cond.value else e.f)
        (tl, th), (fl, fh) = self(e.t), self(e.f)
        return self.op(B.MIN, tl, fl), self.op(B.MAX, th, fh)

    def _cast(self, e):
        src = e.a.dtype
        if src.is_bool:
            return self.c(0, e.dtype), self.c(1, e.dtype)
        if src.is_int:   # index arithmetic does not overflow: the value carries over
            lo, hi = (self(e.a) if src is e.dtype or src.bits > 16 else _dtype_range(src, True))
            cast = lambda x: None if x is None else self.s(n.Cast(e.dtype, x))  # noqa: E731
            return cast(lo), cast(hi)
        return _dtype_range(e.dtype)


#: node type -> the _Iv method bounding it (a class table: an _Iv is made per round)
_IV_TABLE = {n.Var: _Iv._var, n.Binary: _Iv._binary, n.Unary: _Iv._unary, n.Select: _Iv._select,
             n.Cast: _Iv._cast}


def const_upper(e) -> int | None:
    """An int constant ``e`` never exceeds, read off its min/max/+/- structure (None if none
    shows): cheap where ``bound`` would be a full interval analysis (extents of split tails)."""
    if type(e) is n.Const:
        return int(e.value) if e.dtype.is_int else None
    if type(e) is not n.Binary:
        return None
    a, b = const_upper(e.a), const_upper(e.b)
    if e.op is n.BinOp.MIN:
        sides = [x for x in (a, b) if x is not None]
        return min(sides) if sides else None
    if e.op is n.BinOp.MAX:
        return None if a is None or b is None else max(a, b)
    if e.op is n.BinOp.ADD:
        return None if a is None or b is None else a + b
    if e.op is n.BinOp.SUB and type(e.b) is n.Const:
        return None if a is None else a - e.b.value
    return None


def _dtype_range(d, force: bool = False):
    """The representable range of narrow int dtypes (wider ones: unbounded)."""
    if d.is_int and (d.bits <= 16 or force):
        import numpy as np
        info = np.iinfo(d.np)
        return n.Const(d, int(info.min)), n.Const(d, int(info.max))
    return None, None


#: interval() calls one top-level query may make: nested min/max/select bounds can
#: otherwise blow up exponentially; past the budget, answers are just "unknown".
BUDGET = 200
_budget = threading.local()
#: answers kept by ``interval``'s memo before it starts afresh (it holds their RangeMaps)
MEMO_SIZE = 4096


def reset_budget() -> None:
    """Start a fresh work budget (called by the public entry points)."""
    _budget.left = BUDGET


def _memo() -> dict:
    m = getattr(_budget, "memo", None)
    if m is None or len(m) > MEMO_SIZE:
        m = _budget.memo = {}
    return m


def interval(e: n.Expr, rm: RangeMap, depth: int = 0, facts: RangeMap | None = None):
    """Inclusive (lo, hi) of ``e`` over ``rm``; a side is None where unbounded.

    ``facts`` bound more vars for sign tests only (is a divisor positive?); those
    vars are not eliminated and stay symbolic in the result.

    Memoised exactly: an answer is a function of (``e``, ``rm``, ``depth``, ``facts``) and
    of the budget left, and one computed without running out of budget is the answer for
    any budget at least what it cost; a hit charges that cost, so every answer (and the
    budget left after it) is what computing it again would give.  Simplifying nested
    min/max bounds asks the same questions again and again (tighten_loops' loop ends).
    """
    left = getattr(_budget, "left", BUDGET)
    if depth > _simplify.MAX_DEPTH + 1 or left <= 0:
        if left <= 0:
            _budget.refused = getattr(_budget, "refused", 0) + 1
        return None, None
    memo = _memo()
    if facts is None:   # keyed by what of rm the answer reads (RangeMap.key_of)
        key = (e, depth, rm.key_of(e))
        hit = memo.get(key)
        if hit is not None and hit[2] <= left:
            _budget.left = left - hit[2]
            return hit[3]
    else:
        key = (e, id(rm), depth, id(facts))
        hit = memo.get(key)
        if hit is not None and hit[0] is rm and hit[1] is facts and hit[2] <= left:
            _budget.left = left - hit[2]
            return hit[3]
    refused = getattr(_budget, "refused", 0)
    out = _interval(e, rm, depth, facts, left)
    if getattr(_budget, "refused", 0) == refused:    # no sub-question ran out of budget
        memo[key] = (rm, facts, left - _budget.left, out)
    return out


def simplified(e, rm: RangeMap, depth: int):
    """``simplify(e, rm)`` by a fresh simplifier at nesting ``depth`` (0: a top-level query,
    which starts from a full budget; >= 1: the bounds' own simplification), memoised exactly
    as ``interval`` is: a fresh simplification's answer is a function of ``e``, what of ``rm``
    it reads (``RangeMap.key_of``), ``depth`` and the budget left; one that did not run out of
    budget is kept with its cost, and a hit charges that cost.  Returns ``e`` itself when the
    answer is ``e`` unchanged."""
    if depth == 0:
        reset_budget()
    t = type(e)
    if t is n.Const or t is n.Var:      # (nothing to simplify: not worth a key)
        return e
    left = getattr(_budget, "left", BUDGET)
    memo = _memo()
    key = (_SIMPLIFIED, e, depth, rm.key_of(e))
    hit = memo.get(key)
    if hit is not None and hit[2] <= left:
        _budget.left = left - hit[2]
        return e if hit[0] else hit[3]
    refused = getattr(_budget, "refused", 0)
    out = _simplify._Simplifier(rm, depth)(e)
    if getattr(_budget, "refused", 0) == refused:
        memo[key] = (out is e, None, left - getattr(_budget, "left", BUDGET), out)
    return out


_SIMPLIFIED = object()      # marks simplified()'s memo keys (interval's share the dict)


def refusals() -> int:
    """How many interval queries ran out of budget so far in this thread (a counter: a
    computation that leaves it unchanged gave the answer an unlimited budget gives)."""
    return getattr(_budget, "refused", 0)


def _interval(e, rm, depth, facts, left):
    signs = None if facts is None or not facts.bounds else RangeMap({**facts.bounds, **rm.bounds})
    _budget.left = left - 1
    levels = rm.levels
    rounds = sorted(set(levels.values()))
    lo = hi = e
    first = True
    for r in rounds or [None]:
        elim = frozenset(v for v, lv in levels.items() if lv == r)
        if not first:
            present = (free_vars(lo) if lo is not None else set()) | \
                      (free_vars(hi) if hi is not None else set())
            if not (present & elim):
                continue
        if first:
            lo, hi = _Iv(rm, elim, depth, signs)(e)
        else:
            iv = _Iv(rm, elim, depth, signs)
            lo = iv(lo)[0] if lo is not None else None
            hi = iv(hi)[1] if hi is not None else None
        first = False
    return lo, hi


def _is_load(x) -> bool:
    return isinstance(x, n.Load)


class _Freeze(Mutator):
    """Replaces each largest sub-expression free of ranged vars by a fresh symbol.

    A symbol keeps the constant sides of its expression's bounds under
    ``facts`` (``ceildiv(n, 64)`` with ``n >= 0`` is a symbol ``>= 0``).
    """

    def __init__(self, ranged, facts: RangeMap):
        super().__init__()
        self.ranged, self.facts = ranged, facts
        self.symbols: dict = {}     # symbol Var -> the expression it stands for
        self.ranges: dict = {}      # symbol Var -> (lo, hi), constant sides only

    def visit(self, node):
        if (isinstance(node, (n.Binary, n.Unary, n.Select, n.Cast)) and node.dtype.is_int
                and (vs := free_vars(node)) and not (vs & self.ranged)
                and all(v.dtype.is_int for v in vs) and not collect(node, _is_load)):
            sym = n.Var(node.dtype, f"fixed{len(self.symbols)}")
            self.symbols[sym] = node
            lo, hi = (None, None)
            if self.facts.bounds:
                reset_budget()
                lo, hi = interval(node, self.facts)
            lo, hi = (x if type(x) is n.Const else None for x in (lo, hi))
            if lo is not None or hi is not None:
                self.ranges[sym] = (lo, hi)
            return sym
        return super().visit(node)

    def thaw(self, e):
        return e if e is None or not self.symbols else substitute(e, self.symbols)


def bound(expr: n.Expr, ranges=None, facts=None) -> tuple:
    """Inclusive symbolic (lo, hi) of an integer expression over ``ranges``.

    A sub-expression that mentions no var of ``ranges`` (``f // X`` of an
    enclosing fused loop) is its own exact bound, whatever its operators.
    ``facts`` are ranges of vars that stay symbolic in the result, such as
    array extents ``(0, None)``.  Raises ``Unbounded`` when a side cannot be bounded.
    """
    reset_budget()
    rm, fm = RangeMap.of(ranges), RangeMap.of(facts)
    freeze = _Freeze(set(rm.bounds), fm)
    frozen = freeze.visit(expr)
    facts = RangeMap({**fm.bounds, **RangeMap.of(freeze.ranges).bounds})
    reset_budget()
    lo, hi = (freeze.thaw(x) for x in interval(frozen, rm, facts=facts))
    if lo is None or hi is None:
        from .printer import format_expr
        side = "lower" if lo is None else "upper"
        raise Unbounded(f"no {side} bound for {format_expr(expr)}")
    return lo, hi


def _extent(lo, hi):
    from .simplify import simplify
    d = lo.dtype
    return simplify(n.Binary(d, B.ADD, n.Binary(d, B.SUB, hi, lo), n.Const(d, 1)))


def region(indices, ranges=None) -> list:
    """Per index, the Range (min, extent) it covers over ``ranges`` (bound inference)."""
    rm = RangeMap.of(ranges)
    out = []
    for idx in indices:
        reset_budget()
        lo, hi = bound(idx, rm)
        out.append(n.Range(lo, _extent(lo, hi)))
    return out


def union_region(r1, r2, ranges=None) -> list:
    """The per-dimension hull of two regions (lists of Range)."""
    from .simplify import simplify
    if len(r1) != len(r2):
        raise ValueError(f"union of regions of {len(r1)} and {len(r2)} dimensions")
    rm = RangeMap.of(ranges)
    out = []
    for a, b in zip(r1, r2):
        d = a.min.dtype
        lo = simplify(n.Binary(d, B.MIN, a.min, b.min), rm)
        hi = simplify(n.Binary(d, B.MAX, _end(a.min, a.extent), _end(b.min, b.extent)), rm)
        out.append(n.Range(lo, _extent(lo, hi)))
    return out


__all__ = ["Unbounded", "RangeMap", "interval", "bound", "region", "union_region"]
