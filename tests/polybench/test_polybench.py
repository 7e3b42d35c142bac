"""PolyBench 4.2's loop-carried kernels (examples/polybench.py: kd.fori_loop, kd.scan,
triangular reductions) against plain-Python transcriptions of PolyBench's C loops
(tests/polybench/reference.py) in float64: every kernel at N in {1, 2, 7, 16} on numpy,
compiled for cpu at two sizes, and a few on the interpreters at tiny sizes (CI time)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from examples import polybench as pb          # noqa: E402
from tests.polybench import reference as ref   # noqa: E402

NAMES = sorted(pb.KERNELS)


def _check(name, n, backend, rng, steps=3):
    args = ref.inputs(name, n, rng, steps)
    keep = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = pb.KERNELS[name](*args, backend=backend)
    got = got if isinstance(got, tuple) else (got,)
    want = ref.REFERENCE[name](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    for a, k in zip(args, keep):          # the kernels never write their arguments
        np.testing.assert_array_equal(a, k)
    return got, keep


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [1, 2, 7, 16])
def test_numpy(name, n, rng):
    got, args = _check(name, n, "numpy", rng, steps=2)
    if n >= 7 and name not in ("durbin",):    # the loops did change something
        same = [a for a in args if isinstance(a, np.ndarray) and a.shape == got[0].shape]
        assert same and not any(np.array_equal(got[0], a) for a in same)


#: compiled for cpu in CI: one kernel of each pattern (the others' lowering spends seconds in
#: the simplifier: `python3 examples/polybench.py cpu` runs all thirteen)
CPU = ["cholesky", "nussinov", "seidel-2d", "adi", "floyd-warshall", "fdtd-2d"]


@pytest.mark.parametrize("name", CPU)
def test_cpu(name, rng):
    _check(name, 7, "cpu", rng)          # one compilation serves every size > 1


def test_run_time_step_counts_share_one_compilation(rng):
    # the step count is a kernel argument: 0, 1 and 5 steps run one compiled kernel
    import kdsl as kd
    k = kd.kernel(pb.jacobi_2d.fn)
    for steps in (0, 1, 5):
        A, B = rng.random((6, 6)), rng.random((6, 6))
        got = k(steps, A, B, backend="cpu")
        want = ref.jacobi_2d(steps, A.copy(), B.copy())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12)
    assert len(k._cache) == 1


@pytest.mark.parametrize("name", ["cholesky", "jacobi-1d"])
def test_interp(name, rng):
    _check(name, 3, "interp", rng, 2)


def test_interp_cuda(rng):
    # GPU schedules on the SIMT interpreter (slow: a tiny size); the device runs
    # tests/cuda/test_cuda_fori.py
    _check("seidel-2d", 3, "interp-cuda", rng, 2)
