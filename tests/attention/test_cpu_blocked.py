"""The cpu backend's blocked attention schedule (kdsl_cpu/schedules/attention.py) against
numpy in float64: shapes that do and do not divide its blocks (query blocks of ``BQ`` rows,
key panels of the SIMD width, register tiles), N = 1, N_q != N_k, D = 1 / 17 / 64, causal,
an additive mask, GQA broadcast, strided views, float32 and float64.

One kernel per variant, compiled once (shapes are symbolic): the sizes below run through the
same compiled code, so the file stays fast."""
import numpy as np
import pytest

import kdsl as kd

from kdsl_cpu.schedules import attention as cpu_attention

NEG = -np.inf


def ref(q, k, v, bias=None, causal=False, shift=0):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    if bias is not None:
        s = s + bias
    if causal:
        i = np.arange(s.shape[-2])[:, None]
        j = np.arange(s.shape[-1])[None, :]
        s = np.where(i >= j + shift, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def causal(q, k, v, shift):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = kd.arange(q.shape[-2])[:, None]
    j = kd.arange(k.shape[-2])[None, :]
    s = kd.where(i >= j + shift, s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return p @ v / p.sum(axis=-1, keepdims=True)


@kd.kernel
def biased(q, k, v, bias):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5 + bias
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def _rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _close(got, want, tol):
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def _blocked(fn, *args) -> bool:
    text = str(fn.lower(*args, backend="cpu"))
    return ".packed" in text and "i2.outer.fused" in text


BQ = cpu_attention.BQ
# (B, H, N, M, D): N, M around the query block and the key panels (64 f32 lanes x 4 on
# AVX-512, 32 on AVX2), D around the value tile
# (no size 1: a size of 1 compiles a kernel of its own; test_online_softmax.py has them)
SHAPES = [(1, 2, 5, 7, 17), (1, 2, BQ, 64, 64), (1, 2, BQ + 3, 67, 64),
          (1, 2, 2 * BQ - 1, 130, 17), (1, 2, 70, 37, 3), (1, 2, 3, 200, 65)]


def test_blocked_shapes_float32():
    rng = np.random.default_rng()
    for B, H, N, M, D in SHAPES:
        q, k, v = _rand(rng, B, H, N, D), _rand(rng, B, H, M, D), _rand(rng, B, H, M, D)
        _close(attention(q, k, v, backend="cpu"), ref(q, k, v), 2e-5)
    assert _blocked(attention, q, k, v)


def test_blocked_float64_and_value_width():
    """float64 (8 lanes a register) and a value width unlike the keys' (D_v != D)."""
    rng = np.random.default_rng()
    for B, H, N, M, D in SHAPES[1:4]:
        q, k = _rand(rng, B, H, N, D, dtype=np.float64), _rand(rng, B, H, M, D, dtype=np.float64)
        v = _rand(rng, B, H, M, D + 3, dtype=np.float64)
        _close(attention(q, k, v, backend="cpu"), ref(q, k, v), 1e-10)


def test_blocked_causal_and_fully_masked_rows():
    rng = np.random.default_rng()
    for B, H, N, M, D in [(1, 2, BQ + 5, BQ + 5, 64), (1, 2, 2 * BQ + 1, 70, 17), (1, 2, 9, 4, 3)]:
        q, k, v = _rand(rng, B, H, N, D), _rand(rng, B, H, M, D), _rand(rng, B, H, M, D)
        _close(causal(q, k, v, 0, backend="cpu"), ref(q, k, v, causal=True), 2e-5)
    # shift 2: rows 0 and 1 see no key (NaN, as numpy), the others a causal window
    got = causal(q, k, v, 2, backend="cpu")
    want = ref(q, k, v, causal=True, shift=2)
    assert np.isnan(want[..., :2, :]).all() and np.isnan(got[..., :2, :]).all()
    _close(got[..., 2:, :], want[..., 2:, :], 2e-5)
    assert _blocked(causal, q, k, v, 0)


def test_blocked_bias_gqa_and_strided_views():
    """An additive mask (bias, broadcast over batch and heads), grouped-query K/V broadcast
    over the query heads of a group, and strided / transposed views of the inputs."""
    rng = np.random.default_rng()
    B, Hkv, G, N, M, D = 2, 2, 3, BQ + 9, 75, 17
    q = _rand(rng, B, Hkv, G, 2 * N, D)[:, :, :, ::2]          # strided rows
    k = _rand(rng, B, Hkv, 1, D, M).swapaxes(-1, -2)            # a transposed view
    v = _rand(rng, B, Hkv, 1, M, D)
    bias = _rand(rng, N, M)
    bias[:, 5] = NEG                                            # a masked key
    got = biased(q, k, v, bias, backend="cpu")
    _close(got, ref(q, k, v, bias=bias), 2e-5)


def test_workspace_is_a_block_of_rows():
    """No N x N buffer: the scores and weights are BQ rows of keys per work item."""
    q = np.zeros((1, 2, 300, 16), np.float32)
    text = str(attention.lower(q, q, q, backend="cpu"))
    allocs = [ln for ln in text.splitlines() if "allocate" in ln and "k_2" in ln]
    assert allocs, text
    for ln in allocs:
        assert ".packed" in ln or f", {BQ}, " in ln, ln


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_pack_lanes_last(backend):
    """``Schedule.pack(t, axis, factor, lanes_last=True)``: panels of ``factor`` rows of
    ``t`` side by side (``P[p, .., d, x] = t[.., p*factor + x, d]``), the layout the scores'
    tile reads K in; rows past the end neither written nor read."""
    @kd.kernel
    def qkt(q, k):
        return q @ k.T

    @qkt.schedule(backend)
    def _(s):
        p = s.pack(s.graph.params[1], axis=0, factor=4, lanes_last=True)
        assert [a.dom.extent for a in p.stage.axes][-1].value == 4
    rng = np.random.default_rng()
    q, k = _rand(rng, 5, 3), _rand(rng, 7, 3)
    _close(qkt(q, k, backend=backend), q.astype(np.float64) @ k.T, 1e-5)
    text = str(qkt.lower(q, k, backend=backend))
    assert "k.packed[" in text and "% 4]" in text, text


def test_scale_folded_into_the_scores():
    """The scores' scale (``d ** -0.5``, or a scalar argument) is applied once where the
    scores' register tile is stored; the row max and the weights read scaled scores; the
    results stay numpy's."""
    @kd.kernel
    def scaled(q, k, v, a):
        s = q @ kd.swapaxes(k, -1, -2) * a
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    rng = np.random.default_rng()
    q, k, v = _rand(rng, 1, 2, BQ + 3, 16), _rand(rng, 1, 2, 70, 16), _rand(rng, 1, 2, 70, 16)
    got = scaled(q, k, v, np.float32(0.3), backend="cpu")
    _close(got, ref(q * np.float32(0.3 / 0.25), k, v), 2e-5)
    for fn, args in ((attention, (q, k, v)), (scaled, (q, k, v, np.float32(0.3)))):
        text = str(fn.lower(*args, backend="cpu"))
        stores = [ln for ln in text.splitlines() if ln.lstrip().startswith("matmul[")]
        assert stores and all("*" in ln.split("=", 1)[1] for ln in stores), stores
        # the max and the weights read the stored scores as they are
        reads = [ln for ln in text.splitlines() if "= max(" in ln or "exp(" in ln]
        assert reads and not any("**" in ln or "a)" in ln for ln in reads), reads
