"""Attention written as numpy, fused by kdsl into one streaming loop per query row.

    python3 examples/attention.py

kdsl's online-softmax rewrite (kdsl/frontend/online_softmax.py) turns the max -> exp -> sum
and the contraction with v into tuple reductions with a running maximum: the n x n scores
and probabilities are never stored (the lowered IR printed below allocates one row of
scores).  Prints the max error against numpy in float64 on the cpu backend.
"""
import numpy as np

import kdsl as kd


@kd.kernel
def attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def causal_attention(q, k, v):
    n, m = q.shape[-2], k.shape[-2]
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = kd.arange(n)[:, None]
    j = kd.arange(m)[None, :]
    s = kd.where(i >= j, s, -np.inf)       # a causal mask: key j after query i is hidden
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return p @ v / p.sum(axis=-1, keepdims=True)


def reference(q, k, v, causal=False):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True) @ v


def main():
    rng = np.random.default_rng(0)
    B, H, N, D = 2, 4, 300, 64
    q, k, v = (rng.standard_normal((B, H, N, D)).astype(np.float32) for _ in range(3))
    for name, fn, causal in (("attention", attention, False),
                             ("causal attention", causal_attention, True)):
        out = fn(q, k, v, backend="cpu")
        err = np.abs(out - reference(q, k, v, causal)).max()
        print(f"{name:17s} (B, H, N, D) = {q.shape}: max error vs numpy float64 {err:.2e}")
    text = str(attention.lower(q[0, 0], k[0, 0], v[0, 0], backend="cpu"))
    print("buffers of the fused kernel (no n x n):")
    for line in text.splitlines():
        if "allocate" in line:
            print("  ", line.strip())


if __name__ == "__main__":
    main()
