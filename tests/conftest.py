"""Shared test setup: every kernel can run through both reference executors (numpy
evaluates the stage graph; interp, the loop-IR interpreter built into the core,
executes the lowered loop IR)."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.backends.interpreter import InterpreterBackend

if "interp" not in kd.backends():   # an older kdsl installed without it: register it here
    kd.register_backend("interp", InterpreterBackend())

#: the reference executors every kernel test runs on
EXECUTORS = ["numpy", "interp"]


@pytest.fixture(params=EXECUTORS)
def executor(request):
    """Name of a reference backend: parametrises a test over both executors."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# ---------------------------------------------------------------- cuda codegen in CI (issue 10)
# Every GPU-form kernel the suite runs on the SIMT executor is also printed as CUDA and
# compiled by NVRTC (tests/cuda_codegen/nvrtc_hook.py; off without kdsl_cuda and the cuda
# wheels, or with KDSL_CUDA_COMPILE_ALL=0).
import os as _os  # noqa: E402
import sys as _sys  # noqa: E402

_sys.path.insert(0, _os.path.join(_os.path.dirname(__file__), "cuda_codegen"))
import nvrtc_hook as _nvrtc_hook  # noqa: E402

_NVRTC_HOOK = _nvrtc_hook.install()


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA device (skipped without one)")


def pytest_terminal_summary(terminalreporter):
    if _NVRTC_HOOK and _nvrtc_hook.STATS["runs"]:
        terminalreporter.write_line(_nvrtc_hook.summary())
