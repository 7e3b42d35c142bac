"""The interior_blocks pass (kdsl/gpu/interior_blocks.py): a tiled kernel's blocks that lie
inside the arrays run a copy of the main loop without the guards that hold there; edge
blocks keep the guarded copy.  Checked on the SIMT executor (out-of-bounds accesses and races
are errors there) against numpy in float64, with shapes that give interior and edge blocks,
and reductions that do and do not divide the k step."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.gpu.simt import run_simt
from kdsl.frontend.spec import TensorSpec
from kdsl.ir import nodes as n
from kdsl.ir.printer import format_expr
from kdsl.ir.visitor import collect, free_vars
from kdsl.gpu.coalesced_fallbacks import is_copy_alternative
from kdsl_cpu.passes.tighten_loops import conjuncts
from test_cuda_size_classes import lowered

LARGE = dict(n=(4096, 4096), k=(4096, 4096), m=(4096, 4096))


def matmul(A, B):
    return A @ B


def matmul32(A, B):
    return kd.matmul(A, B, dtype=kd.float32)


def _version(f):
    """The versioning ``if`` of the one kernel: (condition, interior copy, edge copy)."""
    (k,) = f.kernels
    ifs = [s for s in collect(k.body, lambda x: type(x) is n.IfThenElse)
           if collect(s.then, lambda x: type(x) is n.Barrier) and s.otherwise is not None]
    assert ifs, "no versioned block body"
    top = ifs[0]
    return top.cond, top.then, top.otherwise


def _guards(s):
    """Every conjunct of the ``if`` conditions and copy predicates under ``s``."""
    out = []
    for x in collect(s, lambda x: type(x) in (n.IfThenElse, n.AsyncCopy) and not is_copy_alternative(x)):
        c = x.cond if type(x) is n.IfThenElse else x.predicate
        if c is not None:
            out += conjuncts(c)
    return out


def test_float32_gemm_interior_blocks_lose_their_guards():
    f = lowered(matmul, [TensorSpec(("n", "k"), "float32"), TensorSpec(("k", "m"), "float32")], LARGE)
    cond, inner, edge = _version(f)
    text = format_expr(cond)
    assert "- n + 127 < 0" in text and "- m + 127 < 0" in text          # rows, columns
    assert "ceildiv(k, 8)*8 - k - 1 < 0" in text                           # K % 8 == 0
    assert len(_guards(inner)) < len(_guards(edge)) // 3
    # what stays are the copies' tests that the prefetched k step exists (they fail on the
    # last turn, so no block-wide condition covers them); rows and columns are never tested
    left = _guards(inner)
    assert left and not any({v.name for v in free_vars(c)} & {"n", "m"} for c in left)


@pytest.mark.parametrize("nkm", [(300, 24, 270), (300, 21, 270), (256, 16, 128), (129, 8, 127),
                                 (0, 8, 200), (260, 0, 260)])
def test_float32_gemm_interior_and_edge_blocks(nkm, rng):
    f = lowered(matmul, [TensorSpec(("n", "k"), "float32"), TensorSpec(("k", "m"), "float32")], LARGE)
    nn, kk, mm = nkm
    a = rng.standard_normal((nn, kk)).astype(np.float32)
    b = rng.standard_normal((kk, mm)).astype(np.float32)
    out = np.full((nn, mm), np.nan, np.float32)
    run_simt(f, [a, b], [out], [], block_order=rng)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_pipelined_copies_keep_only_the_prefetch_test():
    """The tensor-core recipe's copies are predicated by the tile bounds and by the pipeline's
    "the prefetched step exists" test; interior blocks keep only the latter, which narrows the
    k bound's range (the step it prefetches is a whole one when K % 64 == 0)."""
    sp = [TensorSpec(("n", "k"), "float16"), TensorSpec(("k", "m"), "float16")]
    f = lowered(matmul32, sp, LARGE)
    cond, inner, edge = _version(f)
    assert "ceildiv(k, 64)*64 - k - 1 < 0" in format_expr(cond)      # K % 64 == 0
    ring = {format_expr(c) for c in _guards(inner)}
    # (the prologue's copies test that the first steps exist)
    assert ring == {"r0.outer + 2 < ceildiv(k, 64)", "0 < ceildiv(k, 64)", "1 < ceildiv(k, 64)"}, ring
    assert len(_guards(edge)) >= 3 * 2


@pytest.mark.parametrize("nkm", [(300, 64, 150), (300, 70, 150), (256, 128, 128), (40, 64, 20)])
def test_tensor_core_gemm_interior_and_edge_blocks(nkm, rng):
    sp = [TensorSpec(("n", "k"), "float16"), TensorSpec(("k", "m"), "float16")]
    f = lowered(matmul32, sp, LARGE)
    nn, kk, mm = nkm
    a = rng.standard_normal((nn, kk)).astype(np.float16)
    b = rng.standard_normal((kk, mm)).astype(np.float16)
    out = np.full((nn, mm), np.nan, np.float32)
    run_simt(f, [a, b], [out], [], block_order=rng)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3 * np.sqrt(kk))


def test_kernels_without_a_main_loop_are_left_alone():
    f = lowered(lambda A, B: A + B, [TensorSpec(("n", "m"), "float32")] * 2, dict(n=(4096, 4096), m=(4096, 4096)))
    (k,) = f.kernels
    assert not collect(k.body, lambda x: type(x) is n.IfThenElse and x.otherwise is not None
                       and collect(x.then, lambda y: type(y) is n.For))


def test_cuda_fast_copy_tests_alignment_once():
    """The cuda codegen adds the kernel-uniform alignment tests of the fast copy's vector
    accesses to the versioning condition (its else branch is the general code), so interior
    blocks of aligned arrays copy with plain cp.async: no per-copy test, no scalar fallback."""
    k = kd.kernel(matmul32)
    a = np.empty((4096, 4096), np.float16)
    src = k.source(a, a, backend="cuda")
    main = src[src.index("__global__"):]
    top = main.index("if ((")
    depth, i = 0, main.index("{", top)
    while True:          # the fast branch: to the brace that closes the if's
        depth += {"{": 1, "}": -1}.get(main[i], 0)
        if depth == 0:
            break
        i += 1
    fast, general = main[top:i], main[i:]
    assert general.startswith("} else {")
    head = fast.split("\n", 1)[0]
    assert "reinterpret_cast<unsigned long long>(A)" in head and "reinterpret_cast<unsigned long long>(B)" in head
    assert "kd_vok" not in fast and "kd_cp_async<16>(" in fast
    # the general copy keeps its alignment tests, one per copy, and falls back to element copies
    # dealt across the block (coalesced_fallbacks)
    assert "reinterpret_cast<unsigned long long>(A)" in general and "ax1_inner_j" in general


def test_a_middle_copy_for_reductions_the_step_does_not_divide():
    """Where K % 8 != 0 (a condition no block escapes), a middle copy still drops the row and
    column guards of the multiply-adds for the blocks inside the matrix; only the k guards
    stay.  Tensor-core kernels (no guarded arithmetic: padded tiles) get no middle copy."""
    f = lowered(matmul, [TensorSpec(("n", "k"), "float32"), TensorSpec(("k", "m"), "float32")], LARGE)
    cond, inner, edge = _version(f)
    assert type(edge) is n.IfThenElse and edge.alternatives
    mid_cond, middle = format_expr(edge.cond), edge.then
    assert "- n + 127 < 0" in mid_cond and "- m + 127 < 0" in mid_cond and "ceildiv(k" not in mid_cond
    left = _guards(middle)
    assert left and not any({v.name for v in free_vars(c)} & {"n", "m"} for c in left)
    assert any("k" in {v.name for v in free_vars(c)} for c in left)
    g = lowered(matmul32, [TensorSpec(("n", "k"), "float16"), TensorSpec(("k", "m"), "float16")], LARGE)
    _, _, tc_edge = _version(g)
    assert not (type(tc_edge) is n.IfThenElse and tc_edge.alternatives)
