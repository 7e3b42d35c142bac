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
