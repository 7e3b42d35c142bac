"""End to end with the real frontend, schedules and lowering."""
import pickle

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime import dispatch

import kdsl.frontend.trace  # noqa: E402,F401
import kdsl.passes.pipeline  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _real_parts(monkeypatch):
    import fakes
    monkeypatch.setattr(dispatch, "make_schedule", fakes.real_schedule)


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel(constants=("p",))
def power(A, p):
    return A ** p


def test_numpy_backend_end_to_end(monkeypatch, capsys):
    a = np.random.rand(40, 30)
    np.testing.assert_allclose(rowsum(a, backend="numpy"), a.sum(1), rtol=1e-13)
    np.testing.assert_allclose(rowsum(a[::2, ::-3], backend="numpy"), a[::2, ::-3].sum(1),
                               rtol=1e-13)
    x = np.random.rand(8, 5).astype(np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(softmax(x, backend="numpy"), e / e.sum(1, keepdims=True),
                               rtol=1e-6)
    np.testing.assert_allclose(power(a, 2, backend="numpy"), a ** 2)
    np.testing.assert_allclose(power(a, 3, backend="numpy"), a ** 3)
    assert pickle.loads(pickle.dumps(rowsum)) is rowsum
    monkeypatch.setenv("KDSL_DUMP", "1")
    rowsum(np.ones((2, 2), np.float32), backend="numpy")
    err = capsys.readouterr().err
    assert "=== kdsl: rowsum for numpy (float32[?, ?]) ===" in err and "for " in err


def test_lower_and_source_accept_specs_and_arrays():
    text = str(rowsum.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="numpy"))
    assert "for " in text and "sum" in text
    assert str(rowsum.lower(np.ones((3, 4)), backend="numpy")).startswith("def rowsum")
    src = rowsum.source(np.ones((3, 4)), backend="numpy")
    assert "sum" in src
