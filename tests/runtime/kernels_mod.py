"""Module-level kernels (pickled by reference in the tests)."""
import kdsl as kd
from fakes import g_add, graph_for


@kd.kernel
@graph_for(g_add)
def add(A, B):
    return A + B


def call_add(args):
    """Run in a worker process: install the fakes there too, then call the pickled kernel."""
    import pytest
    import fakes
    mp = pytest.MonkeyPatch()
    fakes.install(mp)
    k, a, b = args
    return k(a, b, backend="numpy")
