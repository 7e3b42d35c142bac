"""The default float32 GEMM at the arrays' edges (issue 11: a 4095 x 1023 x 4097 product ran at
half the speed of 4096 x 1024 x 4096): ``padded_compute`` drops the edge guards of the register
tiles fed by padded shared tiles, and ``coalesced_fallbacks`` gives each vector copy an
element-by-element alternative (what unaligned rows run).  Checked on the SIMT executor
(out-of-bounds accesses and races are errors there) against numpy in float64, with shapes
that do and do not divide the tiles, K % 8 != 0, zero sizes and non-finite data."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.gpu.simt import run_simt
from kdsl.frontend.spec import TensorSpec
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.coalesced_fallbacks import is_copy_alternative, scalar_copies
from kdsl.gpu.interior_blocks import edge_copy
from test_cuda_size_classes import lowered

LARGE = dict(n=(4096, 4096), k=(4096, 4096), m=(4096, 4096))
SPECS = [TensorSpec(("n", "k"), "float32"), TensorSpec(("k", "m"), "float32")]


def matmul(A, B):
    return A @ B


def _guarded_local_stores(s) -> list:
    """The stores into registers (``local`` buffers) that sit under an ``if``."""
    out = []
    for x in collect(s, lambda y: type(y) is n.IfThenElse):
        out += [st for st in collect(x, lambda y: type(y) is n.Store)
                if st.buffer.scope is n.Scope.LOCAL]
    return out


def test_edge_blocks_multiply_add_without_guards():
    """The copy that edge blocks (and every block where K % 8 != 0) run: no guard around the
    register tile's loads or multiply-adds; only the copies and the final store test."""
    f = lowered(matmul, SPECS, LARGE)
    (k,) = f.kernels
    edge = edge_copy(k.body)
    assert not _guarded_local_stores(edge)
    stores = collect(edge, lambda y: type(y) is n.Store and y.buffer.scope is n.Scope.GLOBAL)
    guarded = {id(st) for x in collect(edge, lambda y: type(y) is n.IfThenElse)
               for st in collect(x.then, lambda y: type(y) is n.Store)}
    assert stores and all(id(st) in guarded for st in stores)


def _data(rng, nn, kk, mm, nonfinite):
    a = rng.standard_normal((nn, kk)).astype(np.float32)
    b = rng.standard_normal((kk, mm)).astype(np.float32)
    if nonfinite and nn and kk and mm:
        # inside the arrays, at their last row/column: the padding around them must not spread it
        a[-1, -1], b[-1, 0], b[0, -1] = np.inf, np.nan, -np.inf
    return a, b


@pytest.mark.parametrize("fallback", [False, True], ids=["vector", "scalar"])
@pytest.mark.parametrize("nkm", [(300, 21, 270), (129, 13, 131), (256, 16, 128), (1, 1, 1),
                                 (0, 5, 3), (130, 0, 9), (7, 9, 300)])
@pytest.mark.parametrize("nonfinite", [False, True])
def test_float32_gemm_edges_and_partial_k(nkm, fallback, nonfinite, rng):
    f = lowered(matmul, SPECS, LARGE)
    if fallback:        # the element-by-element copies (what unaligned rows run on a GPU)
        import dataclasses
        f = dataclasses.replace(f, body=scalar_copies(f.body))
        assert not collect(f.body, is_copy_alternative)
    a, b = _data(rng, *nkm, nonfinite)
    out = np.full((nkm[0], nkm[2]), 123.0, np.float32)
    run_simt(f, [a, b], [out], [], block_order=rng)
    with np.errstate(invalid="ignore", over="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, equal_nan=True)


def test_every_vector_copy_has_a_coalesced_alternative():
    """Both operands' copies (prologue and main loop) in every copy of the block body; the
    alternative's consecutive threads copy consecutive elements of a row of A's tile."""
    f = lowered(matmul, SPECS, LARGE)
    (k,) = f.kernels
    alts = collect(k.body, is_copy_alternative)
    vec = collect(k.body, lambda x: type(x) is n.For and x.kind is n.ForKind.VECTORIZED
                  and type(x.body) is n.AsyncCopy)
    assert alts and len(alts) == len(vec)
    copy = collect(alts[0].otherwise, lambda x: type(x) is n.AsyncCopy)[0]
    tx = collect(alts[0].otherwise, lambda x: type(x) is n.For and x.thread is n.ThreadTag.THREAD_X)[0]
    # the column (k) index moves with threadIdx.x % 4 in the dealing, not with the unrolled turn
    assert tx.var in {v for v in _vars(copy.indices[-1])}


def _vars(e):
    return collect(e, lambda x: type(x) is n.Var)


def test_copies_from_global_into_registers_keep_their_guards(rng):
    """``cache={"A": "local"}``: A's slices come straight from global memory, so the register
    tile's guards stay (reading past the array would fault), and results stay right."""
    k = kd.kernel(kd.schedule("cuda", cache={"A": "local"})(matmul))
    f = k.lower(*SPECS, backend="cuda")
    (kern,) = f.kernels
    assert _guarded_local_stores(edge_copy(kern.body))
    a, b = _data(rng, 70, 13, 45, False)
    np.testing.assert_allclose(k(a, b, backend="interp-cuda"), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_cuda_source_picks_the_dealing_by_alignment():
    """The cuda codegen prints each alternative as ``if (<uniform alignment test>) {16-byte
    cp.async} else {4-byte cp.async, dealt}``; the fast copy tests alignment once, up front."""
    src = kd.kernel(matmul).source(np.empty((4095, 1023), np.float32), np.empty((1023, 4097), np.float32),
                                   backend="cuda")
    main = src[src.index("__global__"):]
    # the general copy: the else of the outermost (interior blocks') if -- the least indented
    # else (the fast copy's output stores have elses of their own: their scalar fallbacks)
    lines = main.splitlines()
    elses = [(len(x) - len(x.lstrip()), i) for i, x in enumerate(lines) if x.strip() == "} else {"]
    general = "\n".join(lines[min(elses)[1]:])
    assert "kd_cp_async<4>(" in general and "ax1_inner_j" in general
    # the general copy's vector copies no longer carry a per-thread scalar loop of their own
    # (its output stores, after the last wait, do: 16-byte stores where aligned)
    assert "kd_vok" not in general.split('"n"(0)')[0]
    assert "reinterpret_cast<unsigned long long>(A)" in general.split("kd_cp_async<4>(")[0]


@pytest.mark.parametrize("nkm", [(300, 70, 150), (40, 64, 20)])
def test_tensor_core_gemm_scalar_copies(nkm, rng):
    """The float16 tensor-core recipe's copies get the dealing too (2-byte elements: copied
    synchronously, as the per-thread fallback did): same results, race-free."""
    import dataclasses

    def matmul32(A, B):
        return kd.matmul(A, B, dtype=kd.float32)
    sp = [TensorSpec(("n", "k"), "float16"), TensorSpec(("k", "m"), "float16")]
    f = lowered(matmul32, sp, LARGE)
    assert collect(f.body, is_copy_alternative)
    f = dataclasses.replace(f, body=scalar_copies(f.body))
    nn, kk, mm = nkm
    a = rng.standard_normal((nn, kk)).astype(np.float16)
    b = rng.standard_normal((kk, mm)).astype(np.float16)
    out = np.full((nn, mm), np.nan, np.float32)
    run_simt(f, [a, b], [out], [], block_order=rng)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3 * np.sqrt(kk))
