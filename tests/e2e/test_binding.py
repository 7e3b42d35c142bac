"""Calling kernels like Python functions: keywords, defaults, keyword-only parameters,
nested kernels, numpy scalars, array-likes, read-only out=, callable objects, and the
errors that used to escape as raw Python exceptions."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.frontend.trace import trace
from kdsl.frontend.spec import TensorSpec

BACKENDS = ["numpy", "interp", "cpu"]


def _backend(name):
    if name not in kd.backends():
        pytest.skip(f"backend {name} is not installed")
    return name


@pytest.fixture
def rng():
    return np.random.default_rng()


@kd.kernel
def axpy(x, y, alpha=2.0, *, beta=1.0):
    return alpha * x + beta * y


# ------------------------------------------------------------------ keywords and defaults
@pytest.mark.parametrize("backend", BACKENDS)
def test_keywords_and_defaults_bind_like_python(backend, rng):
    _backend(backend)
    x = rng.random(7).astype(np.float32)
    y = rng.random(7).astype(np.float32)
    X, Y = x.astype(np.float64), y.astype(np.float64)
    cases = [
        (lambda: axpy(x, y, backend=backend), 2.0 * X + Y),
        (lambda: axpy(x, y, 3.0, backend=backend), 3.0 * X + Y),
        (lambda: axpy(y=y, x=x, alpha=0.5, backend=backend), 0.5 * X + Y),
        (lambda: axpy(x, y, beta=4.0, backend=backend), 2.0 * X + 4.0 * Y),
        (lambda: axpy(x, alpha=-1.0, y=y, beta=0.0, backend=backend), -X),
    ]
    for _ in range(4):   # again and again: cached launchers and the fast path
        for call, ref in cases:
            np.testing.assert_allclose(call(), ref, rtol=1e-6)


@pytest.mark.parametrize("call, text", [
    (lambda x: axpy(x), "missing a required argument: 'y'"),
    (lambda x: axpy(x, x, gamma=1.0), "unexpected keyword argument 'gamma'"),
    (lambda x: axpy(x, x, 1.0, 2.0), "too many positional arguments"),
    (lambda x: axpy(x, x=x, y=x), "multiple values for argument 'x'"),
])
def test_binding_errors_are_argument_errors_at_the_call(call, text):
    x = np.ones(3, np.float32)
    with pytest.raises(kd.ArgumentError) as ei:
        call(x)
    msg = str(ei.value)
    assert text in msg
    assert "axpy(x, y, alpha=2.0, *, beta=1.0)" in msg           # what would work
    assert ei.value.loc is not None and "lambda x: axpy(x" in ei.value.loc.code   # the call


def test_positional_calls_with_every_argument_keep_the_fast_path():
    _backend("cpu")

    @kd.kernel
    def scale(x, s=3.0):
        return x * s

    x = np.arange(5, dtype=np.float32)
    for _ in range(5):
        np.testing.assert_array_equal(scale(x, 2.0), x * 2)
    assert scale._fast is not None          # the native launcher of that specialisation
    for _ in range(3):                      # an omitted default: the launcher declines it
        np.testing.assert_array_equal(scale(x), x * 3)


def test_keyword_only_kernels_reject_extra_positionals_after_warm_calls():
    x = np.ones(4, np.float32)
    for _ in range(4):
        axpy(x, x, 1.0, beta=2.0)
    with pytest.raises(kd.ArgumentError, match="too many positional"):
        axpy(x, x, 1.0, 2.0)


def test_reserved_parameter_names_are_refused():
    def f(x, out):
        return x
    with pytest.raises(kd.KernelError, match="'out' is reserved"):
        kd.kernel(f)


def test_none_default_is_a_compile_time_constant():
    @kd.kernel
    def norm1(x, axis=None, bias=None):
        s = abs(x).sum(axis=axis)
        return s if bias is None else s + bias

    m = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    np.testing.assert_allclose(norm1(m), np.abs(m).sum())
    np.testing.assert_allclose(norm1(m, bias=1.5), np.abs(m).sum() + 1.5)
    np.testing.assert_allclose(norm1(m, None, 1.5), np.abs(m).sum() + 1.5)


def test_constants_of_equal_value_and_different_type_trace_apart():
    @kd.kernel(constants=("k",))
    def f(x, k):
        return x * (k / 2) if isinstance(k, float) else x * (k // 2)

    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(f(x, 3), x * 1)
    np.testing.assert_array_equal(f(x, 3.0), x * 1.5)


def test_lower_and_source_take_keywords():
    text = str(axpy.lower(TensorSpec((None,), kd.float32), y=TensorSpec((None,), kd.float32),
                          beta=0.5, backend="numpy"))
    assert "axpy" in text


# ------------------------------------------------------------------ nested kernels
@kd.schedule("cpu", vectorize=8)
def _inner(x, y=None, *, scale=2.0):
    return x * scale if y is None else x * scale + y


inner = kd.kernel(_inner)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_kernels_trace_inline(backend, rng):
    _backend(backend)

    @kd.kernel
    def outer(a, b):
        return inner(a) + inner(a, b, scale=0.5) + axpy(a, b, beta=3.0).sum()

    a = rng.random(9).astype(np.float32)
    b = rng.random(9).astype(np.float32)
    A, B = a.astype(np.float64), b.astype(np.float64)
    ref = 2 * A + (0.5 * A + B) + (2 * A + 3 * B).sum()
    before = len(inner._cache)
    np.testing.assert_allclose(outer(a, b, backend=backend), ref, rtol=1e-5)
    assert len(inner._cache) == before       # nothing of the inner kernel was compiled
    # the inner kernel still works on its own
    np.testing.assert_allclose(inner(a, backend=backend), 2 * A, rtol=1e-6)


def test_nested_kernel_call_keywords_of_the_call_are_errors():
    @kd.kernel
    def outer(a):
        return inner(a, out=a)

    with pytest.raises(kd.KernelError, match="out= has no meaning") as ei:
        outer(np.ones(3, np.float32), backend="numpy")
    assert "inner(a, out=a)" in ei.value.loc.code


# ------------------------------------------------------------------ numpy scalars
SCALARS = [np.float32(2.5), np.float64(2.5), np.float16(1.5), np.int8(-3), np.int32(3),
           np.int64(-7), np.uint8(200), np.bool_(True), 2.5, 3, True]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s", SCALARS, ids=lambda s: type(s).__name__)
def test_numpy_scalar_arguments_promote_like_numpy(backend, s):
    _backend(backend)

    @kd.kernel
    def mul(x, s):
        return x * s

    for x in (np.arange(5, dtype=np.float32), np.arange(5, dtype=np.int16)):
        ref = x * s
        for _ in range(4):      # first call, cached calls
            got = mul(x, s, backend=backend)
            assert got.dtype == ref.dtype, (type(s), x.dtype)
            np.testing.assert_allclose(got, ref, rtol=1e-3)


def test_numpy_scalar_argument_in_lower():
    func = axpy.lower(TensorSpec((None,), kd.float32), TensorSpec((None,), kd.float32),
                      np.float64(2.0), backend="numpy")
    assert "float64" in str(func)


# ------------------------------------------------------------------ array-likes
class WithArray:
    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)


class WithInterface:
    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_likes_are_accepted_on_host_backends(backend, rng):
    _backend(backend)
    x = rng.random((3, 4)).astype(np.float32)
    y = rng.random((3, 4)).astype(np.float32)[:, ::-1]      # a strided view
    for _ in range(3):
        got = axpy(WithArray(x), WithInterface(y), backend=backend)
        np.testing.assert_allclose(got, 2 * x.astype(np.float64) + y, rtol=1e-6)


def test_array_interface_objects_are_not_copied():
    y = np.arange(6.0).reshape(2, 3)
    from kdsl.runtime import foreign
    (conv,) = foreign.host_arrays(axpy, (WithInterface(y),) + (None,) * 3)[0][:1]
    assert np.shares_memory(conv, y)


# ------------------------------------------------------------------ out= and objects
@pytest.mark.parametrize("backend", BACKENDS)
def test_read_only_out_is_an_argument_error(backend):
    _backend(backend)
    x = np.arange(4.0)
    out = np.zeros(4)
    for _ in range(4):
        axpy(x, x, out=out, backend=backend)             # warm: cached and fast launchers
    ro = np.zeros(4)
    ro.flags.writeable = False
    for bad in (ro, np.frombuffer(b"\0" * 32, dtype=np.float64)):
        with pytest.raises(kd.ArgumentError, match="out= array is read-only") as ei:
            axpy(x, x, out=bad, backend=backend)
        assert "writeable" in str(ei.value)
        assert not bad.any()
    with pytest.raises(kd.ArgumentError, match="out= array is read-only"):
        axpy(ro, x, out=ro, backend=backend)            # sharing memory with an input too


def test_kernel_of_a_callable_object():
    class Scale:
        """Multiply by k."""

        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

    k = kd.kernel(Scale(3))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(k(x, backend="numpy"), x * 3)
    assert "Scale" in repr(k)
    with pytest.raises(kd.KernelError, match="needs a function"):
        kd.kernel(5)


# ------------------------------------------------------------------ errors with real causes
def test_python_error_in_the_kernel_names_the_line_and_the_signature():
    @kd.kernel
    def rows(A):
        n, m = A.shape
        return A * n

    with pytest.raises(kd.KernelError) as ei:
        rows(np.ones(3, np.float32), backend="numpy")
    msg = str(ei.value)
    assert "ValueError: not enough values to unpack" in msg and "float32[?]" in msg
    assert "check the arguments' ranks" not in msg
    assert ei.value.loc.code == "n, m = A.shape"


def test_python_error_raised_inside_kdsl_points_at_the_users_line():
    @kd.kernel
    def f(A):
        return kd.compute((3,), lambda i: A[i], name=["x"])    # a name kdsl cannot use

    with pytest.raises(kd.KernelError) as ei:
        f(np.ones(3, np.float32), backend="numpy")
    assert "kdsl failed on this line" in str(ei.value)
    assert "kd.compute((3,)" in ei.value.loc.code


def test_unknown_attribute_of_a_traced_array():
    @kd.kernel
    def f(A):
        return A.foo + 1

    with pytest.raises(AttributeError) as ei:
        f(np.ones(3, np.float32), backend="numpy")
    assert isinstance(ei.value, kd.KernelError)
    assert "no attribute 'foo'" in str(ei.value) and ei.value.loc.code == "return A.foo + 1"


# ------------------------------------------------------------------ regressions
@pytest.mark.parametrize("backend", BACKENDS)
def test_index_style_reduction_of_an_expression_holding_a_reduction(backend, rng):
    """The inner reduction's axis is bound inside the outer one's source: hoisting the outer
    reduction must not range over it (it raised 'reduce axis k is used outside')."""
    _backend(backend)

    @kd.kernel
    def f(A):
        n, m = A.shape

        def row(i):
            k1, k2 = kd.reduce_axis(m), kd.reduce_axis(m)
            v = kd.sum(A[i, k1], axis=k1)
            return kd.sum(A[i, k2] * v, axis=k2)
        return kd.compute((n,), row)

    a = rng.random((4, 5)).astype(np.float32)
    A = a.astype(np.float64)
    np.testing.assert_allclose(f(a, backend=backend), A.sum(1) * A.sum(1), rtol=1e-5)


def test_trace_of_a_keyword_only_function():
    def f(x, *, s=2.0):
        return x * s
    g = trace(f, [TensorSpec((None,), kd.float32), kd.ScalarSpec(float)] if hasattr(
        kd, "ScalarSpec") else [TensorSpec((None,), kd.float32), 3.0])
    assert len(g.outputs) == 1
