"""kdsl.runtime.callplan: one derivation of a specialisation's shape bindings, from which the
Python launcher (dispatch.build_launcher) and the fast launchers' plan (fastpath.make_plan)
are both written (issue 26 item 1, first step)."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ShapeError
from kdsl.runtime import callplan, fastpath
from kdsl.runtime.signature import signature_from_args


@pytest.fixture(autouse=True)
def _fake_parts():
    """The real frontend here (overrides tests/runtime/conftest.py's fakes)."""
    yield


def _scaled_mm():
    @kd.kernel
    def scaled_mm(A, s, B):
        return (A @ B) * s
    return scaled_mm


def _parts(*args):
    scaled_mm = _scaled_mm()
    sig = signature_from_args(args, scaled_mm.arg_names, (), False, None)
    graph = scaled_mm._trace(sig)
    return sig, graph, callplan.bindings(graph, (0, 1, 2))


def test_bindings_bind_each_name_once_and_check_the_rest():
    a, b = np.ones((3, 4)), np.ones((4, 5))
    sig, graph, binds = _parts(a, 2.0, b)
    assert [pos for _, pos in binds.scalars] == [1] and [pos for _, pos in binds.arrays] == [0, 2]
    assert [src for _, src in binds.sources] == [("scalar", 1), ("shape", 0, 0), ("shape", 0, 1),
                                                 ("shape", 2, 0), ("shape", 2, 1)]
    # B's first dim has a name of its own: A's second must equal it (a graph constraint)
    assert binds.checks == () and len(binds.constraints) == 1
    plan = fastpath.make_plan(graph, sig, (a, 2.0, b), (0, 1, 2), 3, binds=binds)
    assert plan.sources is binds.sources and plan.checks is binds.checks


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_the_launchers_written_from_them_agree(backend, rng):
    if backend == "cpu":
        pytest.importorskip("kdsl_cpu")
    scaled_mm = _scaled_mm()
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    for _ in range(fastpath.PROMOTE_AFTER + 1):     # the Python launcher, then the fast one
        np.testing.assert_allclose(scaled_mm(a, 2.0, b, backend=backend), (a @ b) * 2.0)
    a0, b0 = np.ones((0, 4)), np.ones((4, 1))
    np.testing.assert_allclose(scaled_mm(a0, 2.0, b0, backend=backend), np.zeros((0, 1)))
    with pytest.raises(ShapeError) as e:
        scaled_mm(a, 2.0, rng.standard_normal((3, 5)), backend=backend)
    del e       # its traceback holds the frames (and arrays) of the failed call
