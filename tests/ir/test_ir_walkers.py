"""The fast walkers of kdsl.ir.visitor agree with the generic ``collect``: ``collect_stmts``
(statement predicates, expressions skipped) and ``free_vars`` on whole lowered kernels."""
import pytest

import kdsl as kd
from kdsl.frontend.spec import TensorSpec
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect, collect_stmts, free_vars, uses_var


def _softmax(x):
    e = kd.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _matmul(A, B):
    return A @ B


@pytest.fixture(scope="module", params=["cuda", "cpu"])
def bodies(request):
    out = []
    for fn, specs in ((_softmax, (TensorSpec(("n", 37), "float32"),)),
                      (_matmul, (TensorSpec((33, 20), "float32"), TensorSpec((20, 17), "float32")))):
        out.append(kd.kernel(fn).lower(*specs, backend=request.param).body)
    return out


PREDS = [
    lambda x: isinstance(x, n.Stmt),
    lambda x: type(x) is n.Allocate,
    lambda x: type(x) is n.For and x.kind is n.ForKind.BOUND,
    lambda x: type(x) in (n.Store, n.AsyncCopy),
    lambda x: type(x) is n.IfThenElse,
]


@pytest.mark.parametrize("k", range(len(PREDS)))
def test_collect_stmts_is_collect_for_statement_predicates(bodies, k):
    for body in bodies:
        want = collect(body, PREDS[k])
        got = collect_stmts(body, PREDS[k])
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
    assert any(collect_stmts(body, PREDS[0]) for body in bodies)


def test_free_vars_and_uses_var_match_collect(bodies):
    for body in bodies:
        vs = collect(body, lambda x: isinstance(x, n.Var))
        assert vs and free_vars(body) == set(vs)
        loops = collect(body, lambda x: type(x) is n.For)
        assert loops and all(uses_var(body, f.var) for f in loops)
        assert not uses_var(body, n.Var(vs[0].dtype, vs[0].name))   # identity, not name
