"""numpy's protocols: np.exp(x), np.sum(x, axis=1), np.where, ... on traced arrays."""
import numpy as np
import pytest

from fe_eval import trace_run

rng = np.random.default_rng(4)

FUNCS = [
    lambda x, y: np.exp(x), lambda x, y: np.log(x) + np.sqrt(y), lambda x, y: np.maximum(x, y),
    lambda x, y: np.minimum(x, 0.5), lambda x, y: np.where(x > y, x, y), lambda x, y: np.add(x, y),
    lambda x, y: np.multiply(x, 2), lambda x, y: np.true_divide(x, y), lambda x, y: np.abs(x - y),
    lambda x, y: np.sum(x, axis=1), lambda x, y: np.mean(x, axis=0, keepdims=True),
    lambda x, y: np.max(x), lambda x, y: np.amin(y, axis=-1), lambda x, y: np.argmax(x, axis=1),
    lambda x, y: np.prod(x, axis=0), lambda x, y: np.any(x > 0.9), lambda x, y: np.all(y > 0),
    lambda x, y: np.clip(x, 0.2, 0.8), lambda x, y: np.transpose(x), lambda x, y: np.reshape(x, -1),
    lambda x, y: np.matmul(x, y.T), lambda x, y: np.dot(x, y.T), lambda x, y: np.add.reduce(x),
    lambda x, y: np.maximum.reduce(x, axis=1), lambda x, y: np.tanh(x) * np.cos(y),
    lambda x, y: np.less_equal(x, y), lambda x, y: np.logical_and(x > 0.2, y > 0.2),
    lambda x, y: np.negative(x), lambda x, y: np.floor_divide(x, 0.3),
    lambda x, y: 2.0 ** x, lambda x, y: np.float64(3) - x,
]


@pytest.mark.parametrize("k", range(len(FUNCS)))
def test_numpy_function_matches(k):
    f = FUNCS[k]
    x, y = rng.random((3, 4)), rng.random((3, 4)) + 0.1
    _, (out,) = trace_run(f, x, y)
    ref = f(x, y)
    assert out.shape == np.shape(ref) and out.dtype == np.asarray(ref).dtype
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_numpy_array_on_the_left_of_an_operator_dispatches_to_us():
    x = rng.random((3,))
    _, (out,) = trace_run(lambda x: np.float32(2) * x + np.array(1.0), x)
    np.testing.assert_allclose(out, 2 * x + 1)
