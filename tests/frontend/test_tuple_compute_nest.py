"""An elementwise tuple compute (``kd.compute`` returning a tuple, issue 25 item 3) lowers to
one loop nest on cpu: its members are sibling stages over the same axes, and the cpu
pipeline's ``fuse_loops`` runs them in one nest (one parallel region, one pass over the
inputs), with and without schedule hints; the values are numpy's."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect


def _members(A, B):
    return kd.compute(A.shape, lambda i, j: (A[i, j] + B[j], A[i, j] * B[j], kd.exp(A[i, j])))


def _top_loops(body):
    """The outermost loops of a lowered body (each one loop nest)."""
    tops = []

    def walk(s):
        if isinstance(s, n.For):
            tops.append(s)
        elif isinstance(s, n.Seq):
            for x in s.stmts:
                walk(x)
        elif hasattr(s, "body") and isinstance(getattr(s, "body"), n.Stmt):
            walk(s.body)
    walk(body)
    return tops


#: hints that keep the members' loops alike (a tile or split hint names one member's stage --
#: the first, ``compute`` -- and the others keep the default loops: separate nests then)
@pytest.mark.parametrize("hints", [{}, {"vectorize": 8}, {"parallel": True, "unroll": 2}])
def test_tuple_compute_is_one_loop_nest_on_cpu(hints, rng):
    fn = kd.schedule("cpu", **hints)(_members) if hints else _members
    k = kd.kernel(fn)
    func = k.lower(kd.TensorSpec((None, None), kd.float32), kd.TensorSpec((None,), kd.float32),
                   backend="cpu")
    tops = _top_loops(func.body)
    assert len(tops) == 1, f"{len(tops)} loop nests"
    stores = collect(tops[0], lambda x: isinstance(x, n.Store))
    assert len({s.buffer.name for s in stores}) == 3
    A = rng.uniform(-2, 2, (7, 13)).astype(np.float32)[:, ::2]
    B = rng.uniform(-2, 2, 7).astype(np.float32)
    s, p, e = k(A, B, backend="cpu")
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    np.testing.assert_allclose(s, A64 + B64, rtol=1e-6)
    np.testing.assert_allclose(p, A64 * B64, rtol=1e-6)
    np.testing.assert_allclose(e, np.exp(A64), rtol=1e-6)
    assert k(A[:0], B, backend="cpu")[0].shape == (0, 7)
