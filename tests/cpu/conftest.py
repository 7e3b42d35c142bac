"""Setup for the cpu backend tests.

kdsl_cpu need not be pip-installed in the development tree: the repository root
(where the ``kdsl_cpu/`` package folder lives) is put on ``sys.path``, and its backend object is registered as "cpu" for the duration
of each test module (and unregistered after, so other test directories keep
seeing their own default backend).  The README's test command installs
kdsl_cpu (and so llvmlite); without it these tests fail with that advice.
"""
import atexit
import importlib.util
import os
import shutil
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAVE_LLVMLITE = importlib.util.find_spec("llvmlite") is not None
MISSING = "the cpu backend tests need llvmlite: install the backend with pip install ./kdsl_cpu"

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# every compiled object of this test run goes to a fresh cache directory
if "KDSL_CACHE_DIR" not in os.environ:     # removed when the test run ends
    os.environ["KDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="kdsl-cpu-tests-")
    atexit.register(shutil.rmtree, os.environ["KDSL_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def cpu_backend():
    """The kdsl_cpu backend object, registered as "cpu" while the module's tests run."""
    if not HAVE_LLVMLITE:
        pytest.fail(MISSING)
    import kdsl as kd
    import kdsl_cpu
    from kdsl.backends.registry import unregister_backend
    kd.register_backend("cpu", kdsl_cpu.backend)
    yield kdsl_cpu.backend
    unregister_backend("cpu")


def load_e2e():
    """tests/e2e/test_spec_examples.py as a module (its kernels, schedules and helpers)."""
    name = "_kdsl_e2e_spec_examples"
    if name not in sys.modules:
        path = os.path.join(ROOT, "tests", "e2e", "test_spec_examples.py")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
