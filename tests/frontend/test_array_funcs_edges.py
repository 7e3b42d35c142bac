"""numpy's array functions inside kernels: symbolic sizes, edge values, dtypes, the stage
structure of einsum, and the errors (issue 25 item 2).  The broad numpy comparison is in
test_array_funcs.py."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import DTypeError, KernelError, KernelIndexError, KernelValueError, ShapeError
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace

R = np.random.default_rng()
BACKENDS = ["numpy", "interp", "cpu"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbolic_lengths_one_kernel_many_sizes(backend):
    @kd.kernel
    def f(x):
        n = x.shape[0]
        return (kd.arange(n) * x + kd.linspace(-1, 2, n) + np.arange(n - 1, -1, -1, like=x),
                kd.eye(n, n + 1, k=-1, dtype=np.int32), kd.zeros((n, 2), np.int8) + 1)

    for size in (0, 1, 2, 7):
        x = R.random(size)
        a, e, z = f(x, backend=backend)
        np.testing.assert_allclose(a, np.arange(size) * x + np.linspace(-1, 2, size)
                                   + np.arange(size - 1, -1, -1), rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(e, np.eye(size, size + 1, k=-1, dtype=np.int32))
        assert e.dtype == np.int32 and z.dtype == np.int8 and z.shape == (size, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_take_checks_indices_like_numpy(backend):
    f = kd.kernel(lambda a, i: np.take(a, i, axis=0))
    a = R.random((5, 2))
    i = np.array([0, -5, 4, -1])
    np.testing.assert_array_equal(f(a, i, backend=backend), np.take(a, i, axis=0))
    for bad in ([5], [-6], [0, 99]):
        with pytest.raises(KernelIndexError):       # numpy raises IndexError here
            f(a, np.array(bad), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_edge_values(backend):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 2.0 ** 52 + 1, 2.0 ** 60,
                  np.inf, -np.inf, np.nan, -0.0, -0.3, 1e300, 5e-324])
    r = kd.kernel(lambda x: np.round(x))(x, backend=backend)
    np.testing.assert_array_equal(r, np.round(x))
    np.testing.assert_array_equal(np.signbit(r), np.signbit(np.round(x)))     # -0.0 kept
    r2 = kd.kernel(lambda x: np.round(x, 1))(x[:6] / 10, backend=backend)
    np.testing.assert_array_equal(r2, np.round(x[:6] / 10, 1))


@pytest.mark.parametrize("fn,args", [
    (lambda a, b: np.einsum("i,i->i", a, b), (np.ones(3, np.int8), np.ones(3, np.uint8))),
    (lambda a: np.var(a), (np.ones(3, np.float32),)),
    (lambda a: np.round(a), (np.ones(3, bool),)),
    (lambda a: np.cumsum(a), (np.ones(3, np.int8),)),
    (lambda a: np.cumsum(a), (np.ones(3, np.float16),)),
    (lambda a: np.cumprod(a, dtype=np.float32), (np.ones(3, np.int32),)),
    (lambda a: np.std(a, dtype=np.float32), (np.ones(3, np.int64),)),
    (lambda a: np.diff(a), (np.ones(3, np.uint8),)),
    (lambda a, b: np.concatenate([a, b]), (np.ones(3, np.int8), np.ones(3, np.uint16))),
    (lambda a, b: np.outer(a, b), (np.ones(3, np.float16), np.ones(2, np.int8))),
    (lambda a: np.nan_to_num(a), (np.ones(3, np.float16),)),
    (lambda a: np.count_nonzero(a), (np.ones(3, np.float16),)),
])
def test_result_dtypes_are_numpys(fn, args):
    out = kd.kernel(fn)(*args, backend="interp")
    assert out.dtype == np.asarray(fn(*args)).dtype


def test_var_of_empty_and_too_few_elements():
    f = kd.kernel(lambda a: (np.var(a, axis=0), np.std(a, ddof=4)))
    with np.errstate(all="ignore"):
        for shape in [(0, 3), (2, 1)]:
            a = R.random(shape)
            v, s = f(a, backend="interp")
            np.testing.assert_array_equal(v, np.var(a, axis=0))
            np.testing.assert_array_equal(s, np.std(a, ddof=4))


def test_concatenate_empty_parts():
    a, e = R.random(3), np.zeros(0)
    f = kd.kernel(lambda a, b: np.concatenate([b, a, b]), specialize=True)
    np.testing.assert_array_equal(f(a, e, backend="cpu"), a)
    # symbolic shapes: a part's read is taken only inside that part, so an empty part is
    # never read (F44: its loads touch no memory while it is empty)
    g = kd.kernel(lambda a, b: np.concatenate([b, a, b]))
    np.testing.assert_array_equal(g(a, e, backend="interp"), a)
    np.testing.assert_array_equal(g(e, a, backend="interp"), np.concatenate([a, a]))
    np.testing.assert_array_equal(g(a, a, backend="interp"), np.concatenate([a, a, a]))


def test_einsum_is_one_contraction_stage():
    spec = TensorSpec((None, None), np.float32)
    g = trace(lambda a, b: np.einsum("ij,kj->ik", a, b), [spec, spec])
    (st,) = g.stages
    assert st.name == "einsum" and [a.var.name for a in st.axes] == ["i0", "i1"]
    assert [a.var.name for a in st.reduce_axes] == ["r0"]
    g2 = trace(lambda a: np.einsum("ij->ji", a), [spec])      # no summed label: lazy, the
    assert [s.reduce_axes for s in g2.stages] == [()]         # copy made at the return only


def test_kd_names_and_methods():
    x = R.random((4, 5))
    f = kd.kernel(lambda x: (kd.var(x, axis=1), x.std(), x.round(1), x.clip(0.2, 0.7),
                             x.cumsum(axis=1), kd.einsum("ij->j", x), kd.pad(x, 1)))
    outs = f(x, backend="interp")
    refs = (x.var(axis=1), x.std(), x.round(1), x.clip(0.2, 0.7), x.cumsum(axis=1),
            np.einsum("ij->j", x), np.pad(x, 1))
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o, r, rtol=1e-12)


def test_cumsum_is_exact_on_a_longer_axis():
    x = R.integers(-100, 100, 700).astype(np.int64)
    np.testing.assert_array_equal(kd.kernel(lambda x: np.cumsum(x))(x, backend="cpu"), np.cumsum(x))


M = TensorSpec((None, None), np.float64)


@pytest.mark.parametrize("fn,err,words", [
    (lambda a: np.where(a > 0), KernelError, "np.nonzero"),
    (lambda a: np.nonzero(a), KernelError, "data-dependent"),
    (lambda a: np.unique(a), KernelError, "data-dependent"),
    (lambda a: np.sort(a), KernelError, "sort"),
    (lambda a: np.where(a > 0, a), KernelValueError, "both or neither"),
    (lambda a: np.einsum("ij,jk", a), KernelValueError, "2 subscript terms for 1 operands"),
    (lambda a: np.einsum("ijk", a), KernelValueError, "name 3"),
    (lambda a: np.einsum("ij->k", a), KernelValueError, "'k' does not appear"),
    (lambda a: np.einsum("i?", a), KernelValueError, "invalid subscript"),
    (lambda a: np.pad(a, 2, mode="median"), KernelError, "mode 'median'"),
    (lambda a: np.pad(a, -1), KernelValueError, "negative"),
    (lambda a: np.concatenate([a, a[0]]), KernelValueError, "same number of dimensions"),
    (lambda a: np.concatenate([a, np.ones((2, 2, 2))]), KernelValueError, "same number"),
    (lambda a: np.take(a, a), KernelError, "must be integers"),
    (lambda a: np.take(a, 0, mode="nope"), KernelValueError, "mode must be"),
    (lambda a: np.round(a, 1.5), KernelError, "static int"),
    (lambda a: np.diff(a, -1), KernelValueError, "order"),
    (lambda a: np.unstack(a), KernelError, "static length"),
    (lambda a: np.repeat(a, [1, 2]), KernelError, "data-dependent"),
])
def test_refusals_say_why(fn, err, words):
    with pytest.raises(err) as e:
        trace(fn, [M])
    assert words in str(e.value)


def test_static_shape_mismatches():
    s = TensorSpec((3, 4), np.float64)
    with pytest.raises(ShapeError):
        trace(lambda a, b: np.concatenate([a, b], axis=1), [s, TensorSpec((2, 4), np.float64)])
    with pytest.raises(ShapeError):
        trace(lambda a, b: np.tensordot(a, b, axes=1), [s, s])
    with pytest.raises(ShapeError):
        trace(lambda a, b: np.einsum("ij,ij->i", a, b), [s, TensorSpec((3, 5), np.float64)])


def test_captured_global_array_is_refused_but_one_made_in_the_kernel_is_a_constant():
    W = np.arange(4.0)

    with pytest.raises(KernelError) as e:
        kd.kernel(lambda x: x * W)(np.ones(4), backend="numpy")
    assert "argument" in e.value.hint

    def f(x):
        c = np.array([3.0, -1.0, 0.5, 2.0])      # a local made while tracing
        return x * c + np.linspace(0, 1, 4)
    x = R.random(4)
    np.testing.assert_array_equal(kd.kernel(f)(x, backend="cpu"), f(x))


def test_einsum_casting_and_take_of_a_list():
    with pytest.raises(DTypeError):          # numpy: TypeError (casting='safe')
        trace(lambda a: np.einsum("ij->i", a, dtype=np.float32), [M])
    x = R.random((3, 4))
    f = kd.kernel(lambda a: (np.einsum("ij->i", a, dtype=np.float32, casting="same_kind"),
                             np.take(a, [0, -1, 2], axis=1)))
    e, t = f(x, backend="interp")
    assert e.dtype == np.float32
    np.testing.assert_allclose(e, x.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(t, np.take(x, [0, -1, 2], axis=1))


def test_numpy_creation_of_a_traced_size_points_at_kd_and_like():
    with pytest.raises(KernelError) as e:       # numpy converts the size before kdsl sees it
        trace(lambda a: np.arange(a.shape[0]), [M])
    assert "kd.arange(n)" in e.value.hint and "like=" in e.value.hint


@pytest.mark.parametrize("mode", ["edge", "wrap"])     # (reflect/symmetric: a select the prover
def test_pad_of_symbolic_axes_needs_no_data_check(mode):   # does not see through; data-checked)
    """A padded read clamps to the array's own edges: proven in range once the axis has an
    element, so one call-time check of its length replaces a data check (which compiled and
    ran the producers before each call: the docs' einsum/std/pad example took ~15 s on cpu)."""
    def f(a):
        return np.pad(a * 2.0 + 1.0, ((1, 2), (0, 3)), mode=mode)
    g = trace(f, [M])
    assert not g.data_checks
    k = kd.kernel(f)
    x = R.random((3, 4))
    for be in ("numpy", "interp"):
        np.testing.assert_allclose(k(x, backend=be), f(x))
        with pytest.raises(KernelValueError, match="can't extend empty axis 0"):
            k(np.ones((0, 4)), backend=be)
