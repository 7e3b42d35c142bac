"""trace(): parameters, symbolic sizes, constants, outputs, constraints."""
import numpy as np
import pytest

import kdsl.frontend.api as kd
from kdsl import dtypes as dt
from kdsl.errors import ShapeError
from kdsl.frontend.spec import ScalarSpec, TensorSpec
from kdsl.frontend.trace import trace
from kdsl.graph import Input, Tensor
from kdsl.ir import nodes as n
from fe_eval import run, trace_run


def test_params_and_symbolic_dims():
    def f(A, s, B):
        return A * s + B
    g = trace(f, [TensorSpec((None, 4), "float32"), ScalarSpec(float), TensorSpec(("n", 4), np.float32)])
    A, s, B = g.params
    assert isinstance(A, Tensor) and isinstance(A.op, Input) and A.op.index == 0
    assert isinstance(s, n.Var) and s.name == "s" and s.dtype is dt.float64
    assert B.op.index == 2 and A.dtype is dt.float32
    assert A.shape[0].name == "A_0" and isinstance(A.shape[1], n.Const) and A.shape[1].value == 4
    assert B.shape[0].name == "n"
    assert g.inputs == (A, B) and g.scalars == (s,) and g.name == "f"
    assert g.loc.line == f.__code__.co_firstlineno
    # broadcasting A_0 against n: assumed equal, checked at call time
    assert len(g.constraints) == 1
    out = g.outputs[0]
    assert out.shape[0] is A.shape[0] or out.shape[0] is B.shape[0]


def test_named_dims_are_shared():
    g = trace(lambda A, B: A + B, [TensorSpec(("n", "m"), "float64"), TensorSpec(("n", "m"), "float64")])
    A, B = g.params
    assert A.shape[0] is B.shape[0] and not g.constraints


def test_static_broadcast_mismatch_raises_at_once():
    with pytest.raises(ShapeError, match="could not be broadcast"):
        trace(lambda A, B: A + B, [TensorSpec((3, 4), "float64"), TensorSpec((5,), "float64")])


def test_constraint_with_static_size_substitutes_everywhere():
    g = trace(lambda A, B: A * B, [TensorSpec((None,), "float64"), TensorSpec((3,), "float64")])
    assert g.outputs[0].shape[0] == n.const(3)
    assert g.stages[0].axes[0].dom.extent == n.const(3)
    (c,) = g.constraints
    assert c.lhs is g.params[0].shape[0]
    with pytest.raises(ValueError, match="A.shape\\[0\\]"):
        run(g, np.ones(4), np.ones(3))
    (out,) = run(g, np.ones(3) * 2, np.arange(3.0))
    np.testing.assert_array_equal(out, [0, 2, 4])


def test_constants_are_python_values():
    def f(A, k, flag):
        return A * k if flag else A - k
    g = trace(f, [TensorSpec((None,), "float32"), ScalarSpec(int, 3), True], constants=("k", "flag"))
    assert len(g.params) == 1
    (out,) = run(g, np.ones(2, np.float32))
    np.testing.assert_array_equal(out, [3, 3])
    g, (out,) = trace_run(f, np.ones(2, np.float32), 5, False, constants=("k", "flag"))
    np.testing.assert_array_equal(out, [-4, -4])


def test_tuple_outputs_duplicates_and_inputs_get_copies():
    def f(A, B):
        s = A.sum(axis=0)
        return s, s, A, B.T
    g, (s1, s2, a, bt) = trace_run(f, np.ones((2, 3)), np.arange(6.0).reshape(2, 3))
    assert [st.name for st in g.stages] == ["sum", "copy", "copy_1", "transpose"]
    assert len({id(t) for t in g.outputs}) == 4
    np.testing.assert_array_equal(s2, [2, 2, 2])
    np.testing.assert_array_equal(bt, np.arange(6.0).reshape(2, 3).T)


def test_dead_stages_are_dropped():
    def f(A):
        A.sum(axis=0)
        return A.max(axis=1)
    g = trace(f, [TensorSpec((None, None), "float64")])
    assert [s.name for s in g.stages] == ["max"]


def test_zero_d_output():
    g, (out,) = trace_run(lambda A: A.sum(), np.arange(5.0))
    assert out.shape == () and out == 10
    assert g.stages[0].axes == ()


def test_tensorspec_public_behaviour():
    t = TensorSpec((3, "n", None), np.float16)
    assert t.shape == (3, "n", None) and t.dtype is dt.float16 and t.ndim == 3 and t.contiguous
    assert TensorSpec.from_array(np.ones((2, 3))[:, ::2]).contiguous is False
    assert TensorSpec.from_array(np.ones((2, 3)), specialize=True).shape == (2, 3)
    assert TensorSpec((4,), "float32") == TensorSpec(4, kd_f32())


def kd_f32():
    return dt.float32


def test_non_contiguous_input_flag():
    g = trace(lambda A: A + 1, [TensorSpec((None,), "float32", contiguous=False)])
    assert g.params[0].op.contiguous is False


def test_every_stage_has_a_user_location():
    def f(A):
        n_, m = A.shape
        k = kd.reduce_axis(m)
        B = kd.compute((n_,), lambda i: kd.sum(A[i, k], axis=k) * 2)
        return B, A @ A.T, A.mean()
    g = trace(f, [TensorSpec((None, None), "float64")])
    for s in g.stages:
        assert s.loc is not None and s.loc.file == __file__, s.name


def test_bfloat16_dtype_rules():
    bf = TensorSpec((None, None), "bfloat16")
    f16 = TensorSpec((None, None), "float16")

    def f(A, B):
        return A + 1.5, A * B, kd.exp(A), A.sum(axis=1), A.mean(), A @ A, A.max(axis=0), A < 1
    g = trace(f, [bf, f16])
    got = [t.dtype for t in g.outputs]
    assert got == [dt.bfloat16, dt.float32, dt.bfloat16, dt.bfloat16, dt.bfloat16, dt.bfloat16,
                   dt.bfloat16, dt.bool_]
    assert g.stage("sum").dtype is dt.float32 and g.stage("matmul").dtype is dt.float32
    assert g.stage("max").dtype is dt.bfloat16


def test_copy_method_and_repr():
    g, (out,) = trace_run(lambda A: A.copy(), np.arange(3.0))
    assert [s.name for s in g.stages] == ["copy"]
    np.testing.assert_array_equal(out, [0, 1, 2])
    seen = []
    trace(lambda A: seen.append(repr(A)) or A, [TensorSpec((None, 3), "float32")])
    assert seen == ["<traced float32 array shape=(A_0, 3)>"]


def test_dtype_compares_with_numpy():
    import kdsl
    assert kdsl.float32 == np.float32 and kdsl.float32 == np.dtype("float32") and kdsl.float32 == "float32"
    assert kdsl.float32 != np.float64 and kdsl.bool_ == np.bool_ and not (kdsl.int8 == 3)
    from kdsl.dtypes import as_dtype
    assert {kdsl.float32: 1}[as_dtype(np.float32)] == 1
