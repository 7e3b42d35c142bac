"""A cheap fuzz slice of the schedule generator's space on the cpu backend (tests/fuzz's random
kernels never realise ``generator.tiled`` with a chosen candidate): random contractions (3x3 conv,
1x1 conv, matmul) of random sizes (0, 1, dividing and not dividing the tiles), a random
candidate of the search space for a random Target, run on cpu (edge tiles: masked vector code)
against numpy in float64.  The seed is fresh each run and printed on failure."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.schedule import Schedule, generator as G
from kdsl.schedule.target import Target



def conv3(X, W):
    n, c, h, w = X.shape
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, W.shape[0], h - 2, w - 2),
                      lambda b, o, y, x: kd.sum(X[b, rc, y + ry, x + rx] * W[o, rc, ry, rx],
                                                axis=(rc, ry, rx)), name="O")


def conv1(X, W):
    n, c, h, w = X.shape
    rc = kd.reduce_axis(c, name="rc")
    return kd.compute((n, W.shape[0], h, w),
                      lambda b, o, y, x: kd.sum(X[b, rc, y, x] * W[o, rc], axis=rc), name="O")


def ref_conv3(X, W):
    X, W = X.astype(np.float64), W.astype(np.float64)
    h, w = X.shape[2] - 2, X.shape[3] - 2
    return sum(np.einsum("bcyx,oc->boyx", X[:, :, ry:ry + h, rx:rx + w], W[:, :, ry, rx])
               for ry in range(3) for rx in range(3))


def _mm(A, B):
    return A @ B


def _case(rng):
    kind = rng.choice(["conv3", "conv1", "mm"])
    d = lambda lo, hi: int(rng.integers(lo, hi))       # noqa: E731
    if kind == "conv3":
        X = rng.standard_normal((d(1, 3), d(1, 9), d(2, 7), d(2, 40))).astype(np.float32)
        W = rng.standard_normal((d(1, 12), X.shape[1], 3, 3)).astype(np.float32)
        return conv3, (X, W), ref_conv3(X, W)
    if kind == "conv1":
        X = rng.standard_normal((d(1, 3), d(1, 20), d(0, 4), d(1, 40))).astype(np.float32)
        W = rng.standard_normal((d(1, 12), X.shape[1])).astype(np.float32)
        return conv1, (X, W), np.einsum("bcyx,oc->boyx", X.astype(np.float64), W.astype(np.float64))
    A = rng.standard_normal((d(0, 20), d(1, 300))).astype(np.float32)
    B = rng.standard_normal((A.shape[1], d(2, 90))).astype(np.float32)
    return _mm, (A, B), A.astype(np.float64) @ B.astype(np.float64)


@pytest.mark.parametrize("draw", range(3))
def test_random_generator_candidates_on_cpu(draw):
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    rng = np.random.default_rng(seed)
    fn, args, want = _case(rng)
    specs = [TensorSpec((None,) * a.ndim, kd.float32) for a in args]
    target = Target(cores=int(rng.integers(1, 5)), vector_bytes=int(rng.choice([16, 32, 64])),
                    vector_registers=int(rng.choice([16, 32])))
    cands = G.candidates(Schedule(trace(fn, specs)).stages[-1].stage, target)
    assert cands, f"seed {seed}: no candidate"
    pick, chosen = int(rng.integers(1 << 30)), []

    def tile(s):
        # the candidates of the stage as this call specialises it (one output channel makes a
        # 3x3 convolution a stencil: no tiled form, the default schedule stays; seed 126)
        here = G.candidates(s.stages[-1].stage, target)
        if here:
            chosen.append(here[pick % len(here)].params)
            G.tiled(s, s.stages[-1], chosen[0])
    k = kd.kernel(fn)
    k.schedule("cpu")(tile)
    got = k(*args, backend="cpu")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                               err_msg=f"seed {seed}, {fn.__name__}, {chosen}")


def test_tiled_on_a_specialisation_without_reuse_is_a_schedule_error():
    """One output channel: the 3x3 convolution is a stencil at this specialisation, so the
    tiled sketch does not apply -- a ScheduleError naming the stage, not an internal error
    (the fuzz above met it with seed 126)."""
    rng = np.random.default_rng(126)
    X = rng.standard_normal((1, 1, 6, 28)).astype(np.float32)
    W = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    specs = [TensorSpec((None,) * 4, kd.float32)] * 2
    p = G.candidates(Schedule(trace(conv3, specs)).stages[-1].stage, Target(cores=2))[0].params
    k = kd.kernel(conv3)
    k.schedule("cpu")(lambda s: G.tiled(s, s.stages[-1], p))
    with pytest.raises(kd.ScheduleError, match="stage O: the generator's tiled schedule"):
        k(X, W, backend="cpu")
    np.testing.assert_allclose(kd.kernel(conv3)(X, W, backend="cpu"), ref_conv3(X, W),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k,n", [(300, 70), (0, 5)])
def test_matrix_vector_takes_the_generator(k, n):
    """One row (static in the trace): the generator's unpacked tiles, not the packed recipe
    (gemm.SKINNY_ROWS: packing B triples a matrix-vector product's memory traffic)."""
    rng = np.random.default_rng(k + n)
    A = rng.standard_normal((1, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    f = kd.kernel(_mm)
    np.testing.assert_allclose(f(A, B, backend="cpu"), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    if n > 1:
        assert "B.local" not in str(f.lower(A, B, backend="cpu"))
        assert "B.local" in str(f.lower(np.ones((2, k), np.float32), B, backend="cpu"))
