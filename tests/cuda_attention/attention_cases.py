"""Attention kernels as a user writes them, and the float64 oracle (shared by the tests)."""
import numpy as np

import kdsl as kd


def attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def causal_attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = kd.arange(q.shape[-2])[:, None]
    j = kd.arange(k.shape[-2])[None, :]
    s = kd.where(i >= j, s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return p @ v / p.sum(axis=-1, keepdims=True)


def shifted_attention(q, k, v):
    """A mask with an offset: row i sees keys j <= i - 3 (rows 0..2 see none: NaN, as numpy)."""
    s = q @ kd.swapaxes(k, -1, -2) * 0.25
    i = kd.arange(q.shape[-2])[:, None]
    j = kd.arange(k.shape[-2])[None, :]
    s = kd.where(i >= j + 3, s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def attention_2d(q, k, v):
    s = q @ k.T * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def reference(q, k, v, causal=False, scale=None, shift=0):
    q, k, v = (np.asarray(x).astype(np.float64) for x in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        n, m = s.shape[-2:]
        s = np.where(np.arange(n)[:, None] >= np.arange(m)[None, :] + shift, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return p / p.sum(axis=-1, keepdims=True) @ v


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(np.float32)
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dtype)


TOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5}
