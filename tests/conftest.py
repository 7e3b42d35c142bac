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


def pytest_sessionfinish(session):
    # a pytest-xdist worker (`-n 2`): hand this process's counts to the controller, which
    # runs no tests itself and prints the summary of all workers together
    out = getattr(session.config, "workeroutput", None)
    if out is not None and _NVRTC_HOOK:
        out["nvrtc_hook"] = dict(_nvrtc_hook.STATS)


@pytest.hookimpl(optionalhook=True)      # a pytest-xdist hook: absent without the plugin
def pytest_testnodedown(node, error):
    stats = getattr(node, "workeroutput", {}).get("nvrtc_hook")
    if stats:
        _nvrtc_hook.merge(stats)


def pytest_terminal_summary(terminalreporter):
    if _NVRTC_HOOK and _nvrtc_hook.STATS["runs"]:
        terminalreporter.write_line(_nvrtc_hook.summary())


# ----------------------------------------------------------------- the `cuda` mark (issue 10)
# Tests marked `cuda` need an NVIDIA GPU: they skip, saying why, wherever kdsl_cuda cannot
# run kernels (not importable, or kdsl_cuda.is_available() false or not there yet).
_CUDA_REASON = []


def cuda_unavailable():
    """Why `cuda`-marked tests cannot run here, or None when kdsl_cuda has a usable device."""
    if not _CUDA_REASON:
        import os
        import sys
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if root not in sys.path:          # the checkout's kdsl_cuda, not a stale installed copy
            sys.path.insert(0, root)
        try:
            import kdsl_cuda
        except Exception as e:            # noqa: BLE001  (any import failure means: no device)
            reason = f"no CUDA device: kdsl_cuda is not importable ({type(e).__name__}: {e})"
        else:
            probe = getattr(kdsl_cuda, "is_available", None)
            if probe is None:
                reason = "no CUDA device: kdsl_cuda has no is_available() (no runtime yet)"
            else:
                try:
                    reason = None if probe() else "no CUDA device: kdsl_cuda.is_available() is false"
                except Exception as e:    # noqa: BLE001
                    reason = f"no CUDA device: kdsl_cuda.is_available() raised {type(e).__name__}: {e}"
        _CUDA_REASON.append(reason)
    return _CUDA_REASON[0]


def pytest_runtest_setup(item):
    if item.get_closest_marker("cuda") is not None:
        reason = cuda_unavailable()
        if reason:
            pytest.skip(reason)
