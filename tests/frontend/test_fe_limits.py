"""Tracing limits: kernels of thousands of chained ops trace, lower and compile on every
backend (no RecursionError, whatever the chain's length), and compile time grows linearly
with the number of outputs.

Expressions are kept shallow by spilling a lazy value into a stage every
``array.MAX_DEPTH`` chained ops; stage-graph walks are iterative; a chain of
stages lowers to a chain of Allocates that every walker steps through in a loop.
The tests run with a recursion limit well below Python's default, so a walk
that recurses once per op or per stage fails here long before it would for a
user.
"""
import sys
import time

import numpy as np
import pytest

import kdsl as kd
from kdsl.frontend import array as fe_array
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect

BACKENDS = ["numpy", "interp", "cpu"]
#: frames the tests leave to kdsl (pytest itself uses ~60-100)
LIMIT = 450


def _backend(name):
    if name not in kd.backends():
        pytest.skip(f"backend {name} is not installed")
    return name


@pytest.fixture
def low_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _depth(e) -> int:
    """The depth of an expression tree (iteratively)."""
    best, stack = 0, [(e, 1)]
    while stack:
        x, d = stack.pop()
        best = max(best, d)
        for f in ("a", "b", "cond", "t", "f"):
            c = getattr(x, f, None)
            if isinstance(c, n.Expr):
                stack.append((c, d + 1))
        for c in getattr(x, "indices", ()) + getattr(x, "sources", ()):
            stack.append((c, d + 1))
    return best


# ------------------------------------------------------------------ long chains
@pytest.mark.parametrize("backend", BACKENDS)
def test_elementwise_chain_of_3000_ops(backend, low_recursion_limit):
    _backend(backend)
    N = 1500    # 3,000 ops (a multiply and an add per step): ~7x the recursion limit

    @kd.kernel
    def chain(x):
        for _ in range(N):
            x = x * 0.999 + 0.001
        return x

    a = np.random.default_rng().random(37).astype(np.float32)
    got = chain(a, backend=backend)
    ref = a.astype(np.float64)
    for _ in range(N):
        ref = ref * 0.999 + 0.001
    np.testing.assert_allclose(got, ref, rtol=1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_thousands_of_chained_reductions(backend, low_recursion_limit):
    _backend(backend)
    # cpu: the default schedule computes every reduction inside one row loop, a loop body
    # LLVM's loop passes take superlinear time on (150 reductions: ~5 s of LLVM)
    N = 150 if backend == "cpu" else 600

    @kd.kernel
    def chain(x):
        s = x.max(axis=1, keepdims=True)
        for _ in range(N):
            s = (s * 0.5 + x).max(axis=1, keepdims=True)
        return s

    a = np.random.default_rng().random((5, 7)).astype(np.float32)
    got = chain(a, backend=backend)
    ref = a.astype(np.float64).max(axis=1, keepdims=True)
    for _ in range(N):
        ref = (ref * 0.5 + a).max(axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_style_chain_of_3000_ops(backend, low_recursion_limit):
    """A 0-d value built inside a kd.compute lambda spills into a stage over the lambda's
    axes (here i), read back at i."""
    _backend(backend)
    N = 1500

    @kd.kernel
    def chain(x):
        n, = x.shape

        def f(i):
            v = x[i]
            for _ in range(N):
                v = v * 0.5 + x[i]
            return v
        return kd.compute((n,), f)

    a = np.random.default_rng().random(29).astype(np.float32)
    got = chain(a, backend=backend)
    ref = a.astype(np.float64)
    for _ in range(N):
        ref = ref * 0.5 + a
    np.testing.assert_allclose(got, ref, rtol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "interp"])
def test_index_style_chain_through_reductions(backend, low_recursion_limit):
    """A chain inside a reduction's source depends on the reduce axis: the spilled stage
    ranges over (i, k); nested index-style reductions chain through hoisted stages."""
    N = 40      # v grows ~4 ops per step: it spills several times, inside and outside the sums

    @kd.kernel
    def chain(A):
        n, m = A.shape

        def f(i):
            v = A[i, 0]
            for _ in range(N):
                k = kd.reduce_axis(m)
                v = v * 0.5 + kd.sum(A[i, k] * 0.25 + v * 0.001, axis=k) * 0.01
            return v
        return kd.compute((n,), f)

    a = np.random.default_rng().random((4, 6)).astype(np.float32)
    got = chain(a, backend=backend)
    A = a.astype(np.float64)
    v = A[:, 0].copy()
    for _ in range(N):
        v = v * 0.5 + (A * 0.25 + v[:, None] * 0.001).sum(axis=1) * 0.01
    np.testing.assert_allclose(got, v, rtol=1e-4)


@pytest.mark.parametrize("backend", ["numpy", "interp"])
def test_chain_of_views(backend, low_recursion_limit):
    N = 1000

    @kd.kernel
    def chain(x):
        for _ in range(N):
            x = x.T[::-1]
        return x * 1.0

    a = np.random.default_rng().random((4, 6)).astype(np.float32)
    ref = a
    for _ in range(N):
        ref = ref.T[::-1]
    np.testing.assert_array_equal(chain(a, backend=backend), ref)


def test_spilled_stages_keep_expressions_shallow():
    N = 1000

    @kd.kernel
    def chain(x, s):
        for _ in range(N):
            x = abs(kd.maximum(x * 0.5, s) - 0.3)
        return x

    g = chain.lower(kd.TensorSpec((None,), kd.float32), 0.25, backend="numpy")
    stores = collect(g.body, lambda x: isinstance(x, n.Store))
    assert len(stores) > N // fe_array.MAX_DEPTH      # spilled into stages...
    assert max(_depth(s.value) for s in stores) <= 4 * fe_array.MAX_DEPTH   # ...of bounded depth
    a = np.random.default_rng().random(33).astype(np.float32)
    ref = a.astype(np.float64)
    for _ in range(N):
        ref = np.abs(np.maximum(ref * 0.5, 0.25) - 0.3)
    np.testing.assert_allclose(chain(a, 0.25, backend="interp"), ref, rtol=1e-5)


def test_spill_keeps_weak_scalars_weak():
    """A spilled value keeps its promotion class: index arithmetic on axes stays weak."""
    @kd.kernel
    def f(x):
        n, = x.shape

        def g(i):
            j = i
            for _ in range(3 * fe_array.MAX_DEPTH):
                j = j + 1
            return x[i] + (j - j)    # int8 + a weak int: int8
        return kd.compute((n,), g)

    a = np.arange(5, dtype=np.int8)
    got = f(a, backend="numpy")
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, a)


# ------------------------------------------------------------------ many outputs
def _outputs_kernel(k):
    src = "def many(x):\n    return " + ", ".join(f"x + {j}" for j in range(k)) + "\n"
    ns = {}
    exec(src, ns)
    return kd.kernel(ns["many"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_64_trivial_outputs_compile_in_linear_time(backend, monkeypatch):
    """4x the outputs cost at most ~8x the compile time (linear: 4x; a quadratic walk: 16x).
    A ratio in one process, not a wall-clock limit: the machine's load cancels out."""
    _backend(backend)
    monkeypatch.setenv("KDSL_CACHE", "0")
    a = np.random.default_rng().random(1000).astype(np.float32)
    secs = {}
    for k in (16, 64):
        f = _outputs_kernel(k)
        t = time.perf_counter()
        got = f(a, backend=backend)
        secs[k] = time.perf_counter() - t
        for j, r in enumerate(got):
            np.testing.assert_allclose(r, a + j, rtol=1e-6)
    assert secs[64] < 8 * secs[16] + 0.5, f"compile time on {backend}: {secs}"


def test_many_outputs_lower_to_one_loop_nest_on_cpu():
    """fuse_loops: sibling outputs over the same range share one parallel loop."""
    _backend("cpu")
    f = _outputs_kernel(16)
    func = f.lower(kd.TensorSpec((None,), kd.float32), backend="cpu")
    loops = collect(func.body, lambda x: isinstance(x, n.For) and x.kind is n.ForKind.PARALLEL)
    assert len(loops) == 1
    stores = collect(func.body, lambda x: isinstance(x, n.Store))
    assert len(stores) == 16
