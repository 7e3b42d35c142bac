"""Tensor-core code (kdsl_cuda/codegen/wmma.py) without a GPU.

1. The register maps are checked by emulating a warp in numpy: the lane-to-element texts the
   code generator prints (evaluated per lane), its ``ldmatrix`` plans (each lane's address,
   the PTX ISA's ``ldmatrix`` distribution of 8x8 matrices) and its ``mma.sync`` plans
   against the PTX ISA's m16n8k16 fragment layouts, coded here independently.
2. Every tensor-core variant (fp16/bf16 inputs, fp32/fp16 accumulation, row/col-major A and
   B, the three WMMA shapes, global / shared / pipelined shared tiles) is lowered, printed,
   NVRTC-compiled for sm_90 and its PTX read: ``mma.sync`` of the right types, ``ldmatrix``
   for shared tiles, no local memory; and run on the SIMT executor (interp-cuda) against
   numpy on divisible and non-divisible sizes (float16 only: numpy has no bfloat16 here).
"""
import re

import numpy as np
import pytest

import kdsl as kd
from kdsl.ir import nodes as n
from kdsl_cuda.codegen.wmma import lane_elements, ldmatrix_plan, mma_plan
from wmma_cuda_cases import CASES, inputs, kernel as _kernel, reference

A_, B_, C_ = n.Scope.WMMA_MATRIX_A, n.Scope.WMMA_MATRIX_B, n.Scope.WMMA_ACCUMULATOR


# ------------------------------------------------------------------ the PTX ISA's maps
def ptx_a(lane):
    """mma.m16n8k16 A (16x16, .f16/.bf16): element i of a0..a7 -> (register, half, row, col)."""
    g, t = lane >> 2, lane & 3
    return [(i >> 1, i & 1, g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)) for i in range(8)]


def ptx_b(lane):
    """B (16x8): element i of b0..b3 -> (register, half, row, col)."""
    g, t = lane >> 2, lane & 3
    return [(i >> 1, i & 1, 2 * t + (i & 1) + 8 * (i >> 1), g) for i in range(4)]


def ptx_c(lane, f16=False):
    """C/D (16x8): element i of c0..c3 -> (register, half, row, col); float16: pairs packed."""
    g, t = lane >> 2, lane & 3
    return [((i >> 1) if f16 else i, (i & 1) if f16 else 0, g + 8 * (i >> 1), 2 * t + (i & 1))
            for i in range(4)]


# ------------------------------------------------------------------ a warp in numpy
def lanes_of(scope, tile):
    """Each lane's registers (suffix -> [lo, hi] for 16-bit pairs, value for float32 C) for
    ``tile``, through the generator's lane texts; checks every element is held exactly once."""
    rows, cols = tile.shape
    seen = np.zeros(tile.shape, int)
    regs = []
    for lane in range(32):
        env = {"kd_wg": lane >> 2, "kd_wt": lane & 3}
        mine = {}
        for suffix, r, c, h in lane_elements(scope, rows, cols):
            rr, cc = eval(r, {}, env), eval(c, {}, env)
            seen[rr, cc] += 1
            if scope is C_:
                mine[suffix] = tile[rr, cc]
            else:
                mine.setdefault(suffix, [None, None])[h] = tile[rr, cc]
        regs.append(mine)
    assert (seen == 1).all()
    return regs


def tile_of(scope, regs, rows, cols):
    out = np.full((rows, cols), np.nan)
    for lane in range(32):
        env = {"kd_wg": lane >> 2, "kd_wt": lane & 3}
        for suffix, r, c, h in lane_elements(scope, rows, cols):
            v = regs[lane][suffix]
            out[eval(r, {}, env), eval(c, {}, env)] = v if scope is C_ else v[h]
    return out


@pytest.mark.parametrize("scope,rows,cols", [(A_, 16, 16), (A_, 8, 16), (A_, 32, 16), (B_, 16, 16),
                                             (B_, 16, 8), (B_, 16, 32), (C_, 16, 16), (C_, 32, 8), (C_, 8, 32)])
def test_lane_texts_cover_each_tile_element_once(scope, rows, cols):
    tile = np.arange(rows * cols, dtype=float).reshape(rows, cols)
    regs = lanes_of(scope, tile)
    np.testing.assert_array_equal(tile_of(scope, regs, rows, cols), tile)
    if scope is C_:        # the store pairs (h = 0, 1) are neighbours in a row
        for (s0, r0, c0, h0), (s1, r1, c1, h1) in zip(*[iter(lane_elements(C_, rows, cols))] * 2):
            assert s0[:2] == s1[:2] and r0 == r1 and (h0, h1) == (0, 1) and c1 == c0.replace(
                f"{int(c0.split()[0])} +", f"{int(c0.split()[0]) + 1} +")


def test_one_atom_is_the_ptx_fragment():
    """A 16x16 A tile: the registers that mma_plan passes as a0..a3 hold what the PTX ISA
    says; likewise b0, b1 of an 8-column B tile and c0..c3 of a 16x8 accumulator tile."""
    rng = np.random.default_rng(0)
    for scope, shape, ptx, pick in ((A_, (16, 16), ptx_a, lambda plan: plan[0][0]),
                                    (B_, (16, 8), ptx_b, lambda plan: plan[0][1])):
        tile = rng.integers(-50, 50, shape).astype(float)
        regs = lanes_of(scope, tile)
        ops = pick(mma_plan(16, 8, False))
        for lane in range(32):
            for reg, half, r, c in ptx(lane):
                x = ops[reg]
                suffix = (x[0], 0, x[1]) if scope is A_ else (0, x[0], x[1])
                assert regs[lane][suffix][half] == tile[r, c]
    tile = rng.integers(-50, 50, (16, 8)).astype(float)
    regs = lanes_of(C_, tile)
    (_, _, c_ops), = mma_plan(16, 8, False)
    for lane in range(32):
        for reg, _, r, c in ptx_c(lane):
            assert regs[lane][c_ops[reg]] == tile[r, c]


def _emulate_mma(m, nn, A, B, C, f16=False):
    """D = A @ B + C for one m x nn x 16 tile, through the generator's fragment maps and
    mma_plan, each mma.sync done as the PTX ISA defines it."""
    ra, rb, rc = lanes_of(A_, A), lanes_of(B_, B), lanes_of(C_, C)
    rd = [dict(x) for x in rc]
    for a_ops, b_ops, c_ops in mma_plan(m, nn, f16):
        a16, b8, c16 = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
        for lane in range(32):
            areg = [(0, 0) if x is None else ra[lane][(x[0], 0, x[1])] for x in a_ops]
            breg = [rb[lane][(0, x[0], x[1])] for x in b_ops]
            for reg, half, r, c in ptx_a(lane):
                a16[r, c] = areg[reg][half]
            for reg, half, r, c in ptx_b(lane):
                b8[r, c] = breg[reg][half]
            for reg, half, r, c in ptx_c(lane, False):      # (f16 pairs: values kept unpacked here)
                x = c_ops[reg] if not f16 else None
                if x is not None:
                    c16[r, c] = rc[lane][x]
        d16 = a16 @ b8 + c16
        for lane in range(32):
            for reg, half, r, c in ptx_c(lane, False):
                x = c_ops[reg]
                if x is not None:
                    rd[lane][x] = d16[r, c]
    return tile_of(C_, rd, m, nn)


@pytest.mark.parametrize("shape", [(16, 16, 16), (32, 8, 16), (8, 32, 16)])
def test_mma_plan_computes_the_tile_product(shape):
    m, nn, k = shape
    rng = np.random.default_rng(1)
    A = rng.integers(-8, 8, (m, k)).astype(float)
    B = rng.integers(-8, 8, (k, nn)).astype(float)
    C = rng.integers(-8, 8, (m, nn)).astype(float)
    np.testing.assert_array_equal(_emulate_mma(m, nn, A, B, C), A @ B + C)


def test_f16_accumulator_plan_pairs_registers():
    """float16 accumulation: c0c1 and c2c3 packed (two registers per instruction), the
    rows 8..15 of an 8-row tile zero (None)."""
    for a, b, c in mma_plan(16, 16, True):
        assert len(c) == 2 and all(x[2] == 0 for x in c)
    for a, b, c in mma_plan(8, 32, True):
        assert a[1] is None and a[3] is None and c[1] is None


def _emulate_ldmatrix(is_a, col, rows, cols, ldm, base, mem):
    """Each lane's registers after the plan's ldmatrix instructions on flat memory ``mem``
    (16-bit elements) with the tile's (0, 0) at ``base``."""
    regs = [dict() for _ in range(32)]
    for width, trans, mtext, off, targets in ldmatrix_plan(is_a, col, rows, cols):
        addr = []
        for lane in range(32):
            tid = 64 + lane           # a thread of the block's third warp
            env = {"kd_tid": tid, "kd_lr": tid & 7, "kd_ws2": ldm}
            env["kd_m"] = eval(mtext, {}, env)
            addr.append(base + eval(off, {}, env))
        for a in addr[:8 * width]:
            assert a % 8 == 0, "an ldmatrix row address is not 16-byte aligned"
        mats = [np.array([mem[addr[8 * j + r]:addr[8 * j + r] + 8] for r in range(8)]) for j in range(width)]
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for j, target in enumerate(targets):
                M = mats[j].T if trans else mats[j]
                regs[lane][target] = [M[g, 2 * t], M[g, 2 * t + 1]]
    return regs


@pytest.mark.parametrize("is_a,rows,cols", [(True, 16, 16), (True, 8, 16), (True, 32, 16),
                                            (False, 16, 16), (False, 16, 8), (False, 16, 32)])
@pytest.mark.parametrize("col", [False, True], ids=["row_major", "col_major"])
def test_ldmatrix_plan_loads_what_the_element_path_loads(is_a, col, rows, cols):
    ldm, base = 40, 24                 # a padded row and an offset: multiples of 8 elements
    mem = np.arange(4096, dtype=float)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    tile = mem[base + (c * ldm + r if col else r * ldm + c)]
    want = lanes_of(A_ if is_a else B_, tile)
    got = _emulate_ldmatrix(is_a, col, rows, cols, ldm, base, mem)
    for lane in range(32):
        assert got[lane] == want[lane], lane


# ------------------------------------------------------------------ generated code
def _specs(mm):
    cfg = mm.tc_config
    d = getattr(kd, cfg["dtype"])
    return (kd.TensorSpec(("k", "n") if cfg["trans_a"] else ("n", "k"), d),
            kd.TensorSpec(("m", "k") if cfg["trans_b"] else ("k", "m"), d))


@pytest.fixture(scope="module")
def cuda_registered():
    import kdsl_cuda
    from kdsl.backends.registry import unregister_backend
    kd.register_backend("cuda", kdsl_cuda.backend)
    yield
    unregister_backend("cuda")


@pytest.mark.parametrize("case", sorted(CASES))
def test_tensor_core_kernels_compile_to_mma_sync(case, cuda_registered):
    from kdsl_cuda.build import compile_cubin, compile_ptx
    mm = _kernel(case)
    cfg, shape, kw = CASES[case]
    src = mm.source(*_specs(mm), backend="cuda")
    assert "#include" not in src
    assert compile_cubin(src)[:4] == b"\x7fELF"
    ptx = compile_ptx(src)
    acc = "f16" if cfg.get("out") == "float16" else "f32"
    ab = "bf16" if cfg.get("dtype") == "bfloat16" else "f16"
    instr = set(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.[\w.]+", ptx))
    assert instr == {f"mma.sync.aligned.m16n8k16.row.col.{acc}.{ab}.{ab}.{acc}"}
    ldsm = set(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x\d(?:\.trans)?\.shared\.b16", ptx))
    if kw.get("shared"):
        # A row-major plain, B row-major transposed (and the other way round col-major)
        trans_a, trans_b = cfg.get("trans_a", False), cfg.get("trans_b", False)
        assert any(".trans" in x for x in ldsm) == (trans_a or not trans_b)
        assert any(".trans" not in x for x in ldsm) == (not trans_a or trans_b)
    else:
        assert not ldsm
    if kw.get("stages"):
        assert "cp.async.commit_group" in ptx and "cp.async.wait_group" in ptx
    assert not re.search(r"\b(ld|st)\.local", ptx), "fragments spilled to local memory"


@pytest.mark.parametrize("case", sorted(c for c in CASES if "bf16" not in c))
@pytest.mark.parametrize("nkm", [(33, 47, 65), (32, 32, 32), (5, 3, 40)])
def test_tensor_core_kernels_on_the_simt_executor(case, nkm, rng, cuda_registered):
    """The same schedules on interp-cuda (each also NVRTC-compiled by the suite's hook)."""
    mm = _kernel(case)
    A, B = inputs(rng, mm, *nkm)
    got = mm(A, B, backend="interp-cuda")
    ref = reference(mm, A, B)
    if CASES[case][0].get("out") == "float16":
        # float16 accumulation: one rounding per 16-long k block; |partial sums| <~ 4 sqrt(k)
        tol = 2 ** -11 * 4 * np.sqrt(nkm[1]) * 4
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=0, atol=tol)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
