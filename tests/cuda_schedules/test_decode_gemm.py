"""The decode GEMM (kdsl_cuda/schedules/decode.py): products with at most 32 rows (an LLM's
decode step, matrix-vector) read B once with vector loads, split over K across blocks when the
columns alone cannot fill the GPU.  Checked on the SIMT executor (race-checked, blocks in any
order) against numpy in float64, at shapes that do and do not divide the tiles and parts,
1-row, float32 and float16; the tests/conftest.py hook NVRTC-compiles every kernel run here."""
import re

import numpy as np
import pytest

import kdsl as kd
from kdsl.frontend.spec import TensorSpec
from kdsl.gpu.simt import run_simt
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl_cuda.schedules import decode
from test_cuda_size_classes import lowered


def matmul(A, B):
    return A @ B


def specs(dtype="float32"):
    return [TensorSpec(("n", "k"), dtype), TensorSpec(("k", "m"), dtype)]


#: the LLM decode shape's size classes: 16 x 4096 x 4096
DECODE = dict(n=(16, 31), k=(4096, 8191), m=(4096, 8191))
#: a smaller product of the same recipe (8 parts of K): the SIMT executor's cost grows with
#: parts x blocks x threads
SMALL = dict(n=(16, 31), k=(1024, 2047), m=(256, 511))


def _run(f, a, b, rng, out_dtype):
    out = np.full((a.shape[0], b.shape[1]), -7, out_dtype)
    run_simt(f, [a, b], [out], [], block_order=rng)
    return out


def test_decode_structure():
    """Two kernels: the split-K partials (parts of 64 rows of K: 64 at K = 4096; a block of
    128 threads per part and column block, 16 rows x 4 columns of sums a thread, B's 4 columns
    one vector load), then their sum."""
    f = lowered(matmul, specs(), DECODE)
    assert [k.launch.block for k in f.kernels] == [(128, 1, 1), (128, 1, 1)]
    text = str(f)
    assert "matmul.rf: float32[ceildiv(k, 64), n, m] global" in text, text
    assert "matmul.rf.local: float32[1, 16, 4] local" in text
    assert "B.local: float32[1, 4] local" in text
    vec = [x for x in collect(f.body, lambda x: isinstance(x, n.For))
           if x.kind is n.ForKind.VECTORIZED]
    assert vec and all(int(x.extent.value) == 4 for x in vec)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_decode_split_k_correct(dtype, rng):
    """The split-K schedule (parts of 128 or 256 rows of K) at small sizes: K shorter than a
    part, a last part shorter than the others and than the unrolled step, empty; rows (two
    row groups) and columns that do not divide."""
    f = lowered(matmul, specs(dtype), SMALL)
    found = re.search(r"matmul\.rf: float32\[ceildiv\(k, (\d+)\), n, m\] global", str(f))
    assert found, str(f)
    chunk = int(found.group(1))
    assert chunk >= decode.MIN_PART_K and 1024 // chunk >= 2
    rows, vec = (16, 4) if dtype == "float32" else (8, 8)
    # (rows, chunk + 3, vec + 1): thread 0's tile and the first part whole (the interior copy,
    # guard-free, whose vector loads' alignment is tested once), the rest ragged
    for nn, kk, mm in [(17, 37, 258), (rows, chunk + 3, vec + 1), (2, 0, 6), (0, 5, 7)]:
        a = rng.standard_normal((nn, kk)).astype(dtype)
        b = rng.standard_normal((kk, mm)).astype(dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)
        got = _run(f, a, b, rng, dtype).astype(np.float64)
        # float16: the float32 sum rounded once to float16
        tol = 1e-4 if dtype == "float32" else 1e-3 * max(1.0, np.abs(want).max(initial=0))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,nkm", [(np.float32, (1, 33, 300))])
def test_decode_through_the_kernel(dtype, nkm, rng):
    """Through the kernel API (the size classes of the arrays; a 1 is a constant)."""
    nn, kk, mm = nkm
    a = rng.standard_normal((nn, kk)).astype(dtype)
    b = rng.standard_normal((kk, mm)).astype(dtype)
    got = kd.kernel(matmul)(a, b, backend="interp-cuda")
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert got.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 2e-3 * max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_decode_hints_and_choice():
    """rfactor=1 keeps one kernel; a tile hint keeps the tiled GEMM; more rows than ROWS_MAX
    and few columns are not decode products."""
    k1 = kd.kernel(kd.schedule("cuda", rfactor=1)(matmul))
    a = np.empty((16, 4096), np.float32)
    b = np.empty((4096, 4096), np.float32)
    f = k1.lower(a, b, backend="cuda")
    assert len(f.kernels) == 1 and ".rf" not in str(f)
    kt = kd.kernel(kd.schedule("cuda", tile={"i0": 16, "i1": 128})(matmul))
    assert "B.local" not in str(kt.lower(a, b, backend="cuda"))
    f64 = lowered(matmul, specs(), dict(n=(64, 127), k=(4096, 8191), m=(4096, 8191)))
    assert ".rf" not in str(f64) and "shared" in str(f64)
    narrow = lowered(matmul, specs(), dict(n=(16, 31), k=(4096, 8191), m=(64, 127)))
    assert "B.local" not in str(narrow)


def test_decode_float16_cast_adds_the_partials(rng):
    """float16 ``a @ b``: the cast to float16 adds the partials itself (two kernels, no float32
    product in global memory); with rfactor=1 the cast is its own elementwise kernel."""
    f = lowered(matmul, specs("float16"), DECODE)
    assert len(f.kernels) == 2 and "matmul: float32[1, 4] local" in str(f)
    k1 = kd.kernel(kd.schedule("cuda", rfactor=1)(matmul))
    a = rng.standard_normal((3, 20)).astype(np.float16)
    b = rng.standard_normal((20, 260)).astype(np.float16)
    assert len(k1.lower(a, b, backend="cuda").kernels) == 2
    got = k1(a, b, backend="interp-cuda").astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-3 * np.abs(want).max(), atol=2e-3 * np.abs(want).max())


def test_decode_parts_rule():
    """Parts fill the GPU without making the partials (written and read back) more than half
    of B's bytes; each a constant chunk of K (64 or 128 rows at K = 4096)."""
    class P:
        explicit, rfactor, vectorize, unroll, tile = set(), None, None, None, {}
    from kdsl.frontend.trace import trace
    from kdsl.runtime.dispatch import make_schedule
    for dtype, parts in (("float32", 64), ("float16", 32)):
        g = trace(matmul, specs(dtype))
        s = make_schedule(g)
        dims = {d.name: d for p in g.params for d in p.shape if isinstance(d, n.Var)}
        s.size_hints = {dims[k]: v for k, v in DECODE.items()}
        h = next(h for h in s.stages if h.stage.is_reduction)
        cfg = decode.choose(s, h, P(), None)
        assert cfg.parts == parts and cfg.vec == 16 // np.dtype(dtype).itemsize, cfg
        assert cfg.chunk == 4096 // parts and cfg.chunk % cfg.unroll == 0, cfg
        assert cfg.rows == (16 if dtype == "float32" else 8)
