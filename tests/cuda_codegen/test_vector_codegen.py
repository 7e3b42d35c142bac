"""Vectorized loops print 16-byte loads and stores with an alignment-checked scalar fallback
(kdsl_cuda/codegen/vector.py); the device tests run them (test_codegen_device.py)."""
import numpy as np
import pytest

import kdsl as kd

pytest.importorskip("kdsl_cuda", reason="kdsl_cuda is not installed (pip install ./kdsl_cuda)")


def _source(fn, *arrays):
    import kdsl_cuda
    from kdsl.backends import registry
    if "cuda" not in registry.backends():
        kd.register_backend("cuda", kdsl_cuda.backend)
    return kd.kernel(fn).source(*arrays, backend="cuda")


def test_elementwise_gets_float4_loads_and_store():
    a = np.zeros(1 << 20, np.float32)
    src = _source(lambda x, y: x + y * 2, a, a)
    assert src.count("*reinterpret_cast<const float4*>") == 2
    assert "*reinterpret_cast<float4*>" in src
    assert "& 15ULL) == 0ULL" in src          # alignment checked at run time
    from kdsl_cuda.build import compile_ptx
    assert "ld.global.nc.v4.f32" in compile_ptx(src) or "ld.global.v4.f32" in compile_ptx(src)


def test_row_sum_loads_float4_and_keeps_the_scalar_fallback():
    src = _source(lambda A: A.sum(axis=1), np.zeros((16384, 16384), np.float32))
    assert "*reinterpret_cast<const float4*>" in src
    assert "} else {" in src


def test_doubles_get_double2_and_halves_uint4():
    src = _source(lambda x: x * 2, np.zeros(1 << 20, np.float64))
    assert "double2" in src
    # 8 halves a 16-byte word vector (issue 27): lane 2w in the low half of word w
    src = _source(lambda x: x * 2, np.zeros(1 << 20, np.float16))
    assert "*reinterpret_cast<const uint4*>" in src and "*reinterpret_cast<uint4*>" in src
    assert "(uint16_t)(kd_vl.y >> 16)" in src and "kd_vs.w |= " in src
    from kdsl_cuda.build import compile_ptx
    assert "ld.global.nc.v4.u32" in compile_ptx(src) or "ld.global.v4.u32" in compile_ptx(src)


def test_vectorized_results_on_the_simt_interpreter():
    rng = np.random.default_rng(3)
    k = kd.kernel(lambda x, y: x - y)
    for n_ in (0, 1, 7, 1024, 1029):
        x, y = rng.standard_normal(n_).astype(np.float32), rng.standard_normal(n_).astype(np.float32)
        np.testing.assert_array_equal(k(x, y, backend="interp-cuda"), x - y)


def test_outputs_named_after_math_functions_do_not_shadow_them():
    """A stage is named after its op (kd.exp -> "exp"): its buffer must not hide CUDA's exp()
    (found by the fuzzer on the H200: NVRTC rejected the source)."""
    from kdsl_cuda.build import compile_cubin
    a = np.zeros(64, np.float64)
    src = _source(lambda x: kd.tanh(abs(x) - x * x), a)
    compile_cubin(src)
    src = _source(lambda x: (kd.exp(x), kd.sqrt(x)), a.astype(np.float32))
    compile_cubin(src)


def test_divisions_of_loaded_values_stay_behind_their_guards():
    """Hoisting thread-invariant divisions must not hoist ``X[i, j] // Y[i, j]``: it reads
    memory the bounds guard protects (compute-sanitizer memcheck found the read past the end
    on the H200)."""
    import kdsl_cuda
    from kdsl.backends import registry
    if "cuda" not in registry.backends():
        kd.register_backend("cuda", kdsl_cuda.backend)
    k = kd.kernel(lambda X, Y: kd.compute(X.shape, lambda i, j: X[i, j] // Y[i, j], name="O"))

    @k.schedule("cuda")
    def tile(s):
        O = s.outputs[0]
        io, jo, ii, ji = O.tile(O.axes[0], O.axes[1], 4, 32)
        for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
            O.bind(ax, tag)
    src = k.source(np.zeros((33, 130), np.int32), np.zeros((33, 130), np.int32), backend="cuda")
    body = src[src.index("extern"):]
    guard = body.index("< X_1")
    assert body.index("kd_sfloordiv<int32_t>(X[") > guard


def test_unroll_hint_over_fused_index_divisions_compiles_quickly():
    """fuzz F33: ``#pragma unroll`` over Python-style divisions by run-time sizes (a fused
    multi-dim elementwise stage with an unroll hint) made NVRTC take minutes; such loops are
    left to NVRTC's own unrolling, while loops of thread-invariant index math keep the pragma."""
    from kdsl_cuda.build import compile_cubin

    @kd.kernel
    @kd.schedule("cuda", vectorize=2, unroll=2)
    def f(A):
        return A + 0.1
    src = _source(f.fn, np.ones((2, 3, 4, 5), np.float32))
    assert "#pragma unroll" not in src
    compile_cubin(src)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vectorized_async_copies_are_one_16_byte_cp_async(dtype):
    """A vectorized loop of asynchronous copies (the GEMMs' multi-buffered shared tiles) is one
    16-byte ``cp.async`` per vector where its guards hold for every lane and both addresses are
    aligned, with the element loop as fallback; in PTX and SASS terms, LDGSTS.128."""
    def mm(A, B):
        return A @ B
    spec = kd.TensorSpec((4096, 4096), dtype)
    fn = kd.schedule("cuda", tensor_cores=True)(mm) if dtype == "float16" else mm
    src = _source(fn, spec, spec)
    assert src.count("kd_cp_async<16>(") >= 2          # A's and B's tiles
    assert "& 15ULL) == 0ULL" in src
    from kdsl_cuda.build import compile_ptx
    assert "cp.async.cg.shared.global" in compile_ptx(src)


def test_gemm_output_rows_store_float4():
    """The tiled GEMM's register tile goes out 16 bytes a store (a vectorized loop of two
    Stores: the tile row and its virtual-thread copy 64 columns on), alignment tested once
    for the interior blocks; ``vectorize=1`` keeps every access scalar."""
    from kdsl_cuda.build import compile_ptx
    a, b = np.zeros((8192, 64), np.float32), np.zeros((64, 8192), np.float32)
    src = _source(lambda a, b: a @ b, a, b)
    assert src.count("*reinterpret_cast<float4*>(&matmul[") >= 4, src
    assert "st.global.v4.f32" in compile_ptx(src)


def test_vector_stores_of_a_sequence_only_where_disjoint():
    """A vectorized loop's Stores become vector stores together only when none can overlap
    another (offsets a constant >= lanes apart in one buffer) and the body reads none of the
    stored buffers: else lane by lane, in order."""
    from kdsl import dtypes as dt
    from kdsl.ir import make as mk
    from kdsl.ir import nodes as n
    from kdsl_cuda.codegen.vector import _vector_stores
    v = n.Var(dt.index, "v")
    C = n.Buffer("C", dt.float32, (mk.as_expr(8), mk.as_expr(256)))
    D = n.Buffer("D", dt.float32, (mk.as_expr(8), mk.as_expr(256)))
    X = n.Buffer("X", dt.float32, (mk.as_expr(256),))
    val = n.Load(dt.float32, X, (v,))

    def st(buf, off, value=val):
        return n.Store(buf, (mk.as_expr(1), mk.add(mk.as_expr(off), v)), value)

    def vs(*stores):
        body = n.Seq(tuple(stores))
        return _vector_stores(body, v, 4, mk.as_expr(0), {s.buffer for s in stores})
    assert [vt for _, vt in vs(st(C, 0), st(C, 64))] == ["float4", "float4"]
    assert vs(st(C, 0), st(C, 2)) is None              # lanes 2, 3 written twice
    assert vs(st(C, 0), st(D, 2)) is not None          # two buffers
    assert vs(st(C, 0), st(D, 0, n.Load(dt.float32, C, (mk.as_expr(1), v)))) is None
