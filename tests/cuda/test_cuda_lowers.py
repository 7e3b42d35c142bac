"""No device needed (not under the ``cuda`` mark): every kernel of the GPU suite that carries
an explicit cuda schedule (cuda_cases.py, cuda_support.py, the seed-000 schedules) runs on
``interp-cuda`` (the SIMT interpreter, race-checked) against numpy in float64 and its CUDA
C++ compiles to an sm_90 cubin with NVRTC, so that a schedule or codegen change that breaks
the GPU suite fails in CI, not only on the device."""
import numpy as np
import pytest

import kdsl as kd
from cuda_cases import CASES, check
from cuda_support import ARGMAX, AXPY, MIX, ROWSUM, TWO, XOR, check_elementwise, values
from kdsl_cuda.build import compile_cubin
from seed_schedules import bind_rows, cross_thread


def _small(shapes):
    """The smallest shape with every size above 1 (tiles partly filled, no specialised 1s)."""
    return min((s for s in shapes if min(s) > 1), key=np.prod)


def _compiles(k, args, name):
    src = k.source(*args, backend="cuda")
    assert 'extern "C" __global__' in src
    cubin = compile_cubin(src, name=name + ".cu")
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_schedule_cases_run_on_the_simt_interpreter_and_compile(name, rng):
    case = CASES[name]
    k = case.kernel()
    args = case.inputs(rng, _small(case.shapes))
    check(case, k(*args, backend="interp-cuda"), args)
    _compiles(k, args, name)


@pytest.mark.parametrize("sched", [bind_rows, cross_thread], ids=lambda f: f.__name__)
def test_seed000_schedules_on_the_simt_interpreter(sched, rng):
    from cuda_cases import rowsum_B
    k = kd.kernel(rowsum_B)
    k.schedule("cuda")(sched)
    a = rng.standard_normal((45, 37)).astype(np.float32)
    for v in (a, a[::-1], a.T.copy().T):
        np.testing.assert_allclose(k(v, backend="interp-cuda"), v.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    _compiles(k, (a,), sched.__name__)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint8", "int64", "bool"])
def test_interop_kernels_on_the_simt_interpreter(dtype, rng):
    """The kernels the interop, stream and DeviceArray tests call (float16 and bfloat16 are
    left to the device: the codegen has no 16-bit floats yet)."""
    a, b = values(rng, (9, 70), dtype), values(rng, (9, 70), dtype)
    k = XOR if dtype == "bool" else MIX
    check_elementwise(k(a, b, backend="interp-cuda"), a, b, dtype)
    _compiles(k, (a, b), "elementwise_" + dtype)
    if dtype in ("float32", "float64"):
        np.testing.assert_allclose(ROWSUM(a, backend="interp-cuda"), a.astype(np.float64).sum(1), rtol=1e-5)
        np.testing.assert_array_equal(ARGMAX(a, backend="interp-cuda"), a.argmax(1))
        x, y = a[0], b[0]
        np.testing.assert_allclose(AXPY(2.5, x, y, backend="interp-cuda"), 2.5 * x.astype(np.float64) + y,
                                   rtol=1e-6, atol=1e-6)
        s, p = TWO(x, y, backend="interp-cuda")
        np.testing.assert_allclose(s, x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(p, x.astype(np.float64) * y, rtol=1e-6, atol=1e-6)
        for kk, args, nm in ((ROWSUM, (a,), "rowsum"), (ARGMAX, (a,), "argmax"),
                             (AXPY, (2.5, x, y), "axpy"), (TWO, (x, y), "two")):
            _compiles(kk, args, f"{nm}_{dtype}")
