"""The schedule generator (kdsl/schedule/generator.py, target.py) and the cpu defaults it decides:
every candidate of a small conv is legal and exact on the interpreter; the cpu default (the
generator's pick) gives numpy's float64 answer for conv2d, 1x1 conv, skinny and specialised
GEMMs on shapes that do and do not divide the tiles, size-1 and empty axes, strided views,
float32/float64/int32; the cost prefers full register tiles; the host Target is sane."""
import warnings

import numpy as np
import pytest

import kdsl as kd
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.schedule import Schedule, generator as G
from kdsl.schedule.target import GENERIC_CPU, Target


def conv3(X, W):
    n, c, h, w = X.shape
    k = W.shape[0]
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, k, h - 2, w - 2),
                      lambda b, o, y, x: kd.sum(X[b, rc, y + ry, x + rx] * W[o, rc, ry, rx],
                                                axis=(rc, ry, rx)), name="O")


def conv1(X, W):
    n, c, h, w = X.shape
    rc = kd.reduce_axis(c, name="rc")
    return kd.compute((n, W.shape[0], h, w),
                      lambda b, o, y, x: kd.sum(X[b, rc, y, x] * W[o, rc], axis=rc), name="O")


def ref_conv3(X, W):
    X, W = X.astype(np.float64), W.astype(np.float64)
    n, c, h, w = X.shape
    out = np.zeros((n, W.shape[0], h - 2, w - 2))
    for ry in range(3):
        for rx in range(3):
            out += np.einsum("bcyx,oc->boyx", X[:, :, ry:ry + h - 2, rx:rx + w - 2], W[:, :, ry, rx])
    return out


def _data(rng, shape, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-4, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _stage(fn, *specs):
    s = Schedule(trace(fn, list(specs)))
    return s, s.stages[-1]


def test_host_target():
    from kdsl_cpu.schedules.target import _simd, _size, cpu_target
    t = cpu_target(3)
    assert t.cores == 3 and t.vector_bytes in (16, 32, 64) and t.l1_bytes > 0
    assert t.lanes(4) == t.vector_bytes // 4 and GENERIC_CPU.lanes(8) == 4
    assert _simd("+avx2,+avx512f") == (64, 32) and _simd("+avx,-avx512f") == (32, 16)
    assert _size("48K") == 48 * 1024 and _size("2M") == 2 << 20 and _size("x") is None
    with pytest.raises(Exception):
        t.cores = 2                                      # frozen


def test_host_simd_is_read_without_llvm(tmp_path):
    """/proc/cpuinfo's flags in LLVM's spelling (a warm process schedules without LLVM)."""
    from kdsl_cpu.schedules.target import _cpuinfo_features, _simd
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2\n\nprocessor\t: 1\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd crc32\n")
    assert _simd(_cpuinfo_features(str(x86))) == (32, 16)
    assert _simd(_cpuinfo_features(str(arm))) == (16, 16)
    assert _cpuinfo_features(str(tmp_path / "absent")) is None


def test_sketch_and_costs():
    spec = TensorSpec((None,) * 4, kd.float32)
    _, h = _stage(conv3, spec, spec)
    sk = G.sketch(h.stage)
    assert (sk.u.name, sk.v.name, sk.main.name) == ("o", "x", "rc")
    assert [w.name for w in sk.window] == ["ry", "rx"]
    t = Target(cores=16, vector_bytes=64, vector_registers=32)
    cands = G.candidates(h.stage, t)
    assert cands and all(c.params.mr <= t.max_unroll and c.params.nr in (8, 16, 32, 64) for c in cands)
    assert cands == sorted(cands, key=lambda c: c.cost)
    # a register tile that leaves FMA latency exposed costs more than one that hides it
    assert G.cost(h.stage, sk, G.Params(1, 16, 64), t) > G.cost(h.stage, sk, G.Params(7, 16, 64), t)
    # too many accumulators for the registers: illegal
    assert G.cost(h.stage, sk, G.Params(16, 64, 64), t) == float("inf")
    # a row sum has no register-tile axis: no sketch (the cpu rules keep it)
    _, r = _stage(lambda A: A.sum(axis=1), TensorSpec((None, None), kd.float32))
    assert G.sketch(r.stage) is None

    def stencil(A, F):
        n, m = A.shape
        di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
        return kd.compute((n - 2, m - 2), lambda i, j: kd.sum(A[i + di, j + dj] * F[di, dj],
                                                              axis=(di, dj)), name="S")
    _, st = _stage(stencil, TensorSpec((None, None), kd.float32), TensorSpec((3, 3), kd.float32))
    assert G.sketch(st.stage) is None        # a 2-D stencil keeps the rules' unrolled window


def test_every_candidate_is_legal_on_interp(rng):
    """Each point of the search space, realised on a small conv whose extents no tile divides
    (k = 5 channels, 7 columns), runs on the loop interpreter and gives numpy's answer."""
    X = _data(rng, (1, 2, 4, 9), np.float64)
    W = _data(rng, (5, 2, 3, 3), np.float64)
    want = ref_conv3(X, W)
    spec = TensorSpec((None,) * 4, kd.float64)
    _, h = _stage(conv3, spec, spec)
    t = Target(cores=4, vector_bytes=16, vector_registers=16)
    params = {c.params for c in G.candidates(h.stage, t)}
    assert len(params) >= 4
    for p in sorted(params, key=lambda p: (p.mr, p.nr, p.kc))[:4]:
        k = kd.kernel(conv3)
        k.schedule("interp")(lambda s, p=p: G.tiled(s, s["O"], p))
        np.testing.assert_allclose(k(X, W, backend="interp"), want, rtol=1e-12, atol=1e-12)


CONV_SHAPES = [  # (n, c, h, w, k): tiles do and do not divide; size-1 axes; empty output
    (2, 5, 5, 19, 7), (1, 1, 3, 3, 1), (1, 70, 4, 5, 9), (1, 2, 2, 5, 3)]


@pytest.mark.parametrize("shape", CONV_SHAPES)
def test_cpu_conv3_default(shape, rng):
    n, c, h, w, k = shape
    X = _data(rng, (n, c, h, w), np.float32)
    W = _data(rng, (k, c, 3, 3), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kd.ScheduleWarning)   # a default never warns (unroll caps)
        got = kd.kernel(conv3)(X, W, backend="cpu")
    assert got.shape == (n, k, max(h - 2, 0), max(w - 2, 0))
    np.testing.assert_allclose(got, ref_conv3(X, W), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,view", [(np.float64, True), (np.int32, False)])
def test_cpu_conv1_dtypes_and_views(dtype, view, rng):
    """1x1 conv, float64 on strided views (every other channel and column), int32 contiguous
    (the generator's tiles: explicit int vectors)."""
    X = _data(rng, (2, 10, 3, 41), dtype)
    X = X[:, ::2, :, ::2] if view else X
    W = _data(rng, (11, X.shape[1]), dtype)
    got = kd.kernel(conv1)(X, W, backend="cpu")      # views: the rules' plan (generator.sketch)
    want = np.einsum("bcyx,oc->boyx", X.astype(np.float64), W.astype(np.float64))
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("m,k,n", [(1, 37, 70), (1, 300, 33), (5, 9, 17), (0, 4, 5), (3, 0, 8)])
def test_cpu_skinny_gemm(m, k, n, rng):
    """GEMMs with a known row count (specialize=True; the packed recipe, gemm.packed_wins), and
    the generator's unpacked tiles on the same matmul (an explicit schedule)."""
    A, B = _data(rng, (m, k), np.float32), _data(rng, (k, n), np.float32)
    want = A.astype(np.float64) @ B.astype(np.float64)
    f = kd.kernel(lambda A, B: A @ B, specialize=True)
    np.testing.assert_allclose(f(A, B, backend="cpu"), want, rtol=1e-4, atol=1e-4)
    best = G.best(_stage(lambda A, B: A @ B, TensorSpec(A.shape, kd.float32),
                         TensorSpec(B.shape, kd.float32))[1].stage, Target(cores=2))
    if best is None:                                     # M = 0: no row tile fits
        assert m == 0
        return
    g = kd.kernel(lambda A, B: A @ B, specialize=True)
    g.schedule("cpu")(lambda s: G.tiled(s, s.stages[-1], best.params))
    np.testing.assert_allclose(g(A, B, backend="cpu"), want, rtol=1e-4, atol=1e-4)


def test_cpu_default_is_the_generators(rng):
    """The cpu default of a conv is the tiled sketch (a local rf tile, one fused parallel loop);
    a hint other than ``parallel`` falls back to the rules' plan, which the hint adjusts."""
    X = _data(rng, (1, 4, 6, 21), np.float32)
    W = _data(rng, (3, 4, 3, 3), np.float32)
    text = str(kd.kernel(conv3).lower(X, W, backend="cpu"))
    assert "O.rf" in text and "local" in text and "# parallel" in text
    hinted = kd.kernel(kd.schedule("cpu", unroll=("ry", "rx"))(conv3))
    assert "O.rf" not in str(hinted.lower(X, W, backend="cpu"))
    np.testing.assert_allclose(hinted(X, W, backend="cpu"), ref_conv3(X, W), rtol=1e-4, atol=1e-4)
