"""Basic indexing, slices (negative steps, symbolic sizes), transpose and reshape."""
import numpy as np
import pytest

import kdsl.frontend.api as kd  # noqa: F401
from fe_eval import trace_run

KEYS = [
    lambda a: a[1], lambda a: a[-1], lambda a: a[:, 2], lambda a: a[1:3], lambda a: a[::-1],
    lambda a: a[::2, ::-2], lambda a: a[-2:, :-1], lambda a: a[None, :, None], lambda a: a[..., 0],
    lambda a: a[1:-1, 1:-1], lambda a: a[5:], lambda a: a[:-9], lambda a: a[-9:], lambda a: a[:9],
    lambda a: a[3:0:-1], lambda a: a[-1:-5:-2, 2], lambda a: a[::-3], lambda a: a[1, 2],
    lambda a: a[..., None], lambda a: a[2:1], lambda a: a[0:100:3],
]


@pytest.mark.parametrize("k", range(len(KEYS)))
@pytest.mark.parametrize("specialize", [False, True])
@pytest.mark.parametrize("shape", [(4, 5), (6, 7), (3, 3)])
def test_getitem_matches_numpy(k, specialize, shape):
    f = KEYS[k]
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    _, (out,) = trace_run(f, a, specialize=specialize)
    ref = f(a)
    assert out.shape == np.shape(ref)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("k", [3, 4, 6, 9, 10, 14, 16])
def test_getitem_small_and_empty_dims(k):
    f = KEYS[k]
    for shape in [(0, 3), (1, 3), (2, 3)]:
        a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        _, (out,) = trace_run(f, a)
        np.testing.assert_array_equal(out, f(a))


def test_getitem_is_lazy_and_names_copy_stage():
    a = np.ones((3, 4))
    g, _ = trace_run(lambda a: a[1:, ::-1], a)
    assert [s.name for s in g.stages] == ["getitem"]
    g, _ = trace_run(lambda a: a, a)
    assert [s.name for s in g.stages] == ["copy"]


@pytest.mark.parametrize("f", [lambda a: a.T, lambda a: a.transpose(1, 0, 2),
                               lambda a: a.transpose((2, 0, 1)), lambda a: np.transpose(a),
                               lambda a: a.transpose(-1, 0, 1)])
def test_transpose(f):
    a = np.arange(24.0).reshape(2, 3, 4)
    _, (out,) = trace_run(f, a)
    np.testing.assert_array_equal(out, f(a))


@pytest.mark.parametrize("f", [
    lambda a: a.reshape(6, 4), lambda a: a.reshape(-1), lambda a: a.reshape((4, -1)),
    lambda a: a.reshape(2, 1, 12), lambda a: a.reshape(1, 2, 3, 4), lambda a: a.T.reshape(-1),
    lambda a: a[:, ::-1].reshape(3, 8), lambda a: np.reshape(a, (8, 3)),
])
def test_reshape(f):
    a = np.arange(24.0).reshape(2, 3, 4)
    for spec in (False, True):
        _, (out,) = trace_run(f, a, specialize=spec)
        np.testing.assert_array_equal(out, f(a))


def test_reshape_with_symbolic_sizes():
    a = np.arange(12.0).reshape(3, 4)
    g, (out,) = trace_run(lambda a: a.reshape(a.shape[0] * a.shape[1]), a)
    np.testing.assert_array_equal(out, a.reshape(12))
    g, (out,) = trace_run(lambda a: a.reshape(-1, 2), a)
    np.testing.assert_array_equal(out, a.reshape(-1, 2))
    assert g.constraints  # divisibility of the inferred size is checked at call time


def test_shape_entries_are_ints_or_traced_sizes():
    a = np.ones((3, 4))
    seen = {}

    def f(a):
        n, m = a.shape
        seen["types"] = (type(n).__name__, type(m).__name__)
        return a[: n - 1] * m
    _, (out,) = trace_run(f, a)
    assert seen["types"] == ("Array", "Array")
    np.testing.assert_array_equal(out, a[:2] * 4)
    _, (out,) = trace_run(f, a, specialize=True)
    assert seen["types"] == ("int", "int")
    np.testing.assert_array_equal(out, a[:2] * 4)


def test_len_and_size():
    a = np.ones((3, 4))
    _, (out,) = trace_run(lambda a: a * len(a) + a.size + a.ndim, a, specialize=True)
    np.testing.assert_array_equal(out, a * 3 + 12 + 2)
    _, (out,) = trace_run(lambda a: a * a.size, a)
    np.testing.assert_array_equal(out, a * 12)
