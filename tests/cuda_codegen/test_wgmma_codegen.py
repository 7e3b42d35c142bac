"""Hopper tensor-core code (kdsl_cuda/codegen/wgmma.py) without a GPU.

1. The accumulator registers a ``kd_wgmma_*`` function hands to ``wgmma.mma_async`` are checked
   against the PTX ISA's layout of the m64nNk16 D fragment (coded here independently) through
   the fragment's own element map (``codegen/wmma.lane_elements``): register i of lane l of
   warp w must be the fragment element holding D's row 16w + 8((i >> 1) & 1) + l / 4, column
   8(i >> 2) + 2(l % 4) + (i & 1), in the warp's 16-row share.
2. Variants (float16/bfloat16, n = 64/128/256, N-major and K-major B, 0/2/3 stages) are
   lowered, printed, NVRTC-compiled (sm_90a) and their PTX read: the wgmma of the right
   shape, types and transpose, its fences, the proxy fence before barriers, swizzled copies,
   no local memory.  (Their numbers are checked on the SIMT executor in tests/gpu_core and
   on the GPU in tests/cuda/test_wgmma_device.py.)
"""
import re

import pytest

import kdsl as kd
from kdsl.errors import BackendCompileError
from kdsl.ir import nodes as n
from kdsl.passes.pipeline import lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule
from kdsl_cuda.build import compile_cubin, compile_ptx, target_arch
from kdsl_cuda.codegen import generate
from kdsl_cuda.codegen.wmma import lane_elements
from wmma_schedules import mm16_graph, wgmma_schedule

from kdsl import dtypes as dt


def ptx_d(warp, lane, i):
    """wgmma .m64nNk16 D (float32): register i of a thread -> (row, col) of the 64 x N tile."""
    return 16 * warp + 8 * ((i >> 1) & 1) + lane // 4, 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)


def _module(dtype=dt.float16, trans_b=False, **cfg):
    intrin = kd.intrin.wgmma(cfg.get("n") or cfg.get("bn", 128), dtype=dtype,
                             layout_b="col_major" if trans_b else "row_major")
    s = Schedule(mm16_graph(dtype=dtype, trans_b=trans_b))
    wgmma_schedule(intrin=intrin, **cfg)(s)
    return generate(gpu_lower(s))


@pytest.mark.parametrize("nn,cols", [(64, 64), (128, 256), (256, 256)])
def test_accumulator_registers_follow_the_ptx_layout(nn, cols):
    mod = _module(bm=64, bn=cols, n=nn, stages=0)
    (name,) = [k for k in re.findall(r"void (kd_wgmma_\w+)\(", mod.source)]
    body = mod.source[mod.source.index(name):]
    ops = [int(x) for x in re.findall(r'"\+f"\(d\[(\d+)\]\)', body[:body.index("}\n")])]
    assert len(ops) == nn // 2
    # the fragment [2][cols/8][2] as codegen/wmma lays it out: (atom row, atom col, h) -> (row, col)
    elems = {}
    for (ar, ac, h), r, c, _ in lane_elements(n.Scope.WMMA_ACCUMULATOR, 16, cols):
        elems[(ar * (cols // 8) + ac) * 2 + h] = (r, c)       # flat offset from &frag[0][0][0]
    for warp in range(4):
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for i, off in enumerate(ops):
                r, c = elems[off]
                got = (16 * warp + eval(r, {"kd_wg": g}), eval(c, {"kd_wt": t}))
                assert got == ptx_d(warp, lane, i), (warp, lane, i)


@pytest.mark.parametrize("cfg", [
    dict(bm=128, bn=256, stages=3), dict(bm=64, bn=128, n=64, stages=2),
    dict(bm=64, bn=64, stages=0), dict(bm=64, bn=64, stages=2, dtype=dt.bfloat16),
    dict(bm=64, bn=128, stages=2, trans_b=True)], ids=["256s3", "n64s2", "unpiped", "bf16", "kmajor_b"])
def test_ptx_has_the_warpgroup_product(cfg):
    mod = _module(**cfg)
    src = mod.source
    assert mod.sm90a and "#define KD_NEEDS_SM90A 1" in src
    assert "kd_swz<" in src and "kd_dyn_smem_raw" in src     # swizzled tiles, 1024-aligned block
    main = src[src.index("__global__"):]
    assert main.count("__syncthreads();") == main.count("kd_fence_proxy_async();\n") > 0
    ptx = compile_ptx(src, name="wg.cu")
    ty = "bf16" if cfg.get("dtype") is dt.bfloat16 else "f16"
    nn = cfg.get("n") or cfg["bn"]
    shapes = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.(\w+)\.(\w+)", ptx))
    assert shapes == {(f"m64n{nn}k16", ty, ty)}
    trans = set(re.findall(r"wgmma\.mma_async[^;]*, 1, 1, 1, 0, (\d);", ptx))
    assert trans == {"0" if cfg.get("trans_b") else "1"}
    for op in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
               "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta"):
        assert op in ptx
    assert ".local" not in ptx
    assert compile_cubin(src, name="wg.cu")[:4] == b"\x7fELF"


def test_unrolled_k_steps_are_one_asynchronous_run():
    """The unrolled 16-deep k steps of one BK step: one wgmma.fence before, one commit and one
    wait after (not one per product)."""
    src = _module(bm=64, bn=64, stages=2).source
    main = src[src.index("__global__"):]
    run = main[main.index("#pragma unroll"):]
    run = run[:run.index("kd_wg_commit_wait();")]
    assert run.count("kd_wgmma_m64n64k16_") == 1 and "kd_wg_fence()" not in run


def test_target_arch():
    src = _module(bm=64, bn=64, stages=0).source
    assert target_arch(src, "sm_90") == "sm_90a" and target_arch("plain", "sm_80") == "sm_80"
    with pytest.raises(BackendCompileError, match="Hopper's tensor cores .* which the sm_80 GPU"):
        target_arch(src, "sm_80")
