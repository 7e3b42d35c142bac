"""``bounds.interval``'s memo is exact: with the memo warm, every answer and the budget left
after it are what computing them afresh gives, whatever budget is left (issue 25: the cpu
lowering of gramschmidt asked the same nested min/max questions thousands of times)."""
import pytest

from kdsl import dtypes as dt
from kdsl.ir import bounds
from kdsl.ir import nodes as n
from kdsl.ir.bounds import BUDGET, RangeMap, interval, reset_budget

B = n.BinOp


def _b(op, a, b):
    return n.Binary(a.dtype, op, a, b)


def _c(v):
    return n.const(v)


I, J, N = n.var("i"), n.var("j"), n.var("N")
RM = RangeMap.of({I: n.Range(_c(0), _c(16)), J: n.Range(I, _b(B.SUB, N, I))})
#: nested min/max of loop ends (what tighten_loops asks), a mod, a select
EXPRS = [
    _b(B.MIN, _b(B.MIN, _c(1024), _b(B.SUB, N, _b(B.MUL, I, _c(4)))),
       _b(B.MAX, _b(B.SUB, _b(B.SUB, N, I), J), _c(0))),
    _b(B.ADD, _b(B.MAX, _b(B.MIN, _b(B.MAX, _b(B.SUB, N, I), _c(0)), _c(0)), J),
       _b(B.MOD, _b(B.ADD, I, J), _c(8))),
    n.Select(I.dtype, n.Compare(dt.bool_, n.CmpOp.LT, J, _c(3)), _b(B.MIN, I, J),
             _b(B.MAX, _b(B.SUB, N, J), _c(2))),
]


def _cold(e, left):
    """The answer and the budget left with an empty memo (no memo at all inside)."""
    bounds._budget.memo = {}
    bounds._budget.left = left
    out = interval(e, RM)
    return out, bounds._budget.left


@pytest.mark.parametrize("k", range(len(EXPRS)))
def test_interval_memo_is_exact_for_every_budget(k):
    e = EXPRS[k]
    reset_budget()
    full, left = _cold(e, BUDGET)
    cost = BUDGET - left
    assert cost > 1, "the expression should ask nested questions"
    for budget in sorted({0, 1, cost // 2, cost - 1, cost, cost + 1, BUDGET}):
        want = _cold(e, budget)
        # warm: the memo holds the full answer (and those of its sub-questions)
        _cold(e, BUDGET)
        bounds._budget.left = budget
        got = interval(e, RM), bounds._budget.left
        assert got == want, (budget, cost)
    reset_budget()


def test_interval_memo_keeps_no_answer_that_ran_out_of_budget():
    e = EXPRS[0]
    _, left = _cold(e, BUDGET)
    cost = BUDGET - left
    bounds._budget.memo = {}
    bounds._budget.left = cost - 1       # runs out: a degraded answer
    interval(e, RM)
    assert not any(key[0] == e for key in bounds._budget.memo)
    bounds._budget.left = BUDGET
    assert interval(e, RM) == _cold(e, BUDGET)[0]
    reset_budget()
