"""Setup for the fuzzer's tests: the cpu backend (where llvmlite is installed) is
registered for the duration of each module and unregistered after, like tests/cpu."""
import atexit
import os
import shutil
import tempfile

import pytest

if "KDSL_CACHE_DIR" not in os.environ:     # removed when the test run ends
    os.environ["KDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="kdsl-fuzz-tests-")
    atexit.register(shutil.rmtree, os.environ["KDSL_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(scope="module")
def cpu():
    """"cpu" registered (like tests/cpu, fails with advice where llvmlite is missing)."""
    from kdsl.backends.registry import unregister_backend

    from .backends import BACKENDS
    reason = BACKENDS["cpu"].setup()
    if reason:
        pytest.fail(reason)
    yield "cpu"
    unregister_backend("cpu")
