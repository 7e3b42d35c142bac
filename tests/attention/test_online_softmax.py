"""The online-softmax fusion (kdsl/frontend/online_softmax.py) against numpy in float64."""
import math

import numpy as np
import pytest

import kdsl as kd
online_softmax = kd.online_softmax
from kdsl.frontend.online_softmax import FUSED
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace

BACKENDS = ["numpy", "interp", "cpu"]
NEG = -np.inf


def ref_attention(q, k, v, bias=None, scale=None, causal=False):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if bias is not None:
        s = s + bias
    if causal:
        i = np.arange(s.shape[-2])[:, None]
        j = np.arange(s.shape[-1])[None, :]
        s = np.where(i >= j, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def attention(q, k, v):
    s = q @ k.T * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def attention_pv_first(q, k, v, scale):
    s = q @ k.T * scale
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return p @ v / p.sum(axis=-1, keepdims=True)


def _rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _close(got, want, tol):
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def _stages(fn, *shapes, dtype=kd.float32):
    g = trace(fn, [TensorSpec((None,) * len(s), dtype) for s in shapes])
    return g


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n,m,d", [(1, 1, 1), (5, 7, 3), (37, 16, 8), (3, 70, 5)])
def test_attention(backend, n, m, d):
    rng = np.random.default_rng()
    q, k, v = _rand(rng, n, d), _rand(rng, m, d), _rand(rng, m, d + 1)
    _close(attention(q, k, v, backend=backend), ref_attention(q, k, v), 2e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pv_over_sum_with_scalar_scale_and_views(backend):
    rng = np.random.default_rng()
    q = _rand(rng, 12, 6)[::2]              # strided rows
    k = _rand(rng, 6, 9).T                  # a transposed view
    v = _rand(rng, 9, 4)
    scale = 1.0 / math.sqrt(6)
    got = attention_pv_first(q, k, v, scale, backend=backend)
    _close(got, ref_attention(q, k, v, scale=scale), 2e-5)


def test_rewrite_applies_and_drops_the_max():
    g = _stages(attention.fn, (4, 3), (5, 3), (5, 2))
    kinds = [s.body.combiner.kind for s in g.stages if s.is_reduction]
    from kdsl.ir import nodes as n
    assert n.CombinerKind.MAX not in kinds                  # the max pass is gone
    online = [s for s in g.stages if s.origin is FUSED and s.is_reduction]
    assert len(online) == 2                                  # p.sum() and p @ v stream
    assert all(s.body.combiner is online[0].body.combiner for s in online)


def test_no_n_by_n_buffer_in_lowered_ir():
    rng = np.random.default_rng()
    q, k, v = _rand(rng, 6, 4), _rand(rng, 7, 4), _rand(rng, 7, 4)
    for backend in ("interp", "cpu"):
        text = str(attention.lower(q, k, v, backend=backend))
        allocs = [ln for ln in text.splitlines() if "allocate" in ln]
        assert allocs
        assert not [ln for ln in allocs if "q_0" in ln and "k_0" in ln], text

    @kd.kernel
    def unfused(q, k, v):     # a sum over the rows' max of another axis: not the identity
        s = q @ k.T
        p = kd.exp(s - s.max(axis=0, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v
    text = str(unfused.lower(q, k, v, backend="interp"))
    assert [ln for ln in text.splitlines() if "allocate" in ln and "q_0" in ln and "k_0" in ln]
    s = q @ k.T
    s = s.astype(np.float64)
    p = np.exp(s - s.max(axis=0, keepdims=True))
    _close(unfused(q, k, v, backend="cpu"), (p / p.sum(-1, keepdims=True)) @ v, 2e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_heads_gqa_bias(backend):
    """(B, H, N, D) with grouped-query attention: K/V have H/G heads, broadcast."""
    rng = np.random.default_rng()
    B, Hkv, G, N, M, D = 2, 2, 2, 5, 7, 3
    q = _rand(rng, B, Hkv, G, N, D)
    k = _rand(rng, B, Hkv, 1, M, D)
    v = _rand(rng, B, Hkv, 1, M, D)
    bias = _rand(rng, N, M)

    @kd.kernel(specialize=True)      # static shapes: math.sqrt(d) of an int
    def gqa(q, k, v, bias):
        s = q @ kd.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + bias
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v
    _close(gqa(q, k, v, bias, backend=backend), ref_attention(q, k, v, bias=bias), 2e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_causal_index_style_and_fully_masked_rows(backend):
    rng = np.random.default_rng()
    n_, m_, d = 6, 4, 3
    q, k, v = _rand(rng, n_, d), _rand(rng, m_, d), _rand(rng, m_, d)

    @kd.kernel
    def causal(q, k, v, shift):
        s0 = q @ k.T * q.shape[-1] ** -0.5
        s = kd.compute(s0.shape, lambda i, j: kd.where(i >= j + shift, s0[i, j], -np.inf))
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v
    _close(causal(q, k, v, 0, backend=backend), ref_attention(q, k, v, causal=True), 2e-5)
    # rows 0 and 1 see no key: numpy gives NaN (exp(-inf - -inf)); so does the fusion
    got = causal(q, k, v, 2, backend=backend)
    s = (q.astype(np.float64) @ k.T.astype(np.float64)) * d ** -0.5
    s = np.where(np.arange(n_)[:, None] >= np.arange(m_)[None, :] + 2, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        want = (p / p.sum(-1, keepdims=True)) @ v
    assert np.isnan(want[:2]).all() and np.isnan(got[:2]).all()
    _close(got[2:], want[2:], 2e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_logsumexp_output(backend):
    rng = np.random.default_rng()
    q, k, v = _rand(rng, 5, 3), _rand(rng, 9, 3), _rand(rng, 9, 2)

    @kd.kernel
    def attn_lse(q, k, v):
        s = q @ k.T
        m = s.max(axis=-1, keepdims=True)
        p = kd.exp(s - m)
        l = p.sum(axis=-1, keepdims=True)
        return (p / l) @ v, (m + kd.log(l))[:, 0]
    out, lse = attn_lse(q, k, v, backend=backend)
    s = q.astype(np.float64) @ k.T
    want = np.log(np.exp(s).sum(-1))
    _close(lse, want, 2e-5)
    _close(out, ref_attention(q, k, v, scale=1.0), 2e-5)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_16_bit_inputs_float32_state(backend, dtype):
    rng = np.random.default_rng()
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        dtype = ml_dtypes.bfloat16
    q, k, v = (_rand(rng, 9, 8).astype(dtype) for _ in range(3))
    got = attention(q, k, v, backend=backend)
    assert got.dtype == q.dtype
    tol = 1e-2 if dtype == np.float16 else 4e-2
    _close(got, ref_attention(q, k, v), tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_written_online_form(backend):
    """The online form with the tuple reducer by hand: the same combiner as the rewrite's."""
    rng = np.random.default_rng()
    q, k, v = _rand(rng, 6, 3), _rand(rng, 8, 3), _rand(rng, 8, 2)

    @kd.kernel
    def by_hand(q, k, v):
        s = q @ k.T
        m, acc = online_softmax((s[:, :, None], v[None, :, :]), axis=1)
        _, l = online_softmax((s, kd.ones_like(s)), axis=-1)
        return acc / l[:, None]
    _close(by_hand(q, k, v, backend=backend), ref_attention(q, k, v, scale=1.0), 2e-5)
    g = _stages(by_hand.fn, (6, 3), (8, 3), (8, 2))
    fused = _stages(attention.fn, (6, 3), (8, 3), (8, 2))
    hand = [s.body.combiner for s in g.stages if s.is_reduction and s.body.combiner.kind is None]
    auto = [s.body.combiner for s in fused.stages if s.origin is FUSED
            and s.is_reduction]
    assert hand and auto and all(c is auto[0] for c in hand)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_queries_and_keys(backend):
    """Zero keys: the max over an empty axis is refused as numpy refuses it, although the
    fusion dropped the max stage; zero queries: an empty result."""
    rng = np.random.default_rng()
    q, k, v = _rand(rng, 3, 4), _rand(rng, 0, 4), _rand(rng, 0, 2)
    with pytest.raises(kd.ShapeError, match="empty"):
        attention(q, k, v, backend=backend)
    got = attention(_rand(rng, 0, 4), _rand(rng, 5, 4), _rand(rng, 5, 2), backend=backend)
    assert got.shape == (0, 2)


def test_batched_rows_stream_in_one_parallel_loop():
    """(B, H, N, D) on cpu: batch, heads and blocks of query rows fused into one parallel
    loop, a block of rows of scores as workspace (the default alone would attach at the
    batch loop: H x N x N); kdsl_cpu/schedules/attention.py (tests/attention/test_cpu_blocked.py)."""
    q = np.zeros((2, 3, 5, 4), np.float32)
    text = str(attention_4d.lower(q, q, q, backend="cpu"))
    from kdsl_cpu.schedules import attention as cpu_attention
    bq = cpu_attention.BQ
    loops = [ln for ln in text.splitlines() if "for " in ln and "parallel" in ln]
    assert any("i2.outer.fused" in ln for ln in loops), text
    allocs = [ln for ln in text.splitlines() if "allocate" in ln and "k_2]" in ln]
    assert allocs and all(f"[1, 1, {bq}, " in ln for ln in allocs), text
    # p @ v reads the weights exp(s - max), computed once per score
    weights = [ln for ln in text.splitlines() if "= exp(" in ln]
    assert weights and "sum_online.max" in weights[0], text


@kd.kernel
def attention_4d(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return p @ v / p.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_p_v_over_sum(backend):
    rng = np.random.default_rng()
    q, k, v = _rand(rng, 2, 2, 5, 3), _rand(rng, 2, 2, 7, 3), _rand(rng, 2, 2, 7, 4)
    _close(attention_4d(q, k, v, backend=backend), ref_attention(q, k, v), 2e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_read_before_the_sums(backend):
    """A stage reading the max, made before the sums, reads p.sum()'s running max (the
    online stages are placed with the sums; the rewrite re-sorts producers first)."""
    rng = np.random.default_rng()
    q, k, v = _rand(rng, 4, 3), _rand(rng, 6, 3), _rand(rng, 6, 2)

    @kd.kernel
    def early(q, k, v):
        s = q @ k.T
        m = s.max(axis=-1, keepdims=True)
        twice = m * 2.0
        p = kd.exp(s - m)
        return p @ v / p.sum(axis=-1, keepdims=True), twice
    out, twice = early(q, k, v, backend=backend)
    s = q.astype(np.float64) @ k.T
    _close(twice, 2 * s.max(-1, keepdims=True), 1e-6)
    _close(out, ref_attention(q, k, v, scale=1.0), 2e-5)


@kd.kernel
def causal_np(q, k, v):
    s = q @ k.T * q.shape[-1] ** -0.5
    s = kd.where(kd.arange(q.shape[0])[:, None] >= kd.arange(k.shape[0])[None, :], s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def test_causal_keys_past_the_row_are_not_visited():
    """where(i >= j, s, -inf): the online loops over keys stop at key i (masked keys add
    nothing), on every backend, the GPU form (interp-cuda: the SIMT interpreter) included."""
    rng = np.random.default_rng()
    q, k, v = _rand(rng, 6, 4), _rand(rng, 9, 4), _rand(rng, 9, 3)
    text = str(causal_np.lower(q, k, v, backend="interp"))
    loops = [ln for ln in text.splitlines() if "for r0_" in ln]
    assert loops and all("i0 + 1" in ln for ln in loops), text
    backends = BACKENDS + (["interp-cuda"] if "interp-cuda" in kd.backends() else [])
    for b in backends:
        _close(causal_np(q, k, v, backend=b), ref_attention(q, k, v, causal=True), 2e-5)


def test_fused_origin_is_one_object():
    """Schedules find the fused stages by ``st.origin is FUSED``: the marker survives the
    trace cache's pickling and copies (one object), and still prints as its name."""
    import copy
    import pickle

    from kdsl.frontend.online_softmax import FusedOrigin

    assert pickle.loads(pickle.dumps(FUSED)) is FUSED
    assert copy.deepcopy(FUSED) is FUSED and copy.copy(FUSED) is FUSED
    assert FusedOrigin() is FUSED and FUSED == "online_softmax" and str(FUSED) == "online_softmax"

    def att(q, k, v):
        s = q @ k.T
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return p @ v / p.sum(axis=-1, keepdims=True)

    g = trace(att, [TensorSpec((4, 3), "float32"), TensorSpec((5, 3), "float32"),
                    TensorSpec((5, 2), "float32")])
    fused = [s for s in pickle.loads(pickle.dumps(g)).stages if s.origin is FUSED]
    assert len(fused) == sum(s.origin is FUSED for s in g.stages) >= 2
