"""``@`` and kd.matmul: numpy's 1-D / 2-D / batched rules, dtypes and stage shape."""
import numpy as np
import pytest

import kdsl.frontend.api as kd
from kdsl import dtypes as dt
from fe_eval import trace_run

rng = np.random.default_rng(3)


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 2)), ((3, 4), (4,)),
                                   ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 1), (1, 1)),
                                   ((0, 3), (3, 2)), ((3, 0), (0, 2)), ((2, 3, 4), (2, 4, 1))])
@pytest.mark.parametrize("style", ["op", "kd", "np"])
def test_matmul_matches_numpy(sa, sb, style):
    a, b = rng.random(sa), rng.random(sb)
    f = {"op": lambda a, b: a @ b, "kd": lambda a, b: kd.matmul(a, b),
         "np": lambda a, b: np.matmul(a, b)}[style]
    # broadcasting a size-1 batch dim against another size needs static shapes
    g, (out,) = trace_run(f, a, b, specialize=sa == (2, 1, 3, 4))
    ref = a @ b
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref)
    (s,) = g.stages
    assert s.name == "matmul" and s.origin == "matmul"
    assert [x.name for x in s.axes] == [f"i{j}" for j in range(ref.ndim)]
    assert [x.name for x in s.reduce_axes] == ["r0"]


def test_matmul_unifies_inner_dims_with_a_constraint():
    a, b = rng.random((3, 4)), rng.random((4, 5))
    g, _ = trace_run(lambda a, b: a @ b, a, b)
    assert len(g.constraints) == 1
    c = g.constraints[0]
    assert {c.lhs.name, c.rhs.name} == {"a_1", "b_0"}
    assert "a.shape[1]" in c.message and "b.shape[0]" in c.message and "matmul" in c.message
    # the stage uses one representative for k
    assert g.stages[0].reduce_axes[0].dom.extent is c.lhs


@pytest.mark.parametrize("da,db,expect", [("float16", "float16", "float16"),
                                          ("int32", "int32", "int32"),
                                          ("float32", "float64", "float64"),
                                          ("int8", "float32", "float32")])
def test_matmul_dtypes(da, db, expect):
    a = rng.integers(0, 3, (3, 40)).astype(da)
    b = rng.integers(0, 3, (40, 2)).astype(db)
    g, (out,) = trace_run(lambda a, b: a @ b, a, b)
    assert out.dtype == np.dtype(expect)
    np.testing.assert_allclose(out.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))
    if da == "float16":
        assert g.stage("matmul").dtype is dt.float32  # accumulates in float32


def test_matmul_dtype_argument_and_bool():
    a, b = rng.integers(0, 3, (2, 3)).astype(np.int8), rng.integers(0, 3, (3, 2)).astype(np.int8)
    _, (out,) = trace_run(lambda a, b: kd.matmul(a, b, dtype=np.float64), a, b)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, a.astype(np.float64) @ b)
    ab, bb = a > 0, b > 1
    _, (out,) = trace_run(lambda a, b: a @ b, ab, bb)
    np.testing.assert_array_equal(out, ab @ bb)


def test_matmul_then_elementwise_and_reduction():
    a, b = rng.random((3, 4)), rng.random((4, 5))
    g, (out,) = trace_run(lambda a, b: kd.tanh(a @ b + 1).sum(axis=0), a, b)
    np.testing.assert_allclose(out, np.tanh(a @ b + 1).sum(axis=0))
    assert [s.name for s in g.stages] == ["matmul", "sum"]
