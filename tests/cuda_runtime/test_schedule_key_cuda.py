"""Issue 26 item 4 on cuda (fake driver, real NVRTC): a kernel without schedule functions is
found before it is scheduled (kdsl.runtime.dispatch.DeferredRequest); the key holds the
architecture the default schedules plan for and the call's size classes."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KdslUserError

from cuda_fakes import device_array

pytest.importorskip("cuda.core", reason="the cuda wheels are not installed (pip install ./kdsl_cuda)")


def _kernel(*hints):
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    for h in hints:
        softmax = h(softmax)
    return kd.kernel(softmax)


def _fresh_backend():
    from kdsl.backends import registry
    from kdsl_cuda import CUDABackend
    be = CUDABackend()
    registry.register_backend("cuda", be)      # as in a new process: nothing compiled yet
    return be


def _launches(fake_driver, kernel, shape):
    kernel(device_array(shape, np.float32), out=device_array(shape, np.float32), backend="cuda")
    calls = [(c["grid"], c["block"], c["params"][2:]) for c in fake_driver.launches]
    fake_driver.launches.clear()
    return calls


def test_a_second_process_neither_schedules_nor_lowers(fake_driver, tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KDSL_CACHE", raising=False)
    shapes = ((300, 1000), (7, 33))          # two size classes: two specialisations
    cold = _fresh_backend()
    first = [_launches(fake_driver, _kernel(), s) for s in shapes]
    assert cold.stats["lowered"] == 2 and cold.stats["unscheduled"] == 0
    warm = _fresh_backend()
    again = [_launches(fake_driver, _kernel(), s) for s in shapes]
    assert warm.stats == {"lowered": 0, "early_hits": 2, "unscheduled": 2}
    assert again == first and all(first)     # the same grids, blocks and parameters
    # a hint is another key: scheduled and lowered
    hinted = _fresh_backend()
    _launches(fake_driver, _kernel(kd.schedule("cuda", threads=64)), shapes[0])
    assert hinted.stats["lowered"] == 1 and hinted.stats["unscheduled"] == 0


def test_the_planned_architecture_is_in_the_key(fake_driver, monkeypatch):
    from kdsl.runtime import dispatch
    from kdsl.runtime.signature import signature_from_args
    from kdsl_cuda.schedules import hopper
    be, k = _fresh_backend(), _kernel()
    a = np.zeros((100, 70), np.float32)
    sig = signature_from_args((a,), k.arg_names, (), False, None, None, True)
    b = np.zeros((100, 7000), np.float32)
    sig_b = signature_from_args((b,), k.arg_names, (), False, None, None, True)
    req = dispatch.DeferredRequest(k, be, sig, k._trace(sig))
    base = be.schedule_key(req, "sm_90")
    assert base is not None and not req.scheduled
    monkeypatch.setattr(hopper, "_arch", "sm_80")       # the schedules plan for another one
    other = be.schedule_key(req, "sm_90")
    monkeypatch.setattr(hopper, "_arch", "sm_90")
    assert other != base and be.schedule_key(req, "sm_90") == base
    assert be.schedule_key(req, "sm_80") != base          # the device compiled for
    for var in ("KDSL_CUDA_TENSOR_CORES", "KDSL_CUDA_WGMMA"):   # switches of the schedules
        monkeypatch.setenv(var, "0")
        assert be.schedule_key(req, "sm_90") != base
        monkeypatch.delenv(var)
    assert be.schedule_key(req, "sm_90") == base
    req_b = dispatch.DeferredRequest(k, be, sig_b, k._trace(sig_b))
    assert be.schedule_key(req_b, "sm_90") != base         # another size class


def test_without_a_device_a_schedule_error_comes_first():
    """No GPU here: the user's schedule mistake is still reported (not the missing device)."""
    from kdsl_cuda.runtime import driver
    if driver.is_available():
        pytest.skip("a device is present")
    k = _kernel(kd.schedule("cuda", tile={"nope": 4}))
    import kdsl_cuda
    kd.register_backend("cuda", kdsl_cuda.backend)
    try:
        with pytest.raises(KdslUserError):
            k(np.ones((4, 5), np.float32), backend="cuda")
    finally:
        from kdsl.backends import registry
        registry.unregister_backend("cuda")
