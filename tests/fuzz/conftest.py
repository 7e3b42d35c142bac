"""Setup for the fuzzer's tests: the cpu backend (where llvmlite is installed) is
registered for the duration of each module and unregistered after, like tests/cpu."""
import os
import tempfile

import pytest

os.environ.setdefault("KDSL_CACHE_DIR", tempfile.mkdtemp(prefix="kdsl-fuzz-tests-"))


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
