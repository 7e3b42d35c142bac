"""Fixtures for the cuda runtime's host-side tests (no GPU: cuda_fakes.py)."""
import pytest

pytest.importorskip("kdsl_cuda", reason="kdsl_cuda is not installed (pip install ./kdsl_cuda)")

from cuda_fakes import FakeAllocation, FakeDevice, FakeLib  # noqa: E402


@pytest.fixture
def fake_driver(monkeypatch):
    """Replace the driver and device memory with fakes; register kdsl_cuda as "cuda"."""
    import kdsl as kd
    import kdsl_cuda
    from kdsl_cuda.runtime import driver, fastlaunch, launch, memory
    lib = FakeLib()
    monkeypatch.setattr(driver, "lib", lambda: lib)
    monkeypatch.setattr(driver, "device", lambda o=0: FakeDevice())
    monkeypatch.setattr(driver, "device_count", lambda: 1)
    for mod in (memory, launch, fastlaunch):
        monkeypatch.setattr(mod, "Allocation", FakeAllocation)
    from kdsl.backends import registry
    kd.register_backend("cuda", kdsl_cuda.backend)
    yield lib
    registry.unregister_backend("cuda")
