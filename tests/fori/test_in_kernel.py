"""kd.fori_loop run inside one kernel (kdsl.passes.fori_loop, ``CarryLoop``): the cpu and interp
backends run every step in one call; numpy and interp-cuda keep the host loop.  Against
plain Python loops in float64 on every backend."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.ir import nodes as n
from kdsl.runtime import fori_program as fp

BACKENDS = ["numpy", "interp", "cpu", "interp-cuda"]


@kd.kernel
def mixed(A, v, k, lo, hi):
    # three carries of different shapes and dtypes; a two-stage step (a temporary allocated
    # once for all steps); i read as a value and as an index; a captured strided argument
    def body(i, c):
        M, s, w = c
        t = kd.compute(M.shape, lambda r, q: M[r, q] * 0.5 + (A[r, q] * w[q]).astype(np.float32))
        M2 = kd.compute(M.shape, lambda r, q: t[r, q] + t[r, (q + 1) % M.shape[1]] * 0.25)
        return M2, s + (i % 3) * k, w * 2 - (v[i % v.shape[0]] > 0.5)
    return kd.fori_loop(lo, hi, body, (A.astype(np.float32), k * 0, kd.ones(A.shape[1], np.int32)))


def mixed_ref(A, v, k, lo, hi):
    M, s, w = A.astype(np.float32), np.int64(0), np.ones(A.shape[1], np.int32)
    for i in range(lo, hi):
        t = M * np.float32(0.5) + (A * w).astype(np.float32)
        M = (t + np.roll(t, -1, axis=1) * np.float32(0.25)).astype(np.float32)
        s = s + (i % 3) * k
        w = (w * 2 - (v[i % v.shape[0]] > 0.5)).astype(np.int32)
    return M, s, w


@pytest.mark.parametrize("backend", BACKENDS)
def test_carries_of_different_shapes_and_dtypes(backend, rng):
    A = rng.random((5, 8))[:, ::2]          # a strided argument, read inside every step
    v = rng.random(4)
    steps = [(0, 0), (2, 3), (1, 6), (3, 1)] if backend != "interp-cuda" else [(0, 2), (1, 1)]
    for lo, hi in steps:                    # 0, 1, many (odd and even) and negative counts
        got = mixed(A, v, 7, lo, hi, backend=backend)
        want = mixed_ref(A, v, 7, lo, hi)
        assert [g.dtype for g in got] == [w.dtype for w in want]
        np.testing.assert_allclose(got[0], want[0], rtol=2e-6)
        assert got[1] == want[1]
        np.testing.assert_array_equal(got[2], want[2])
    text = str(mixed.lower(A, v, 7, 0, 1, backend=backend))
    assert ("inside one kernel" in text) == (backend in ("interp", "cpu"))


@kd.kernel
def jacobi(A, steps):
    n_ = A.shape[0]

    def step(t, X):
        return kd.compute((n_,), lambda i: kd.where(
            (i >= 1) & (i < n_ - 1), (X[i - 1] + X[i] + X[i + 1]) / 3.0, X[i]))
    return kd.fori_loop(0, steps, step, A)


def jacobi_ref(A, steps):
    X = A.copy()
    for _ in range(steps):
        Y = X.copy()
        Y[1:-1] = (X[:-2] + X[1:-1] + X[2:]) / 3.0
        X = Y
    return X


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_one_kernel_runs_every_step(backend, rng, monkeypatch):
    # the loop is one launch whatever the count (the body's launcher is never called per step)
    calls = []
    real = fp.Program._kernel_loop

    def counting(self, step, *a):
        calls.append(step)
        return real(self, step, *a)
    monkeypatch.setattr(fp.Program, "_kernel_loop", counting)
    for steps in (0, 1, 2, 7):
        A = rng.random(9)
        np.testing.assert_allclose(jacobi(A, steps, backend=backend), jacobi_ref(A, steps),
                                   rtol=1e-13)
    assert len(calls) == 4


def test_out_arrays_contiguous_or_strided_and_large_parallel_steps(rng):
    # cpu: the last step writes a contiguous out= in place, a strided one is copied; a step
    # with enough work runs its parallel loops on the thread pool inside the loop kernel
    A = rng.random(70001)
    want = jacobi_ref(A, 5)
    out = np.empty_like(A)
    assert jacobi(A, 5, backend="cpu", out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-13)
    buf = np.zeros(2 * A.size)
    jacobi(A, 4, backend="cpu", out=buf[::2])
    np.testing.assert_allclose(buf[::2], jacobi_ref(A, 4), rtol=1e-13)
    assert not buf[1::2].any()


def test_index_checks_that_use_i_run_for_every_step(rng):
    @kd.kernel
    def k(x, lo, hi):
        return kd.fori_loop(lo, hi, lambda i, c: c + x[i], np.float64(0.0))
    x = rng.random(4)
    assert k(x, 1, 4, backend="cpu") == pytest.approx(x[1:].sum(), rel=1e-13)
    assert k(x, 9, 2, backend="cpu") == 0.0            # no step: nothing read
    for lo, hi in ((0, 5), (-1, 2)):
        with pytest.raises(kd.KernelIndexError):
            k(x, lo, hi, backend="cpu")


def test_data_checks_once_before_the_loop_or_the_host_loop(rng):
    # an index read from an argument: checked once, the loop stays one kernel; an index read
    # from a carry: checked before every step, so the host loop runs it
    @kd.kernel
    def pick(x, idx, n_):
        return kd.fori_loop(0, n_, lambda t, c: c + x[idx[0]], x * 0)

    @kd.kernel
    def chase(x, n_):
        return kd.fori_loop(0, n_, lambda t, c: kd.compute(
            c.shape, lambda j: c[j] + x[c[j].astype(np.int64) % 3]), x)
    x = rng.random(3)
    assert "inside one kernel" in str(pick.lower(x, np.array([1]), 2, backend="cpu"))
    np.testing.assert_allclose(pick(x, np.array([2]), 3, backend="cpu"), 3 * x[2], rtol=1e-13)
    with pytest.raises(kd.KernelIndexError):
        pick(x, np.array([3]), 3, backend="cpu")
    assert "host loop" in str(chase.lower(x, 2, backend="cpu"))
    g = np.array([0.0, 1.0, 2.5])
    np.testing.assert_allclose(chase(g, 2, backend="cpu"), chase(g, 2, backend="numpy"),
                               rtol=1e-13)


def test_domain_checks_that_use_i_cover_every_step_at_once(rng):
    # durbin's pattern: an index under kd.where checked on the domain; with i in it, the loop
    # kernel checks the indices of every step at once, before the first (numpy: step by step)
    @kd.kernel
    def k(x, n_):
        return kd.fori_loop(0, n_, lambda i, c: kd.compute(c.shape, lambda j: kd.where(
            j < i, c[j] + x[kd.maximum(i - j + 1, 0)], c[j])), x)
    x = rng.random(4)
    assert "inside one kernel" in str(k.lower(x, 3, backend="cpu"))
    np.testing.assert_allclose(k(x, 3, backend="cpu"), k(x, 3, backend="numpy"), rtol=1e-13)
    with pytest.raises(kd.KernelIndexError, match=r"indices 2\.\.6 along axis 0"):
        k(x, 6, backend="cpu")          # steps 3..5 read past the end: all of them reported


@kd.kernel
def three(x, y, z, n_):
    # y's update reads x's old value after x's own update: x keeps two buffers; y reads
    # itself only where it writes: in place; z's update reads its neighbours: two buffers
    def body(i, c):
        a, b, d = c
        a2 = a * 0.5 + 1.0
        b2 = b * 0.25 + a
        d2 = kd.compute(d.shape, lambda j: d[(j + 1) % d.shape[0]] + d[j] * 0.5)
        return a2, b2, d2
    return kd.fori_loop(0, n_, body, (x, y, z))


def three_ref(x, y, z, n_):
    a, b, d = x.copy(), y.copy(), z.copy()
    for _ in range(n_):
        a, b, d = a * 0.5 + 1.0, b * 0.25 + a, np.roll(d, -1) + d * 0.5
    return a, b, d


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_carries_updated_in_place_only_where_provably_safe(backend, rng):
    x, y, z = rng.random(37), rng.random(37), rng.random(5)
    text = str(three.lower(x, y, z, 2, backend=backend))
    assert text.count(", in place;") == 1 and text.count(", ping-pong;") == 2
    for steps in (0, 1, 4, 5):
        for g, w in zip(three(x, y, z, steps, backend=backend), three_ref(x, y, z, steps)):
            np.testing.assert_allclose(g, w, rtol=1e-13)


def test_checks_under_a_condition_on_the_carry_fall_back_per_call(monkeypatch):
    # floyd-warshall's pattern: an index under a kd.where reading the carry is checked on the
    # whole domain first; where that fails, this call runs the host loop (exact, per step)
    @kd.kernel
    def guarded(x, n_):
        return kd.fori_loop(0, n_, lambda i, c: kd.compute(c.shape, lambda j: kd.where(
            c[j] > 0.5, c[j] * 0.5 + x[j + i], c[j])), x)
    host = []
    real = fp.Program._loop
    monkeypatch.setattr(fp.Program, "_loop", lambda self, *a: host.append(1) or real(self, *a))
    x = np.array([0.9, 0.8, 0.1, 0.1])
    assert "inside one kernel" in str(guarded.lower(x, 2, backend="cpu"))
    for steps, fallback in ((1, 0), (2, 1)):      # j + i reaches 4 only at step 1
        want = guarded(x, steps, backend="numpy")  # (numpy: always the host loop)
        host.clear()
        np.testing.assert_allclose(guarded(x, steps, backend="cpu"), want, rtol=1e-13)
        assert len(host) == fallback
    with pytest.raises(kd.KernelIndexError, match=r"indices 1\.\.4"):
        guarded(np.array([0.9, 0.8, 0.1, 0.9]), 2, backend="cpu")   # x[4] read: the exact error


def test_the_pass_on_a_hand_made_body(rng):
    # carries become loop-bound buffers, i the loop's variable; the interpreter runs it
    from kdsl import dtypes as dt
    from kdsl.backends.interpreter import run_lowered
    from kdsl.ir.visitor import collect
    from kdsl.passes.fori_loop import LoopSpec, fori_loop
    i, lo, hi, size, j = (n.Var(dt.int64, nm) for nm in ("i", "lo", "hi", "n", "j"))
    cin = n.Buffer("c", dt.float64, (size,), param=True)
    cout = n.Buffer("c2", dt.float64, (size,), param=True)
    body = n.For(j, n.const(0, dt.int64), size, n.ForKind.SERIAL, n.Store(
        cout, (j,), n.Binary(dt.float64, n.BinOp.ADD, n.Load(dt.float64, cin, (j,)),
                             n.Cast(dt.float64, i))))
    func = n.LoweredFunc("f", (cin,), (cout,), (size, i, lo, hi), body, bindings=(
        n.Binding(n.BindingKind.SHAPE, 0, 0), n.Binding(n.BindingKind.SCALAR, 0),
        n.Binding(n.BindingKind.SCALAR, 1), n.Binding(n.BindingKind.SCALAR, 2)))
    out = fori_loop(func, LoopSpec(1, 0, 1, 2))
    loop, = collect(out.body, lambda s: isinstance(s, n.CarryLoop))
    assert out.scalars == (size, lo, hi) and loop.var is i
    assert loop.inits == (cin,) and loop.results == (cout,)
    assert not loop.cur[0].param and not loop.nxt[0].param
    c0, res = rng.random(3), np.empty(3)
    run_lowered(out, [c0], [res], [0, 2, 5])       # graph scalars: i (unused now), lo, hi
    np.testing.assert_allclose(res, c0 + 2 + 3 + 4, rtol=1e-13)
    run_lowered(out, [c0], [res], [0, 5, 5])       # no step: the initial carry
    np.testing.assert_array_equal(res, c0)
