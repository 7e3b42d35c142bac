"""Setup of the GPU suite (see README.md here for the device commands).

Every test here but the lowering checks of ``test_cuda_lowers.py`` carries the ``cuda`` mark:
tests/conftest.py skips it, naming the reason, where kdsl_cuda has no usable device.  This
file puts the checkout's packages and the shared test helpers on ``sys.path``, registers
kdsl_cuda's backend as "cuda" for each module (unregistered after, like tests/cpu: other
directories keep their own backend list), overrides ``executor`` (the reference executors of
the core suite's tests) with "cuda", and keeps JAX from taking most of the GPU's memory.
"""
import atexit
import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for p in (os.path.join(ROOT, "tests", "gpu_core"), os.path.join(ROOT, "tests", "backends"),
          os.path.join(ROOT, "tests"), ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

# JAX preallocates 75% of the device at its first use: torch, CuPy and kdsl share the device
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# every cubin of this run goes to a fresh cache directory (each kernel is NVRTC-compiled)
if "KDSL_CACHE_DIR" not in os.environ:     # removed when the test run ends
    os.environ["KDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="kdsl-cuda-tests-")
    atexit.register(shutil.rmtree, os.environ["KDSL_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def cuda_backend():
    """kdsl_cuda's backend object, registered as "cuda" while the module's tests run (its
    tests are skipped before this runs where there is no device)."""
    import kdsl as kd
    import kdsl_cuda
    from kdsl.backends.registry import unregister_backend
    kd.register_backend("cuda", kdsl_cuda.backend)
    yield kdsl_cuda.backend
    unregister_backend("cuda")


@pytest.fixture
def executor():
    """The core suite's tests (re-exported by test_cuda_core.py) run on "cuda" here."""
    return "cuda"


@pytest.fixture(params=["torch", "cupy", "jax"])
def lib(request):
    """An array library's adapter (cuda_support.py); skips where the library is missing."""
    from cuda_support import library
    return library(request.param)
