"""The memos of index simplification (issue 26 item 4: a cold first cuda kernel) are exact.

``bounds.interval`` and ``bounds.simplified`` key an answer by what of the ranges it reads
(``RangeMap.key_of``), so nested loop scopes share answers; ``simplify_stmt`` answers each
expression by a fresh (memoised) simplification unless one runs out of budget.  Every answer,
and every statement simplified, must be what the computation without any memo gives, for any
budget.
"""
import pytest

from kdsl import dtypes as dt
from kdsl.ir import bounds
from kdsl.ir import nodes as n
from kdsl.ir import simplify as S
from kdsl.ir.bounds import BUDGET, RangeMap, interval, reset_budget, simplified
from kdsl.ir.printer import format_stmt
from kdsl.ir.visitor import substitute

B = n.BinOp


def _b(op, a, b):
    return n.Binary(a.dtype, op, a, b)


def _c(v):
    return n.const(v)


I, J, K, N = n.var("i"), n.var("j"), n.var("k"), n.var("N")
#: nested min/max, a mod, ceildivs of a symbolic size (what a row cache's extent looks like)
EXPRS = [
    _b(B.MIN, _b(B.MIN, _c(1024), _b(B.SUB, N, _b(B.MUL, I, _c(4)))),
       _b(B.MAX, _b(B.SUB, _b(B.SUB, N, I), J), _c(0))),
    _b(B.ADD, _b(B.MAX, _b(B.MIN, _b(B.MAX, _b(B.SUB, N, I), _c(0)), _c(0)), J),
       _b(B.MOD, _b(B.ADD, I, J), _c(8))),
    _b(B.FLOORDIV, _b(B.ADD, _b(B.MAX, _b(B.SUB, _b(B.MUL, _b(B.FLOORDIV, _b(B.ADD, N, _c(255)),
                                                                _c(256)), _c(256)), _c(1)),
                                      _b(B.ADD, J, _b(B.MUL, I, _c(64)))), _c(1)), _c(4)),
]


@pytest.fixture(autouse=True)
def _fresh_budget():
    bounds._budget.memo = {}
    reset_budget()
    yield
    bounds._budget.memo = {}
    reset_budget()


@pytest.fixture
def no_memo(monkeypatch):
    """Within the block: every memo lookup misses (a new dict each time), i.e. plain computation."""
    def run(fn, *a):
        with monkeypatch.context() as m:
            m.setattr(bounds, "_memo", lambda: {})
            return fn(*a)
    return run


def _rm(extra=None):
    r = {I: n.Range(_c(0), _c(16)), J: n.Range(I, _b(B.SUB, N, I))}
    r.update(extra or {})
    return RangeMap.of(r)


def test_interval_answers_are_shared_by_maps_that_differ_in_other_vars(monkeypatch):
    """A nested scope's map (one more loop var, unused by the question) reuses the answer."""
    calls = []
    plain = bounds._interval
    monkeypatch.setattr(bounds, "_interval", lambda *a: calls.append(a[0]) or plain(*a))
    e = EXPRS[0]
    first = interval(e, _rm())
    n_first = len(calls)
    reset_budget()
    again = interval(e, _rm({K: n.Range(_c(0), _c(3))}))
    assert again == first and len(calls) == n_first     # a memo hit: nothing recomputed


def test_interval_key_holds_the_rounds_of_the_vars_it_reads():
    """A var outside the question whose range mentions one inside moves that var to a later
    elimination round: another key (the rounds decide the answer's form)."""
    e = EXPRS[0]
    plain = _rm()
    user = _rm({K: n.Range(_c(0), J)})        # k's range mentions j: j is eliminated later
    other = _rm({K: n.Range(_c(0), _c(3))})
    assert plain.key_of(e) == other.key_of(e)
    assert user.levels[J] > plain.levels[J]
    assert plain.key_of(e) != user.key_of(e)


def test_expressions_of_unranged_vars_share_one_key():
    e = _b(B.FLOORDIV, _b(B.ADD, N, _c(255)), _c(256))
    assert RangeMap.of(None).key_of(e) == _rm().key_of(e) == _rm({K: n.Range(_c(0), J)}).key_of(e)


#: maps that share keys for some questions and not for others (rounds shifted by other vars,
#: a first round of other vars only, no ranges at all)
MAPS = [lambda: RangeMap.of(None), _rm, lambda: _rm({K: n.Range(_c(0), J)}),
        lambda: _rm({K: n.Range(_c(0), _c(3))}),
        lambda: RangeMap.of({J: n.Range(_c(0), N), K: n.Range(J, _c(5))}),
        lambda: RangeMap.of({N: n.Range(_c(1), _c(100)), I: n.Range(_c(0), N)})]
QUESTIONS = EXPRS + [_b(B.FLOORDIV, _b(B.ADD, N, _c(255)), _c(256)),
                     _b(B.MOD, _b(B.ADD, J, K), _c(4)), _b(B.SUB, _b(B.MUL, J, _c(4)), N)]


@pytest.mark.parametrize("q", range(len(QUESTIONS)))
def test_shared_answers_are_each_maps_own(q, no_memo):
    """Every map's answer, asked after the memo holds the other maps' answers, is what that map
    gives without any memo."""
    e = QUESTIONS[q]
    want = []
    for make in MAPS:
        reset_budget()
        want.append(no_memo(lambda: (interval(e, make()), simplified(e, make(), 1))))
    for order in (MAPS, MAPS[::-1]):
        bounds._budget.memo = {}
        for make in order:
            reset_budget()
            got = interval(e, make()), simplified(e, make(), 1)
            assert got == want[MAPS.index(make)]


@pytest.mark.parametrize("k", range(len(EXPRS)))
@pytest.mark.parametrize("depth", [1, 2])
def test_simplified_memo_is_exact_for_every_budget(k, depth, no_memo):
    e, rm = EXPRS[k], _rm()

    def cold(left):
        bounds._budget.left = left
        out = no_memo(simplified, e, rm, depth)
        return out, bounds._budget.left

    full, left = cold(BUDGET)
    cost = BUDGET - left
    assert cost >= 1, "the expression should ask interval questions"
    for budget in sorted({0, 1, cost // 2, cost - 1, cost, cost + 1, BUDGET}):
        want = cold(budget)
        bounds._budget.memo = {}
        bounds._budget.left = BUDGET
        simplified(e, rm, depth)                # warm: the answer and its sub-answers kept
        bounds._budget.left = budget
        got = simplified(e, rm, depth), bounds._budget.left
        assert got == want, (budget, cost)


def test_simplify_keeps_the_callers_object_on_a_hit():
    """An equal expression built again gets itself back, as a fresh simplification gives."""
    e = _b(B.ADD, I, J)
    assert S.simplify(e, _rm()) is e
    e2 = _b(B.ADD, I, J)
    assert S.simplify(e2, _rm()) is e2


def _nest():
    """Two loop scopes, several expressions per scope (guards, indices, values, extents)."""
    buf = n.Buffer("A", dt.int64, (N,))
    K2 = n.var("k2")

    def body(i, j):
        env = {I: i, J: j}
        es = [substitute(x, env) for x in EXPRS]
        stores = tuple(n.Store(buf, (x,), y) for x, y in zip(es, es[1:] + es[:1]))
        guard = n.Compare(dt.bool_, n.CmpOp.LT, es[2], es[0])
        # provable with a budget of 2, not with more (the mod's bound becomes a symbolic min)
        small = n.Compare(dt.bool_, n.CmpOp.LT, _b(B.ADD, _b(B.MUL, i, _c(4)), _b(B.MOD, j, _c(4))),
                          _c(64))
        # a later expression of the scope reuses an earlier one (free in the scope's memo: it
        # is proven with a budget of 1 there, not by a fresh simplification)
        x = _b(B.MIN, _b(B.ADD, j, _c(1)), N)
        reuse = (n.Store(buf, (x,), _c(1)), n.Store(buf, (_b(B.MIN, x, _b(B.ADD, N, _c(5))),), _c(0)),
                 n.Store(buf, (_c(0),), n.Compare(dt.bool_, n.CmpOp.LE, x, N)))
        return n.Seq(reuse + stores + (n.IfThenElse(guard, n.Store(buf, (es[1],), es[2])),
                                       n.IfThenElse(small, n.Store(buf, (es[0],), es[1]))))

    inner = n.For(J, I, _b(B.SUB, N, I), n.ForKind.SERIAL, body(I, J))
    other = n.For(K2, _c(0), _b(B.MIN, EXPRS[2], _c(7)), n.ForKind.SERIAL, body(K2, I))
    return n.For(I, _c(0), _c(16), n.ForKind.SERIAL, n.Seq((inner, other, body(I, _c(3)))))


class _Reference(S._StmtSimplifier):
    """simplify_stmt as it was: one simplifier per scope for all its expressions."""

    def _e(self, e):
        if e is None:
            return None
        if self.env:
            e = substitute(e, self.env)
        if self._expr.rm is not self.rm:
            self._expr = S._Simplifier(self.rm, 0)
        else:
            reset_budget()
        return self._expr(e)


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8, 13, 21, 40, 80, BUDGET])
def test_simplify_stmt_is_what_one_simplifier_per_scope_gives(budget, monkeypatch, no_memo):
    """Also where expressions run out of budget (small budgets): the scope's simplifier then
    takes over, its memo re-made."""
    monkeypatch.setattr(bounds, "BUDGET", budget)
    stmt = _nest()
    before = bounds.refusals()
    want = no_memo(lambda: _Reference(RangeMap.of(None)).visit(stmt))
    refused = bounds.refusals() > before
    bounds._budget.memo = {}
    got = S.simplify_stmt(stmt)
    assert format_stmt(got) == format_stmt(want) and got == want
    again = S.simplify_stmt(stmt)           # every memo warm
    assert again == want
    if budget <= 3:
        assert refused, "small budgets should run out (else this test checks nothing)"


def test_small_budgets_change_the_answer():
    """(The budget test above is sensitive: running out gives other statements.)"""
    full = format_stmt(S.simplify_stmt(_nest()))
    bounds._budget.memo = {}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(bounds, "BUDGET", 2)
        small = format_stmt(S.simplify_stmt(_nest()))
    assert small != full
