"""kd.fori_loop on the device (issue 25 item 4): the loop is a host loop around the body's
kernels (one launch of each per step, carries in two device buffers each), so these check
the cuda launches, the ping-pong buffers and device arrays staying on the device; the same
kernels run on interp-cuda in tests/frontend/test_fori.py and tests/polybench."""
import numpy as np
import pytest

from cuda_support import library, load_suite

pytestmark = pytest.mark.cuda

F = load_suite("frontend/test_fori.py", "_kdsl_cuda_fori")
P = load_suite("polybench/test_polybench.py", "_kdsl_cuda_polybench")


@pytest.mark.parametrize("steps", [0, 1, 4, -3])
def test_steps_and_counts(steps, rng):
    F.test_steps_and_zero_or_negative_counts("cuda", steps, rng)


def test_tuple_carry_reductions_and_nested_loops(rng):
    F.test_tuple_carry_with_a_scalar("cuda", rng)
    F.test_body_with_reductions("cuda", rng)
    F.test_nested_triangular_loops("cuda", rng)


@pytest.mark.parametrize("name", P.NAMES)
def test_polybench(name, rng):
    for n in (1, 7, 16):
        P._check(name, n, "cuda", rng, 3)


def test_device_arrays_stay_on_the_device(rng):
    import kdsl_cuda as kc
    from examples import polybench as pb
    from tests.polybench import reference as ref
    A, B = rng.random((33, 33)), rng.random((33, 33))
    for steps in (0, 1, 6):
        got = pb.jacobi_2d(steps, kc.to_device(A), kc.to_device(B), backend="cuda")
        assert all(isinstance(g, kc.DeviceArray) for g in got)
        want = ref.jacobi_2d(steps, A.copy(), B.copy())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)


def test_torch_run_time_steps(rng):
    lib = library("torch")
    from examples import polybench as pb
    from tests.polybench import reference as ref
    args = ref.inputs("fdtd-2d", 40, rng, 7)
    dev = [lib.array(a) if isinstance(a, np.ndarray) else a for a in args]
    got = pb.fdtd_2d(*dev, backend="cuda")
    want = ref.fdtd_2d(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    for g, w in zip(got, want):
        assert lib.owns(g)
        np.testing.assert_allclose(lib.numpy(g), w, rtol=1e-12)
