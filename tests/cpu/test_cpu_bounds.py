"""The bounds cases of tests/errors/test_bounds.py on the cpu backend, plus its fast launcher."""
import importlib.util
import os
import sys

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KernelIndexError
from kdsl.runtime import fastpath


def _load():
    name = "_kdsl_test_bounds"
    if name not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "errors", "test_bounds.py")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


B = _load()


@pytest.mark.parametrize("case", B.CASES)
def test_bounds_cpu(case):
    getattr(B, case)("cpu")


def test_fast_launcher_evaluates_index_checks():
    """The native fast launcher runs the index checks: in range it answers, out of range it
    declines and the normal path raises (never a read past the end)."""
    @kd.kernel
    def shift(x, y):
        n_, = y.shape
        return kd.compute((n_,), lambda i: x[i + 2] + y[i])
    x, y = np.arange(8, dtype=np.float32), np.ones(6, np.float32)
    for _ in range(fastpath.PROMOTE_AFTER + 2):
        np.testing.assert_array_equal(shift(x, y, backend="cpu"), x[2:] + 1)
    assert shift._fast is not None      # promoted: calls go through the native launcher
    with pytest.raises(KernelIndexError, match=r"x\[i \+ 2\] reads x at indices 2\.\.8"):
        shift(x, np.ones(7, np.float32), backend="cpu")
    np.testing.assert_array_equal(shift(x[:5], y[:3], backend="cpu"), x[2:5] + 1)


def test_gathers_skip_the_fast_launcher():
    g = B.gather
    x, idx = np.arange(5, dtype=np.float32), np.array([4, 0])
    for _ in range(fastpath.PROMOTE_AFTER + 2):
        np.testing.assert_array_equal(g(x, idx, backend="cpu"), x[idx])
    with pytest.raises(KernelIndexError):
        g(x, np.array([5, 0]), backend="cpu")
