"""Row-wise chains (softmax, layernorm, logsumexp) cache their input row in dynamic shared
memory when it fits (kdsl_cuda.schedules.cache_rows): SIMT runs (race-checked) against numpy
in float64 over row lengths that do and do not divide the block, fp16 included; the printed
CUDA slices ``extern __shared__``; long rows keep the global-memory schedule."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect

from cuda_workloads import ORACLES, layernorm, logsumexp, softmax

KERNELS = {f.__name__: kd.kernel(f) for f in (softmax, layernorm, logsumexp)}
FUNCS = {"softmax": softmax, "layernorm": layernorm, "logsumexp": logsumexp}


def _shared_bufs(func):
    return [a.buffer for a in collect(func.body, lambda x: type(x) is n.Allocate)
            if a.buffer.scope is n.Scope.SHARED]


def _dynamic(func):
    return [b for b in _shared_bufs(func) if any(type(e) is not n.Const for e in b.shape)]


@pytest.mark.parametrize("name", ["softmax", "layernorm", "logsumexp"])
@pytest.mark.parametrize("m", [1, 7, 33, 1000, 4099])
def test_chain_rows_cached_on_simt(name, m, rng):
    k = KERNELS[name]
    rows = 3
    X = rng.standard_normal((rows, m)).astype(np.float32)
    func = k.lower(X, backend="interp-cuda")
    # (a row of one element: the size class makes it a constant, no chain; logsumexp is no
    # row-wise chain today: its max and sum are separate kernels reading X from global memory)
    if m > 1 and name != "logsumexp":
        dyn = _dynamic(func)
        assert [b.name for b in dyn] == ["X.shared"], [b.name for b in _shared_bufs(func)]
        (kern,) = [x for x in func.kernels if _dynamic(x)]
        assert kern.launch.dynamic_shared is not None
        # the SIMT run below executes the row's copy as asynchronous copies (race-checked)
        assert collect(kern.body, lambda x: type(x) is n.AsyncCopy)
    got = k(X, backend="interp-cuda")
    want = ORACLES[FUNCS[name]](X.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["softmax", "layernorm"])
@pytest.mark.parametrize("m", [7, 1000, 4099])
def test_chain_rows_cached_float16(name, m, rng):
    k = KERNELS[name]
    X = rng.standard_normal((2, m)).astype(np.float16)
    func = k.lower(X, backend="interp-cuda")
    assert [b.name for b in _dynamic(func)] == ["X.shared"]
    got = k(X, backend="interp-cuda")
    assert got.dtype == np.float16
    want = ORACLES[FUNCS[name]](X.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, atol=2e-3)


def test_strided_input_rows_cached(rng):
    k = KERNELS["softmax"]
    base = rng.standard_normal((6, 2 * 300)).astype(np.float32)
    X = base[::2, 1::2]
    got = k(X, backend="interp-cuda")
    np.testing.assert_allclose(got, ORACLES[softmax](X.astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_long_rows_stay_in_global_memory():
    k = KERNELS["softmax"]
    X = kd.TensorSpec((16, 1 << 16), kd.float32)    # 256 KB rows: more than a block may have
    func = k.lower(X, backend="interp-cuda")
    assert not _dynamic(func)
    assert all(k.launch.dynamic_shared is None for k in func.kernels)


def test_cached_row_prints_extern_shared():
    k = KERNELS["softmax"]
    src = k.source(np.zeros((8, 8192), np.float32), backend="cuda")
    assert "extern __shared__ __align__(16) unsigned char kd_dyn_smem[];" in src
    assert "reinterpret_cast<float*>(kd_dyn_smem)" in src
    # the row is read from global memory once, by 16-byte asynchronous copies all in flight
    # before one wait (async_copies); the passes read X_shared
    assert src.count("kd_cp_async<16>(&X_shared[") == 1
    assert "reinterpret_cast<const float4*>(&X[" not in src
    assert src.count('asm volatile("cp.async.wait_group %0;\\n" :: "n"(0)') == 1
    assert "X_shared[" in src


def test_size_class_upper_end_decides():
    """8192 is in the class [8192, 16383]: 64 KB rows at the top, cached; 16384 is not."""
    k = KERNELS["softmax"]
    yes = k.lower(np.zeros((4, 8192), np.float32), backend="interp-cuda")
    no = k.lower(np.zeros((4, 16384), np.float32), backend="interp-cuda")
    assert _dynamic(yes) and not _dynamic(no)


def test_constant_rows_beyond_48k_are_dynamic_slices(rng):
    """Constant shapes (a TensorSpec of ints): a 60 KB row is constant-sized shared memory,
    more than CUDA's static __shared__ arrays may hold: it becomes a dynamic slice of constant
    size (kdsl.ir.shared_memory.STATIC_MAX)."""
    k = KERNELS["softmax"]
    func = k.lower(kd.TensorSpec((2, 15000), kd.float32), backend="interp-cuda")
    (kern,) = func.kernels
    assert type(kern.launch.dynamic_shared) is n.Const
    assert kern.launch.dynamic_shared.value >= 15000 * 4
    src = k.source(kd.TensorSpec((2, 15000), kd.float32), backend="cuda")
    assert "kd_dyn_smem" in src and "__shared__ __align__(16) float X_shared" not in src
