"""Call-time edges of the frontend: negative sizes, empty ranges, Python ints beyond int64."""
import numpy as np
import pytest

import kdsl as kd


def _shifted_sum(A):
    n = A.shape[0]
    return kd.compute((n - 2,), lambda i: A[i] + A[i + 2])


@pytest.mark.parametrize("m", [0, 1])
def test_negative_compute_size_is_a_shape_error_at_the_users_line(executor, m):
    with pytest.raises(kd.ShapeError) as e:
        kd.kernel(_shifted_sum)(np.ones(m, np.float32), backend=executor)
    assert "negative" in e.value.message and e.value.hint
    assert "kd.compute((n - 2,)" in e.value.loc.code
    A = np.random.default_rng().random(7).astype(np.float32)
    np.testing.assert_allclose(kd.kernel(_shifted_sum)(A, backend=executor), A[:-2] + A[2:])


def _clamped(A):
    n = A.shape[0]
    return kd.compute((kd.maximum(n - 2, 0),), lambda i: A[i] + A[i + 2])


def test_clamped_size_from_the_hint_works(executor):
    assert kd.kernel(_clamped)(np.ones(1, np.float32), backend=executor).shape == (0,)


def _sum_first(A, s):
    k = kd.reduce_axis(s - 1, name="k")
    return kd.compute((2,), lambda i: kd.sum(A[k], axis=k))


@pytest.mark.parametrize("s", [-3, 0, 1, 2, 5])
def test_reduce_axis_of_a_negative_extent_is_empty(executor, s):
    # range(s - 1) is empty for s <= 1: the sum is its identity, like numpy's
    A = np.random.default_rng().random(6)
    got = kd.kernel(_sum_first)(A, s, backend=executor)
    np.testing.assert_allclose(got, [A[:max(s - 1, 0)].sum()] * 2)


def _add(A, s):
    return A + s


def _compare(A, s):
    return A < s


@pytest.mark.parametrize("fn", [_add, _compare])
@pytest.mark.parametrize("s", [2 ** 63, 2 ** 64 - 1, 2 ** 64, -2 ** 63 - 1])
@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.float32])
def test_python_ints_beyond_int64_are_an_argument_error_everywhere(executor, fn, s, dtype):
    # the numpy backend wrapped 2**63 to -2**63 silently; every backend now says what fits
    with pytest.raises((kd.ArgumentError, kd.IntegerOverflowError)) as e:
        kd.kernel(fn)(np.arange(3, dtype=dtype), s, backend=executor)
    assert "out of bounds for" in e.value.message and (e.value.hint or "pass a value" in e.value.message)
    assert kd.kernel(fn)(np.arange(3, dtype=dtype), 2 ** 63 - 1, backend=executor).shape == (3,)
