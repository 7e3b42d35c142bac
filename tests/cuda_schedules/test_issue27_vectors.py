"""Issue 27 row B: 16-bit row-wise and elementwise chains read and write 16-byte vectors (8
halves, ``uint4``), a broadcast row vector and a per-row float32 statistic do not narrow them.
Checks the generated CUDA (no device, no NVRTC) and, at small sizes, the results on the SIMT
executor against numpy."""
import numpy as np

import kdsl as kd


def bias_gelu_res(x, b, r):
    y = (x + b).astype(np.float32)
    g = 0.5 * y * (1.0 + np.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))
    return (g + r.astype(np.float32)).astype(np.float16)


def rmsnorm(x, w):
    x32 = x.astype(np.float32)
    inv = 1.0 / np.sqrt((x32 * x32).mean(axis=1, keepdims=True) + 1e-6)
    return (x32 * inv * w.astype(np.float32)).astype(np.float16)


def _vector_extents(f):
    from kdsl.ir import nodes as n
    from kdsl.ir.visitor import collect
    return {int(x.extent.value) for x in collect(f.body, lambda x: isinstance(x, n.For))
            if x.kind is n.ForKind.VECTORIZED}


def test_bias_gelu_residual_uint4():
    k = kd.kernel(bias_gelu_res)
    args = (np.empty((8192, 8192), np.float16), np.empty(8192, np.float16),
            np.empty((8192, 8192), np.float16))
    assert _vector_extents(k.lower(*args, backend="cuda")) == {8}
    src = k.source(*args, backend="cuda")
    # x, the row vector b and r: three 16-byte loads; one 16-byte store
    assert src.count("*reinterpret_cast<const uint4*>") == 3, src
    assert "*reinterpret_cast<uint4*>" in src
    assert "kd_f2h(kd_rh(" not in src      # a cast's result stored without rounding twice


def test_rmsnorm_uint4():
    k = kd.kernel(rmsnorm)
    args = (np.empty((8192, 4096), np.float16), np.empty(4096, np.float16))
    f = k.lower(*args, backend="cuda")
    assert _vector_extents(f) == {8}, str(f)
    # ~4 vectors of a row a thread (rules.CHAIN_VECTORS): 4096..8191 halves, 256 threads
    assert [kk.launch.block for kk in f.kernels] == [(256, 1, 1)]
    src = k.source(*args, backend="cuda")
    assert "*reinterpret_cast<uint4*>" in src and "const uint4" in src


def test_small_sizes_on_simt(rng):
    x = rng.standard_normal((5, 40)).astype(np.float16)
    b = rng.standard_normal(40).astype(np.float16)
    r = rng.standard_normal((5, 40)).astype(np.float16)
    got = kd.kernel(bias_gelu_res)(x, b, r, backend="interp-cuda")
    np.testing.assert_allclose(got.astype(np.float64), bias_gelu_res(x, b, r).astype(np.float64),
                               rtol=2e-3, atol=2e-3)
    w = rng.standard_normal(40).astype(np.float16)
    got = kd.kernel(rmsnorm)(x, w, backend="interp-cuda").astype(np.float64)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=4e-3, atol=4e-3)


def test_bias_gelu_residual_converts_once():
    """NVVM shares each float16 conversion between its uses (no inline asm, no branch in
    kd_f2h/kd_h2f): x + b rounded to float16 once per element, not at each of its five uses
    (54 ``cvt.rn.f16.f32`` in the kernel before; 8 lanes x (rounding + store) + the scalar
    tail's 2 now)."""
    from kdsl_cuda.build import compile_ptx
    k = kd.kernel(bias_gelu_res)
    args = (np.empty((8192, 8192), np.float16), np.empty(8192, np.float16),
            np.empty((8192, 8192), np.float16))
    ptx = compile_ptx(k.source(*args, backend="cuda"))
    assert ptx.count("cvt.rn.f16.f32") <= 20, ptx.count("cvt.rn.f16.f32")


def test_skinny_tensor_core_gemm_ring_buffers():
    """A tensor-core GEMM never gets more ring buffers than its size class has k steps (K =
    64..127: two steps of 64, two buffers; 4096..: four)."""
    from test_cuda_size_classes import lowered
    from kdsl.frontend.spec import TensorSpec

    def mm(a, b):
        return a @ b

    specs = [TensorSpec(("n", "k"), "float16"), TensorSpec(("k", "m"), "float16")]
    skinny = str(lowered(mm, specs, dict(n=(8192, 16383), k=(64, 127), m=(8192, 16383))))
    assert "stages=2" in skinny and "stages=4" not in skinny and "stages=3" not in skinny
    big = str(lowered(mm, specs, dict(n=(8192, 16383), k=(4096, 8191), m=(8192, 16383))))
    assert "stages=2" not in big and ("stages=4" in big or "stages=3" in big)
