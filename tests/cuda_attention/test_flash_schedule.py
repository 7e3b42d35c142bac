"""The flash-attention default schedule (kdsl_cuda/schedules/attention.py) on the SIMT
interpreter (``interp-cuda``) against numpy in float64: sizes that do and do not fill the
128-row blocks and 64-key tiles, one row, head dims 16 and 64, float16 and bfloat16, causal
masks (offset ones too: fully masked rows give NaN as numpy does), strided views, 2-D and
3-D operands, one k/v head shared by every query head; when it is chosen and when not."""
import numpy as np
import pytest

import kdsl as kd

from attention_cases import (TOL, attention, attention_2d, causal_attention, rand, reference,
                      shifted_attention)

ATT, CAUSAL, SHIFT, ATT2 = (kd.kernel(f) for f in (attention, causal_attention,
                                                    shifted_attention, attention_2d))


def _check(got, want, tol):
    got = np.asarray(got).astype(np.float64)
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    if ok.any():
        assert np.abs(got[ok] - want[ok]).max() <= tol * max(1.0, np.abs(want[ok]).max())


def _flash(kernel, *args) -> bool:
    return "flash_attention(" in str(kernel.lower(*args, backend="interp-cuda"))


@pytest.mark.parametrize("nq,nk,d,dtype,causal", [
    (1, 50, 16, "float16", False), (17, 17, 16, "float16", True), (100, 100, 64, "float16", False),
    (100, 100, 16, "bfloat16", True), (130, 130, 16, "float16", False)])
def test_flash_matches_float64(nq, nk, d, dtype, causal):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(nq * 7 + d)
    q = rand(rng, (2, 2, nq, d), dtype)
    k, v = (rand(rng, (2, 2, nk, d), dtype) for _ in range(2))
    kern = CAUSAL if causal else ATT
    if d == 64:     # exact sizes: only the 64-wide function (NVRTC time of the suite's hook)
        kern = kd.kernel(causal_attention if causal else attention, specialize=True)
    assert _flash(kern, q, k, v)
    _check(kern(q, k, v, backend="interp-cuda"), reference(q, k, v, causal), TOL[dtype])


def test_keys_and_queries_differ_and_masked_rows_are_nan():
    """Nq != Nk, a mask with an offset (rows 0..2 see no key: NaN), D=16."""
    rng = np.random.default_rng(3)
    q = rand(rng, (1, 3, 70, 16), "float16")
    k, v = (rand(rng, (1, 3, 90, 16), "float16") for _ in range(2))
    assert _flash(SHIFT, q, k, v)
    want = reference(q, k, v, causal=True, scale=0.25, shift=3)
    assert np.isnan(want[..., :3, :]).all()
    _check(SHIFT(q, k, v, backend="interp-cuda"), want, TOL["float16"])


def test_strided_views_2d_and_shared_kv_head():
    rng = np.random.default_rng(5)
    base = rand(rng, (2, 40, 3, 16), "float16")
    q = base.transpose(0, 2, 1, 3)              # (2, 3, 40, 16), heads and rows swapped
    k, v = (rand(rng, (2, 1, 40, 16), "float16") for _ in range(2))     # one kv head
    assert _flash(ATT, q, k, v)
    _check(ATT(q, k, v, backend="interp-cuda"), reference(q, k, v), TOL["float16"])
    q2, k2, v2 = (rand(rng, (21, 16), "float16") for _ in range(3))
    assert _flash(ATT2, q2, k2, v2)
    _check(ATT2(q2, k2, v2, backend="interp-cuda"), reference(q2, k2, v2), TOL["float16"])


def test_head_dim_padded_within_its_size_class():
    """d=20 and dv=24 (class 16..31): the 32-wide function, q/k/v zero-padded."""
    rng = np.random.default_rng(9)
    q, k = (rand(rng, (1, 2, 30, 20), "float16") for _ in range(2))
    v = rand(rng, (1, 2, 30, 24), "float16")
    assert _flash(ATT, q, k, v)
    _check(ATT(q, k, v, backend="interp-cuda"), reference(q, k, v), TOL["float16"])


def test_not_chosen_for_float32_hints_or_wide_heads():
    rng = np.random.default_rng(1)
    q, k, v = (rand(rng, (1, 2, 17, 16), "float32") for _ in range(3))
    assert not _flash(ATT, q, k, v)          # no float32 tensor-core path: generic schedule
    h = kd.schedule("cuda", threads=64)(attention)
    q16 = q.astype(np.float16)
    assert not _flash(kd.kernel(h), q16, q16, q16)      # a user's hint: the generic schedule
    # head dims past 256: found, but no function is that wide (the generic schedule then)
    from kdsl.frontend.spec import TensorSpec
    from kdsl.frontend.trace import trace
    from kdsl.schedule import Schedule
    from kdsl_cuda.schedules import attention as fa
    for d, ok in ((300, False), (256, True), (64, True)):
        s = Schedule(trace(attention, [TensorSpec((1, 2, 8, d), kd.float16)] * 3))
        m = fa.find(s)
        assert m is not None and (fa.dims(s, m) is not None) == ok


def test_tensor_cores_switched_off(monkeypatch):
    spec = kd.TensorSpec((1, 2, None, 16), "float16")
    assert _flash(kd.kernel(attention), spec, spec, spec)
    monkeypatch.setenv("KDSL_CUDA_TENSOR_CORES", "0")
    assert not _flash(kd.kernel(attention), spec, spec, spec)


def test_query_rows_zero():
    rng = np.random.default_rng(2)
    q = rand(rng, (1, 2, 0, 16), "float16")
    k, v = (rand(rng, (1, 2, 5, 16), "float16") for _ in range(2))
    out = ATT(q, k, v, backend="interp-cuda")
    assert out.shape == (1, 2, 0, 16)


def test_float64_chain_schedules_without_a_float32_combiner():
    """Regression: the match compared the online combiner by building the float32 one, which
    traces (an error outside a trace) when no kernel had made it: a float64 chain (scale
    ``/ np.sqrt(d)`` promotes) crashed the default schedule.  It takes the generic one."""
    from kdsl import dtypes as dt
    from kdsl.frontend import online_softmax as osm

    def att(q, k, v):
        s = q @ kd.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return p @ v / p.sum(axis=-1, keepdims=True)

    cache = osm.reducer()._cache
    kept = cache.pop((dt.float32, dt.float32), None)    # as in a fresh process
    try:
        spec = kd.TensorSpec((1, 2, None, 16), "float16")
        assert not _flash(kd.kernel(att), spec, spec, spec)
    finally:    # the combiner object back: kernels traced before still match the flash schedule
        if kept is not None:
            cache[(dt.float32, dt.float32)] = kept


def test_growing_row_max_rescales_and_negative_scale():
    """Scores that grow along the keys by far more than 2^8 from one 16-key tile to the next
    (the kernel's lazy rescale must raise its reference and rescale O and the sums), and a
    negative scale (the largest product gives the smallest score), against float64."""
    rng = np.random.default_rng(11)
    q = (np.abs(rand(rng, (1, 2, 20, 16), "float32")) + 0.5).astype(np.float16)
    k = (np.abs(rand(rng, (1, 2, 70, 16), "float32")) * 0.1).astype(np.float32)
    k *= np.linspace(0.0, 80.0, 70, dtype=np.float32)[None, None, :, None]  # scores 0 .. ~40
    k = k.astype(np.float16)
    v = rand(rng, (1, 2, 70, 16), "float16")
    att = kd.kernel(attention)      # traced here (a test above drops the combiner's cache)
    assert _flash(att, q, k, v)
    _check(att(q, k, v, backend="interp-cuda"), reference(q, k, v), TOL["float16"])

    def neg(q, k, v):
        s = q @ kd.swapaxes(k, -1, -2) * -0.5
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    kn = kd.kernel(neg)
    assert _flash(kn, q, k, v)
    _check(kn(q, k, v, backend="interp-cuda"), reference(q, k, v, scale=-0.5), TOL["float16"])


def test_tiles_by_head_dim_and_ctas():
    """128-row blocks at d=64 where the grid is large; 64-row ones where batch x heads x
    blocks would be under one wave (FEW_CTAS), and by the sizes' lower bounds when not exact."""
    from kdsl_cuda.schedules.attention_op import FEW_CTAS, FEW_ROWS, TILES, tiles
    assert tiles(64, 4096, 32) == TILES[64]
    assert tiles(64, 1024, 8) == FEW_ROWS[64]           # 8 * 8 = 64 CTAs of 128 rows
    assert tiles(64, None, 8) == TILES[64] and tiles(64, 1024, None) == TILES[64]
    assert tiles(64, FEW_CTAS * 128, 1) == TILES[64]
    k = kd.kernel(attention, specialize=True)

    def rows_of(shape):
        spec = kd.TensorSpec(shape, "float16")
        txt = str(k.lower(spec, spec, spec, backend="interp-cuda"))
        return int(txt.split("FlashOp(rows=")[1].split(",")[0])

    assert rows_of((4, 8, 4096, 64)) == TILES[64][0]
    assert rows_of((1, 8, 1024, 64)) == FEW_ROWS[64][0]


def test_covering_function_runs_with_the_blocks_warps():
    """Regression: a 2-warp exact-size function (few CTAs) with a 4-warp covering one made a
    128-thread block whose upper warps ran the 2-warp function past its rows."""
    from kdsl.frontend.spec import TensorSpec
    from kdsl.frontend.trace import trace
    from kdsl.schedule import Schedule
    from kdsl_cuda.schedules import attention as fa
    from kdsl_cuda.schedules import attention_op as ao
    s = Schedule(trace(attention, [TensorSpec((1, 2, 8, 64), kd.float16)] * 3))
    m = fa.find(s)
    for tile in (ao.FEW_ROWS[64], ao.TILES[64], (64, 64, 4)):
        op = ao.FlashOp(m, (64, 128), tile, ())
        cfgs = [op._cfg(p) for p in op.dims]
        assert len({c.threads for c in cfgs}) == 1
        assert all(op.bm % c.bm == 0 for c in cfgs)
        for c in cfgs:
            c.check()
