"""The default cuda matmul schedules (kdsl_cuda/schedules/gemm.py): each size class (large,
medium, small, skinny) and each hint on the SIMT executor (race-checked, blocks in any order)
against numpy in float64, at shapes that do and do not divide the tiles, 0 and 1 sizes,
batched, float64 and int32; the tests/conftest.py hook NVRTC-compiles every kernel run here."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.gpu.simt import run_simt
from kdsl.frontend.spec import TensorSpec
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl_cuda.schedules import gemm
from test_cuda_size_classes import lowered


def matmul(A, B):
    return A @ B


def specs(dtype="float32", batch=False):
    b = ("b",) if batch else ()
    return [TensorSpec(b + ("n", "k"), dtype), TensorSpec(b + ("k", "m"), dtype)]


def one(x):
    return (x, x)


#: class name -> size hints that pick it
CLASSES = {
    "large": dict(n=one(4096), k=one(4096), m=one(4096)),
    "medium": dict(n=one(1024), k=one(1024), m=one(1024)),
    "small": dict(n=one(64), k=one(64), m=one(64)),
    "skinny_i": dict(n=one(8), k=one(4096), m=one(4096)),
    "skinny_j": dict(n=one(4096), k=one(4096), m=one(16)),
}
#: float32 products of at most 32 rows take the decode recipe (test_decode_gemm.py): the
#: skinny-rows tile serves the other dtypes
DTYPES = {"skinny_i": "float64"}
BLOCKS = {"large": (16, 16, 1), "medium": (8, 8, 1), "small": (8, 8, 1), "skinny_i": (32, 4, 1),
          "skinny_j": (4, 32, 1)}
#: (dividing and not, several blocks and K steps of 8 in the shapes that do not divide, 1s,
#: empty; K kept small: the SIMT interpreter's cost grows with n*k*m)
SHAPES = [(130, 12, 129), (64, 16, 128), (9, 17, 140), (1, 1, 1), (1, 7, 300), (0, 3, 4),
          (5, 0, 6)]


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape) * (4 if np.dtype(dtype).kind == "i" else 1)
    return x.astype(dtype)


def run(f, a, b, rng, out_dtype=None):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = np.full(want.shape, -7, out_dtype or a.dtype)
    run_simt(f, [a, b], [out], [], block_order=rng)
    return out, want


def kinds(f, cls):
    return collect(f.body, lambda x: isinstance(x, cls))


@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_size_class_structure(cls):
    f = lowered(matmul, specs(DTYPES.get(cls, "float32")), CLASSES[cls])
    (k,) = f.kernels
    assert k.launch.block == BLOCKS[cls]
    rings = [a for a in kinds(f, n.Allocate) if a.stages > 1]
    assert bool(rings) == (cls in ("large", "medium")), cls
    if cls == "large":     # the seed's tiles: 128x8 / 8x128 shared, 2x2 vthreads of 4x4
        text = str(f)
        # (rows padded by 16 bytes: kdsl.gpu.shared_layout)
        assert "A.shared: float32[2, 128, 8] strides (1536, 12, 1) shared" in text, text
        assert "C.local" not in text and "local: float32[2, 2, 4, 4] local" in text
        assert any(x.kind is n.ForKind.VECTORIZED for x in kinds(f, n.For))
        assert "wait_group(1)" in text


@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_size_class_correct_at_small_sizes(cls, rng):
    dtype = DTYPES.get(cls, "float32")
    f = lowered(matmul, specs(dtype), CLASSES[cls])
    for nn, kk, mm in SHAPES:
        if 1 in (nn, kk, mm):
            continue   # a 1 is a constant in the trace: a specialisation of its own (below)
        a, b = rand(rng, (nn, kk), dtype), rand(rng, (kk, mm), dtype)
        got, want = run(f, a, b, rng)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,nkm", [(np.float32, s) for s in SHAPES] + [
    (np.float64, (70, 9, 33)), (np.float64, (1, 5, 40)), (np.int32, (33, 17, 65)),
    (np.int32, (4, 1, 3)), (np.int32, (0, 2, 2))])
def test_default_matmul_any_shape_and_dtype(nkm, dtype, rng):
    """Through the kernel API (size classes and constant 1s as at run time)."""
    nn, kk, mm = nkm
    a, b = rand(rng, (nn, kk), dtype), rand(rng, (kk, mm), dtype)
    got = kd.kernel(matmul)(a, b, backend="interp-cuda")
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert got.dtype == np.result_type(a, b)
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-12,
                                   atol=1e-4 if dtype == np.float32 else 1e-12)


def test_float64_copies_two_per_access():
    f = lowered(matmul, specs("float64"), CLASSES["large"])
    vec = [x for x in kinds(f, n.For) if x.kind is n.ForKind.VECTORIZED]
    assert vec and all(int(x.extent.value) == 2 for x in vec)


def test_batched_on_blockIdx_z(rng):
    sizes = dict(CLASSES["medium"], b=one(64))
    f = lowered(matmul, specs(batch=True), sizes)
    assert "blockIdx.z" in str(f)
    for shape in [(3, 70, 9, 65), (2, 1, 5, 3), (0, 4, 4, 4), (4, 16, 8, 16)]:
        bb, nn, kk, mm = shape
        a, b = rand(rng, (bb, nn, kk), np.float32), rand(rng, (bb, kk, mm), np.float32)
        got, want = run(f, a, b, rng)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # a batch of unknown count stays fused on blockIdx.x (y and z hold at most 65535)
    assert "blockIdx.z" not in str(lowered(matmul, specs(batch=True), CLASSES["medium"]))


def test_batched_through_the_kernel(rng):
    a, b = rand(rng, (3, 33, 17), np.float32), rand(rng, (3, 17, 40), np.float32)
    got = kd.kernel(matmul)(a, b, backend="interp-cuda")
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------- hints
def hinted(**hints):
    return kd.kernel(kd.schedule("cuda", **hints)(matmul))


def lower_text(k, dtype="float32"):
    return str(k.lower(*specs(dtype), backend="cuda"))


@pytest.mark.parametrize("hints,expect", [
    (dict(tile={"i0": 64, "i1": 32, "r0": 16}), "A.shared: float32[2, 64, 16] strides (1280, 20, 1) shared"),
    (dict(threads=(8, 4)), "block=(8, 4, 1)"),
    (dict(stages=3), "stages=3"),
    (dict(vectorize=1), None),
    (dict(cache={"A": "local"}), None),
    (dict(cache={"B": "local"}, unroll=4), "unrolled"),
])
def test_hints_are_honoured(hints, expect, rng):
    k = hinted(**hints)
    text = lower_text(k)
    if expect:
        assert expect in text, text
    if hints.get("vectorize") == 1:
        assert "vectorized" not in text and "stages=2" in text
    if "cache" in hints:
        (name,) = hints["cache"]
        assert f"{name}.shared" not in text and f"{name}.local" in text
        assert ({"A", "B"} - {name}).pop() + ".shared" in text
    for nn, kk, mm in [(70, 33, 45), (64, 16, 32), (2, 3, 300)]:
        a, b = rand(rng, (nn, kk), np.float32), rand(rng, (kk, mm), np.float32)
        np.testing.assert_allclose(k(a, b, backend="interp-cuda"), a.astype(np.float64) @ b,
                                   rtol=1e-4, atol=1e-4)


def test_a_hinted_small_tile_gets_fewer_threads():
    """16x16 tiles of K 4 hold 64 elements per shared tile: the block shrinks to 8x8 so that
    every thread copies one (a thread loop of the block's extent)."""
    assert "block=(8, 8, 1)" in lower_text(hinted(tile={"i0": 16, "i1": 16, "r0": 4}))


def test_tensor_cores_hint_for_16_bit_inputs(rng):
    k = hinted(tensor_cores=True)
    text = lower_text(k, "float16")
    assert "wmma" in text and "A.shared" in text
    assert "wmma" not in lower_text(k)                    # float32: the CUDA-core GEMM
    for nn, kk, mm in [(64, 32, 64), (70, 20, 33), (0, 3, 5), (16, 0, 16)]:
        a = rng.standard_normal((nn, kk)).astype(np.float16)
        b = rng.standard_normal((kk, mm)).astype(np.float16)
        got = k(a, b, backend="interp-cuda")
        want = a.astype(np.float64) @ b.astype(np.float64)
        # numpy's float16 matmul rounds to float16; kdsl accumulates in float32 and returns it
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("batch", [one(4), None])
def test_batched_16_bit_on_tensor_cores(batch, rng):
    """A batched 16-bit product runs on tensor cores (fragments of one matrix each): the batch
    on blockIdx.z, or fused into blockIdx.x where its count is unknown (z holds 65535)."""
    sizes = dict(CLASSES["small"], **({} if batch is None else {"b": batch}))
    f = lowered(matmul, specs("float16", batch=True), sizes)
    assert "wmma" in str(f)
    assert ("blockIdx.z" in str(f)) == (batch is not None)
    for sa, sb in (((3, 40, 24), (3, 24, 33)), ((2, 16, 17), (2, 17, 20)), ((0, 16, 16), (0, 16, 16))):
        a = rng.standard_normal(sa).astype(np.float16)
        b = rng.standard_normal(sb).astype(np.float16)
        want = a.astype(np.float64) @ b.astype(np.float64)
        out = np.full(want.shape, np.nan, np.float16)
        run_simt(f, [a, b], [out], [], block_order=rng)
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-2, atol=5e-2)


def test_tensor_cores_need_tiles_of_16():
    """A constant dimension below 16 (a size-1 axis) cannot be tensorized: the CUDA-core GEMM."""
    st = [TensorSpec((1, "k"), "float16"), TensorSpec(("k", "m"), "float16")]
    assert "wmma" not in str(hinted(tensor_cores=True).lower(*st, backend="cuda"))
