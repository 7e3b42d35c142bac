"""Issue 26 item 4 on cuda (fake driver, real NVRTC): a second "process" (a fresh backend and
kernel object on the same disk cache) gets the kernels' interface and cubin from the early key's
entry -- nothing lowered, no code generated -- and launches exactly what the first one did."""
import numpy as np
import pytest

import kdsl as kd

from cuda_fakes import device_array

pytest.importorskip("cuda.core", reason="the cuda wheels are not installed (pip install ./kdsl_cuda)")


def _kernel():
    @kd.kernel
    def scaled_rowsum(A, s):
        n, m = A.shape
        k = kd.reduce_axis(m, name="k")
        return kd.compute((n,), lambda i: kd.sum(A[i, k] * s, axis=k), name="B")
    return scaled_rowsum


def _run(fake_driver, kernel):
    from kdsl.backends import registry
    from kdsl_cuda import CUDABackend
    be = CUDABackend()
    registry.register_backend("cuda", be)      # as in a new process: nothing compiled yet
    a = device_array((100, 70), np.float32)
    b = device_array((33, 257), np.float32)
    kernel(a, 2.0, out=device_array((100,), np.float32), backend="cuda")
    kernel(b, 3.0, out=device_array((33,), np.float32), backend="cuda")
    calls = [(c["grid"], c["block"], len(c["params"]), c["params"][2:])
             for c in fake_driver.launches]
    fake_driver.launches.clear()
    return be.stats, calls


def test_a_second_process_launches_from_the_early_entry(fake_driver, tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KDSL_CACHE", raising=False)
    cold, first = _run(fake_driver, _kernel())
    assert cold["lowered"] >= 1 and cold["early_hits"] == 0
    warm, again = _run(fake_driver, _kernel())
    assert warm["lowered"] == 0 and warm["early_hits"] == cold["lowered"]
    assert again == first and first     # the same grids, blocks and scalar parameters


def test_the_entry_round_trips_the_interface():
    """The entry keeps what the launcher reads (the Vars shared by the grid expressions and the
    scalar slots stay one object) and drops the loop body and the kernels' text."""
    from kdsl.runtime import dispatch
    from kdsl.runtime.signature import signature_from_args
    from kdsl_cuda import CUDABackend
    from kdsl_cuda.runtime import early
    from kdsl_cuda.runtime.launch import CudaCompiled
    be, k = CUDABackend(), _kernel()
    a = np.zeros((100, 70), np.float32)
    sig = signature_from_args((a, 2.0), k.arg_names, (), False, None, None, True)
    req = dispatch.prepare(k, be, sig, k._trace(sig))
    func = be.lower(req)
    from kdsl_cuda.backend import generate
    mod = generate(func)
    blob = early.pack(func, mod, "sm_90", b"\x7fELF-not-a-real-cubin")
    func2, mod2, arch, cubin = early.unpack(blob)
    assert (arch, cubin) == ("sm_90", b"\x7fELF-not-a-real-cubin") and mod2.source == mod.source
    assert len(blob) < len(mod.source) + 20000
    c1 = CudaCompiled(func, mod, None, mod.source)
    c2 = CudaCompiled(func2, mod2, None, mod2.source)
    for shape in ((100, 70), (1, 1), (0, 5), (4097, 3)):
        st = (shape[1] * 4, 4)
        assert c1.geometry([shape, (shape[0],)], [st, (4,)], [2.0]) == \
            c2.geometry([shape, (shape[0],)], [st, (4,)], [2.0])
    assert [p.slots for p in c1.plans] == [p.slots for p in c2.plans]
    assert early.unpack(b"KDSLCUE1 not a pickle") is None and early.unpack(b"other") is None
    k1, k2 = be.early_key(req, "sm_90"), be.early_key(req, "sm_80")
    assert k1 and k2 and k1 != k2
