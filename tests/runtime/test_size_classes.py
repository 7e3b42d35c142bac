"""Size classes: backends with ``spec.size_classes`` (cuda, interp-cuda) get one
specialisation per power-of-two class of each dim, and their schedules see the range."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.backends.interpreter import InterpreterBackend
from kdsl.backends.spec import BackendSpec
from kdsl.runtime.signature import size_range


class Recording(InterpreterBackend):
    """The interpreter, size-classed, remembering the size hints each compile saw."""

    spec = BackendSpec(name="recording", size_classes=True)

    def __init__(self):
        super().__init__()
        self.seen = []

    def schedule(self, sched, hints):
        self.seen.append({v.name: r for v, r in sched.size_hints.items()})
        super().schedule(sched, hints)


@pytest.fixture
def rec():
    b = Recording()
    kd.register_backend("recording", b)
    yield b
    from kdsl.backends.registry import unregister_backend
    unregister_backend("recording")


def test_size_range():
    assert size_range(0) == (0, 0) and size_range(1) == (1, 1)
    assert size_range(14) == (8192, 16383)


def test_one_compile_per_size_class_and_hints(rec):
    @kd.kernel
    def rowsum(A):
        return A.sum(axis=1)

    for shape in [(5, 9), (6, 12), (7, 15), (5, 16), (40, 9), (0, 3)]:
        a = np.random.rand(*shape).astype(np.float32)
        np.testing.assert_allclose(rowsum(a, backend="recording"), a.astype(np.float64).sum(1),
                                   rtol=1e-5)
    # (5,9),(6,12),(7,15) share classes (3, 4); (5,16): (3, 5); (40,9): (6, 4); (0,3): (0, 2)
    assert len(rec.seen) == 4
    assert sorted(rec.seen[0].values()) == [(4, 7), (8, 15)]
    assert (16, 31) in rec.seen[1].values()
    assert (32, 63) in rec.seen[2].values()
    assert (0, 0) in rec.seen[3].values()


def test_lower_with_arrays_sees_sizes_specs_do_not(rec):
    @kd.kernel
    def colsum(A):
        return A.sum(axis=0)

    colsum.lower(np.zeros((100, 3), np.float32), backend="recording")
    assert sorted(rec.seen[-1].values()) == [(2, 3), (64, 127)]
    colsum.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="recording")
    assert rec.seen[-1] == {}


def test_host_backends_are_not_size_classed():
    @kd.kernel
    def double(A):
        return A * 2

    for k in range(1, 6):
        double(np.ones(1 << k), backend="interp")
    assert len(double._cache) == 1
