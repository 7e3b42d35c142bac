"""Causal attention on the cpu backend's blocked schedule (kdsl_cpu/schedules/attention.py)
against numpy in float64: a block's scores and weights end at its last row's keys (the key
panels past the block's diagonal are never computed), P V runs a block's rows over those
keys on the full register tile (the weights past a row's own keys are zeros), a mask whose
key bound does not grow with the row keeps one row per tile."""
import re

import numpy as np

import kdsl as kd
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.bounds import bound
from kdsl_cpu.schedules import attention as cpu_attention

BQ = cpu_attention.BQ


def ref(q, k, v, keep):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = np.arange(s.shape[-2])[:, None]
    j = np.arange(s.shape[-1])[None, :]
    s = np.where(keep(i, j), s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def causal(q, k, v, shift):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = kd.arange(q.shape[-2])[:, None]
    j = kd.arange(k.shape[-2])[None, :]
    s = kd.where(i >= j + shift, s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def anticausal(q, k, v):
    # keys j <= N - 1 - i: the bound shrinks as the row grows (no shared block range)
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = kd.arange(q.shape[-2])[:, None]
    j = kd.arange(k.shape[-2])[None, :]
    s = kd.where(q.shape[-2] - 1 - i >= j, s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def _rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _close(got, want, tol):
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def test_causal_shapes_and_shifts():
    """Sizes around the block and the key panels, N_q != N_k both ways, shifts that move the
    diagonal past a block's end (negative) and rows with no key (NaN, as numpy)."""
    rng = np.random.default_rng()
    # (no size 1: it compiles a kernel of its own; test_online_softmax.py has them)
    cases = [(3 * BQ + 5, 3 * BQ + 5, 0), (BQ + 3, 3 * BQ, -BQ - 7), (2 * BQ + 1, 70, 0),
             (70, 2 * BQ + 9, -1), (2, 5, 0), (BQ, BQ, 3), (5, 2, -2)]
    for N, M, shift in cases:
        q, k, v = _rand(rng, 1, 2, N, 17), _rand(rng, 1, 2, M, 17), _rand(rng, 1, 2, M, 17)
        got = causal(q, k, v, shift, backend="cpu")
        want = ref(q, k, v, lambda i, j: i >= j + shift)
        nan = np.isnan(want)
        assert (np.isnan(got) == nan).all(), (N, M, shift)
        _close(np.where(nan, 0, got), np.where(nan, 0, want), 2e-5)


def test_causal_float64():
    rng = np.random.default_rng()
    N, M, D = 2 * BQ + 3, 2 * BQ + 3, 9
    q, k, v = (_rand(rng, 2, 1, x, D, dtype=np.float64) for x in (N, M, M))
    _close(causal(q, k, v, 0, backend="cpu"), ref(q, k, v, lambda i, j: i >= j), 1e-10)


def test_decreasing_bound_keeps_rows_apart():
    rng = np.random.default_rng()
    for N, M in [(BQ + 5, BQ + 5), (2 * BQ + 1, 40)]:
        q, k, v = _rand(rng, 1, 2, N, 8), _rand(rng, 1, 2, M, 8), _rand(rng, 1, 2, M, 8)
        got = anticausal(q, k, v, backend="cpu")
        want = ref(q, k, v, lambda i, j: N - 1 - i >= j)
        nan = np.isnan(want)
        assert (np.isnan(got) == nan).all()
        _close(np.where(nan, 0, got), np.where(nan, 0, want), 2e-5)


def test_causal_loops_end_at_the_block():
    """The scores' key panels, the weights' keys and P V's keys end where the work item's
    block of rows does (the block loop's variable in their bounds), and P V's tile keeps
    several rows (its key loop outside the rows, no per-row bound)."""
    q = np.zeros((1, 2, 300, 64), np.float32)
    text = str(causal.lower(q, q, q, 0, backend="cpu"))
    blk = re.search(r"for (\S+\.fused) in range\(.*# parallel", text)
    assert blk, text
    blk = blk.group(1)
    loops = [ln for ln in text.splitlines() if ln.lstrip().startswith("for ")]
    panels = [ln for ln in loops if ln.lstrip().startswith("for i3.outer in")]
    assert panels and all(blk in ln for ln in panels), panels
    keyed = [ln for ln in loops if re.match(r"\s*for r0_3 in", ln)]
    assert keyed and all(blk in ln for ln in keyed), keyed
    # the P V tile: rows unrolled inside the key loop
    assert re.search(r"for r0_3 in .*\n\s*for i2_\d+ in range\([2-9]\):  # unrolled", text), text


def test_fixed_mod_is_exact_in_bounds():
    """``kdsl.ir.bounds``: ``x % y`` of values fixed in the query (a fused loop outside the
    ranges asked about) is bounded by itself, not by ``[0, y - 1]``."""
    x, y, r = n.var("x"), n.var("y"), n.var("r")
    e = mk.add(mk.mul(mk.mod(x, y), mk.as_expr(64)), r)
    lo, hi = bound(e, {r: n.Range(mk.as_expr(0), mk.as_expr(64))}, {y: (1, None)})
    assert str(lo).replace(" ", "") == str(mk.mul(mk.mod(x, y), mk.as_expr(64))).replace(" ", "")
    assert "x" in str(hi) and "%" in str(hi), hi
