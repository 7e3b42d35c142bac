"""The cuda default-schedule tests: ``kdsl_cuda`` from this checkout is registered as "cuda"
when it is not pip-installed, so that ``interp-cuda`` runs its default schedules."""
import pytest

import kdsl as kd
from kdsl.backends import registry

kdsl_cuda = pytest.importorskip("kdsl_cuda")

if not registry.is_installed("cuda"):
    kd.register_backend("cuda", kdsl_cuda.backend)
