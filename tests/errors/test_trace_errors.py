"""User mistakes while tracing: the right error class, the user's line, a useful hint."""
import numpy as np
import pytest

import kdsl.frontend.api as kd
from kdsl.errors import DTypeError, KernelError, KernelIndexError, KernelValueError, ShapeError
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace

M = TensorSpec((None, None), "float32")
V = TensorSpec((None,), "float32")


def _check(excinfo, line, hint):
    text = str(excinfo.value)
    assert "test_trace_errors.py" in text, text
    assert line in text, text
    assert excinfo.value.hint and hint in excinfo.value.hint, excinfo.value.hint


def test_data_dependent_if():
    def f(A):
        if A.sum() > 0:
            return A
        return -A
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "if A.sum() > 0:", "kd.where")
    assert isinstance(e.value, TypeError)


def test_int_float_of_traced_values():
    def f(A):
        return A * int(A.shape[0])
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "return A * int(A.shape[0])", "constants")

    def g(A):
        return A * float(A[0, 0])
    with pytest.raises(KernelError) as e:
        trace(g, [M])
    _check(e, "return A * float(A[0, 0])", "kd.where")


def test_len_of_symbolic_dim():
    def f(A):
        return A * len(A)
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "return A * len(A)", "A.shape[0]")


def test_range_over_symbolic_size():
    def f(A):
        for _ in range(A.shape[0]):
            A = A + 1
        return A
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "for _ in range(A.shape[0]):", "constants")


def test_iteration():
    def f(A):
        return tuple(row for row in A)
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "return tuple(row for row in A)", "kd.compute")


@pytest.mark.parametrize("call,name", [
    (lambda A: np.median(A), "median"), (lambda A: np.isnat(A), "isnat"),
    (lambda A: np.partition(A, 1), "partition"), (lambda A: np.add.outer(A, A), "outer")])
def test_unknown_numpy_functions(call, name):
    with pytest.raises(KernelError) as e:
        trace(call, [M])
    assert name in str(e.value)
    _check(e, "(lambda A: np.", "docs/kernels.md")


def test_unknown_ndarray_method():
    def f(A):
        return A.tobytes()
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "return A.tobytes()", "docs/kernels.md")
    assert "tobytes" in str(e.value)


def test_static_shape_mismatch():
    def f(A, B):
        return A + B
    with pytest.raises(ShapeError) as e:
        trace(f, [TensorSpec((3, 4), "float32"), TensorSpec((3,), "float32")])
    _check(e, "return A + B", "equal")
    assert isinstance(e.value, ValueError)


def test_matmul_inner_mismatch():
    def f(A, B):
        return A @ B
    with pytest.raises(ShapeError) as e:
        trace(f, [TensorSpec((3, 4), "float32"), TensorSpec((5, 2), "float32")])
    _check(e, "return A @ B", "A.shape[-1] == B.shape[-2]")


def test_symbolic_mismatch_becomes_a_constraint_naming_the_line():
    def f(A, B):
        return A * B
    g = trace(f, [V, V])
    (c,) = g.constraints
    assert "A.shape[0]" in c.message and "B.shape[0]" in c.message
    assert "return A * B" in c.message and "test_trace_errors.py" in c.message


def test_axis_out_of_range():
    def f(A):
        return A.sum(axis=2)
    with pytest.raises(KernelValueError) as e:
        trace(f, [M])
    _check(e, "return A.sum(axis=2)", "range(-2, 2)")
    assert isinstance(e.value, ValueError)


def test_unsupported_dtype():
    with pytest.raises(DTypeError) as e:
        TensorSpec((3,), np.complex64)
    assert "float32" in e.value.hint

    def f(A):
        return A.astype(np.complex128)
    with pytest.raises(DTypeError) as e:
        trace(f, [M])
    _check(e, "return A.astype(np.complex128)", "float32")


def test_bad_operand_dtypes():
    def f(A):
        return A & 1
    with pytest.raises(DTypeError) as e:
        trace(f, [M])
    _check(e, "return A & 1", "astype")

    def g(A):
        return A.astype(np.int8) + 1000
    with pytest.raises(DTypeError) as e:
        trace(g, [M])
    _check(e, "return A.astype(np.int8) + 1000", "wider")


def test_compute_lambda_arity():
    def f(A):
        return kd.compute(A.shape, lambda i: A[i, 0])
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "return kd.compute(A.shape, lambda i: A[i, 0])", "lambda i0, i1")


def test_reduce_over_spatial_axis():
    def f(A):
        return kd.compute((A.shape[0],), lambda i: kd.sum(A[i, 0], axis=i))
    with pytest.raises(KernelValueError) as e:
        trace(f, [M])
    _check(e, "kd.sum(A[i, 0], axis=i)", "kd.reduce_axis")


def test_reduce_axis_outside_reduction():
    def f(A):
        k = kd.reduce_axis(A.shape[1], name="k")
        return kd.compute((A.shape[0],), lambda i: A[i, k])
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "return kd.compute((A.shape[0],), lambda i: A[i, k])", "kd.sum(..., axis=k)")


def test_compute_returning_an_array():
    def f(A):
        return kd.compute((A.shape[0],), lambda i: A[i])
    with pytest.raises(ShapeError) as e:
        trace(f, [M])
    _check(e, "lambda i: A[i]", "index every dimension")


def test_returning_something_not_an_array():
    def f(A):
        return 3
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "def f(A):", "return an array")


def test_item_assignment_and_advanced_indexing():
    def f(A):
        A[0] = 1
        return A
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "A[0] = 1", "kd.where")

    def g(A):
        return A[[0, 1]]
    with pytest.raises(KernelError) as e:
        trace(g, [M])
    _check(e, "return A[[0, 1]]", "kd.compute")


def test_index_out_of_bounds_static():
    def f(A):
        return A[5]
    with pytest.raises(KernelIndexError) as e:   # numpy raises IndexError here
        trace(f, [TensorSpec((3,), "float32")])
    _check(e, "return A[5]", "range(-3, 3)")


def test_captured_numpy_array():
    W = np.ones(3)

    def f(A):
        return A * W
    with pytest.raises(KernelError) as e:
        trace(f, [V])
    _check(e, "return A * W", "argument")


def test_bad_reshape():
    def f(A):
        return A.reshape(5, -1)
    with pytest.raises(ShapeError) as e:
        trace(f, [TensorSpec((3, 4), "float32")])
    _check(e, "return A.reshape(5, -1)", "multiply")


def test_outside_of_a_trace():
    with pytest.raises(KernelError) as e:
        kd.compute((3,), lambda i: i)
    _check(e, "kd.compute((3,), lambda i: i)", "@kd.kernel")


def test_traceback_ends_in_user_code():
    def f(A):
        return A.sum(axis=7)
    with pytest.raises(KernelValueError) as e:
        trace(f, [M])
    tb = e.tb
    files = []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert files[-1].endswith("test_trace_errors.py")
    assert not any("/kdsl/frontend/" in f for f in files[2:])  # only the entry frames


def test_np_asarray_of_traced_value():
    def f(A):
        return np.asarray(A) + 1
    with pytest.raises(KernelError) as e:
        trace(f, [M])
    _check(e, "return np.asarray(A) + 1", "np.exp")
