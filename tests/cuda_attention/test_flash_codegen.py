"""The flash kernel's text (kdsl_cuda/codegen/flash.py) through NVRTC, no GPU: the key loop does
FlashAttention-2's per-score work (one EX2 per score, the scale folded into the exponent, no
16-bit rounding of the scores) and loads each fragment of a tile once."""
import functools

import pytest

pytest.importorskip("kdsl_cuda")


@functools.lru_cache(maxsize=None)
def _ptx(**kw):
    from kdsl_cuda import build
    from kdsl_cuda.codegen import flash
    try:
        return build.compile_ptx(flash.source(flash.FlashConfig(64, 64, **kw)))
    except Exception as e:      # noqa: BLE001  (no NVRTC on this machine)
        from kdsl.errors import BackendUnavailable
        if isinstance(e, BackendUnavailable):
            pytest.skip(str(e))
        raise


def test_key_loop_per_score_work():
    ptx = _ptx(bm=128, bn=64, nw=4)
    scores = 128 * 64 // 128            # a thread's scores per key tile
    # one exp per score, a few per row (rescale, the final reference change): 2 rows x 2 m-tiles
    assert scores <= ptx.count("ex2.approx.ftz.f32") <= scores + 3 * 4
    assert "mul.rn.f16x2" not in ptx            # no 16-bit rounding of the scores
    # a tile's fragments once each: Q 2 m-tiles x 4 k-steps, K 4 key pairs x 4, V 4 x 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4") == 8 + 16 + 16
    # P to 16 bits two at a time: 2 m-tiles x 4 key pairs x 4 registers (+ the output's)
    assert ptx.count("cvt.rn.f16x2.f32") >= 32


def test_row_sums_on_the_tensor_cores():
    base, ms = _ptx(bm=128, bn=64, nw=4), _ptx(bm=128, bn=64, nw=4, mma_sum=True)
    mma = "mma.sync.aligned.m16n8k16"
    assert ms.count(mma) == base.count(mma) + 2 * 4     # a ones column per m-tile and key step
    assert ms.count("add.f32") < base.count("add.f32")
