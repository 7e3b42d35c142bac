"""The default cuda schedules of convolutions written as contractions (issue 27 item 2:
kdsl_cuda/schedules/conv.py, conv_tc.py): what is recognised (by objects) and which recipe it
gets, then each recipe on the SIMT executor (race-checked, blocks in any order; the
tests/conftest.py hook NVRTC-compiles every kernel run) against numpy in float64: 3x3, 1x1,
stride 2, padding as a user writes it (np.pad, kd.where), shapes that do and do not divide
the tiles, size-1 dims, strided inputs, float32/float64 on CUDA cores and float16/bfloat16 on
tensor cores (float32 or 16-bit results), at small sizes and with the tiles of the large size
classes."""
import warnings

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ScheduleWarning
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.gpu.simt import run_simt
from kdsl.runtime.dispatch import make_schedule
from kdsl_cuda import schedules as S
from kdsl_cuda.schedules import conv as CV, conv_tc as TC, rules
from test_cuda_size_classes import lowered


# ----------------------------------------------------------------- the kernels, as users write them
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


def conv3_s2(X, W):
    n, c, h, w = X.shape
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, W.shape[0], (h - 3) // 2 + 1, (w - 3) // 2 + 1),
                      lambda b, o, y, x: kd.sum(X[b, rc, y * 2 + ry, x * 2 + rx] * W[o, rc, ry, rx],
                                                axis=(rc, ry, rx)), name="O")


def conv3_pad(X, W):                  # padding=1 through np.pad
    n, c, h, w = X.shape
    Xp = np.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1)))
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, W.shape[0], h, w),
                      lambda b, o, y, x: kd.sum(Xp[b, rc, y + ry, x + rx] * W[o, rc, ry, rx],
                                                axis=(rc, ry, rx)), name="O")


def conv3_where(X, W):                # padding=1 through kd.where
    n, c, h, w = X.shape
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")

    def f(b, o, y, x):
        yy, xx = y + ry - 1, x + rx - 1
        v = kd.where((yy >= 0) & (yy < h) & (xx >= 0) & (xx < w), X[b, rc, yy, xx], 0.0)
        return kd.sum(v * W[o, rc, ry, rx], axis=(rc, ry, rx))
    return kd.compute((n, W.shape[0], h, w), f, name="O")


def conv3_f32(X, W):                  # 16-bit operands accumulated (and returned) in float32
    n, c, h, w = X.shape
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, W.shape[0], h - 2, w - 2), lambda b, o, y, x: kd.sum(
        X[b, rc, y + ry, x + rx].astype("float32") * W[o, rc, ry, rx].astype("float32"),
        axis=(rc, ry, rx)), name="O")


def conv3_16(X, W):                   # ... and cast back to the operands' type
    return conv3_f32(X, W).astype(X.dtype)


def conv1_16(X, W):
    n, c, h, w = X.shape
    rc = kd.reduce_axis(c, name="rc")
    return kd.compute((n, W.shape[0], h, w), lambda b, o, y, x: kd.sum(
        X[b, rc, y, x].astype("float32") * W[o, rc].astype("float32"), axis=rc),
        name="O").astype(X.dtype)


def depthwise(X, W):
    n, c, h, w = X.shape
    ry, rx = kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, c, h - 2, w - 2),
                      lambda b, k, y, x: kd.sum(X[b, k, y + ry, x + rx] * W[k, ry, rx], axis=(ry, rx)))


def stencil2d(A, F):
    n, m = A.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2), lambda i, j: kd.sum(A[i + di, j + dj] * F[di, dj], axis=(di, dj)))


def ref(X, W, stride=1, pad=0):
    """F.conv2d (cross-correlation) in float64, numpy only."""
    X, W = X.astype(np.float64), W.astype(np.float64)
    if W.ndim == 2:
        W = W[:, :, None, None]
    if pad:
        X = np.pad(X, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, w = X.shape
    k, _, kh, kw = W.shape
    ho, wo = (h - kh) // stride + 1, (w - kw) // stride + 1
    out = np.zeros((n, k, ho, wo))
    for a in range(kh):
        for b in range(kw):
            win = X[:, :, a:a + stride * (ho - 1) + 1:stride, b:b + stride * (wo - 1) + 1:stride]
            out += np.einsum("nchw,kc->nkhw", win, W[:, :, a, b])
    return out


def spec(dtype, nd=4):
    return TensorSpec((None,) * nd, dtype)


def stage_of(fn, *specs):
    s = make_schedule(trace(fn, list(specs)))
    return s, next(h for h in s.stages if h.stage.is_reduction)


# ----------------------------------------------------------------- recognition
def test_roles_of_nchw_convolutions():
    for fn, window, stride in ((conv3, 2, 1), (conv1, 0, 1), (conv3_s2, 2, 2), (conv3_f32, 2, 1)):
        _, h = stage_of(fn, spec("float32"), spec("float32", 2 if fn is conv1 else 4))
        m = CV.find(h.stage)
        assert m is not None, fn.__name__
        b, o, y, x = h.stage.axes
        assert (m.o, m.y, m.x, m.batch) == (o, y, x, (b,))
        assert [r.name for r in m.main] == ["rc"] and len(m.window) == window
        assert m.stride == stride and not m.guarded
        assert rules.kind(h.stage) == "conv"
    for fn in (conv3_pad, conv3_where):
        _, h = stage_of(fn, spec("float32"), spec("float32"))
        m = CV.find(h.stage)
        assert m is not None and m.guarded and rules.kind(h.stage) == "conv"


def test_what_is_not_a_convolution():
    _, h = stage_of(depthwise, spec("float32"), spec("float32", 3))     # no channel sum
    assert CV.find(h.stage) is None
    _, h = stage_of(stencil2d, spec("float32", 2), spec("float32", 2))  # no output channels
    assert CV.find(h.stage) is None and rules.kind(h.stage) == "stencil"
    _, h = stage_of(lambda A, B: A @ B, spec("float32", 2), spec("float32", 2))
    assert CV.find(h.stage) is None and rules.kind(h.stage) == "matmul"


@pytest.mark.parametrize("fn,dtype,nd,want", [
    (conv3, "float32", 4, "tile"), (conv1, "float64", 2, "tile"), (conv3_f32, "float16", 4, "tensorcore"),
    (conv3_16, "bfloat16", 4, "tensorcore"), (conv1_16, "float16", 2, "tensorcore"),
    (conv3_s2, "float16", 4, "tile"),     # a column stride: no fragment of unit stride
    (conv3_where, "float16", 4, "tile"),  # a guarded read: clamped indices
])
def test_the_recipe_decided(fn, dtype, nd, want):
    s, h = stage_of(fn, spec(dtype), spec(dtype, nd))
    plans = S.default_plans(s)
    assert S.conv_recipe(s, h, plans[h.name]) == want


def test_tensor_cores_opt_out_and_the_hint(monkeypatch):
    x, w = spec("float16"), spec("float16")
    assert "wmma" in str(kd.kernel(conv3_16).lower(x, w, backend="cuda"))
    monkeypatch.setenv("KDSL_CUDA_TENSOR_CORES", "0")
    assert "wmma" not in str(kd.kernel(conv3_16).lower(x, w, backend="cuda"))
    monkeypatch.delenv("KDSL_CUDA_TENSOR_CORES")
    off = kd.kernel(kd.schedule("cuda", tensor_cores=False)(conv3_16))
    assert "wmma" not in str(off.lower(x, w, backend="cuda"))
    on = kd.kernel(kd.schedule("cuda", tensor_cores=True)(conv3_s2))
    with pytest.warns(ScheduleWarning, match="tensor_cores=True"):
        on.lower(spec("float16"), spec("float16"), backend="cuda")


def test_one_kernel_for_a_cast_result():
    """The float16 result is stored from the accumulators (no float32 intermediate, no cast
    kernel): the 1x1 product is one kernel, the 3x3 one kernel beside W's panel copy."""
    text = str(kd.kernel(conv1_16).lower(spec("float16"), spec("float16", 2), backend="cuda"))
    assert text.count("kernel ") == 1 and "wmma.store" in text
    text = str(kd.kernel(conv3_16).lower(spec("float16"), spec("float16"), backend="cuda"))
    assert text.count("kernel ") == 2 and "W.packed" in text
    text = str(kd.kernel(lambda X, W: conv3(X, W).astype("float16")).lower(
        spec("float32"), spec("float32"), backend="cuda"))
    assert text.count("kernel ") == 1


# ----------------------------------------------------------------- CUDA cores
#: (X shape, W shape): dividing and not dividing the tiles, a size-1 batch, channels, output
CASES3 = [((2, 5, 9, 11), (6, 5, 3, 3)), ((1, 3, 11, 38), (70, 3, 3, 3)),
          ((3, 9, 4, 4), (2, 9, 3, 3)), ((2, 1, 3, 3), (1, 1, 3, 3)), ((1, 9, 10, 35), (5, 9, 3, 3))]


def check(got, want, tol):
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got.astype(np.float64) - want).max()) / scale
    assert err <= tol, err


@pytest.mark.parametrize("xs,ws", CASES3)
def test_cuda_cores_3x3(xs, ws, rng):
    X = rng.standard_normal(xs).astype(np.float32)
    W = rng.standard_normal(ws).astype(np.float32)
    check(kd.kernel(conv3)(X, W, backend="interp-cuda"), ref(X, W), 1e-5)


def test_cuda_cores_other_forms(rng):
    X = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
    W3 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    W1 = rng.standard_normal((7, 3)).astype(np.float32)
    check(kd.kernel(conv1)(X, W1, backend="interp-cuda"), ref(X, W1), 1e-5)
    check(kd.kernel(conv3_s2)(X, W3, backend="interp-cuda"), ref(X, W3, stride=2), 1e-5)
    X64, W64 = X.astype(np.float64), W3.astype(np.float64)
    check(kd.kernel(conv3)(X64, W64, backend="interp-cuda"), ref(X64, W64), 1e-12)


@pytest.mark.parametrize("fn", [conv3_pad, conv3_where])
def test_cuda_cores_padded(fn, rng):
    """Padding as users write it: the image read under a condition, at clamped indices."""
    X = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    W = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    assert "X.shared" in str(kd.kernel(fn).lower(X, W, backend="cuda"))
    check(kd.kernel(fn)(X, W, backend="interp-cuda"), ref(X, W, pad=1), 1e-5)


def test_strided_inputs(rng):
    """Views (every other column of X, W's channels reversed) read through their strides."""
    Xb = rng.standard_normal((2, 4, 8, 21)).astype(np.float32)
    Wb = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    X, W = Xb[:, :, :, ::2], Wb[:, ::-1]
    check(kd.kernel(conv3)(X, W, backend="interp-cuda"), ref(X, W), 1e-5)


#: the large size classes' tiles (64 channels, 8 rows, 32 or 16 columns), run at small sizes
BIG = {"X_0": (32, 32), "X_1": (64, 127), "X_2": (32, 63), "X_3": (32, 63), "W_0": (64, 127)}


@pytest.mark.parametrize("fn,ws", [(conv3, (20, 6, 3, 3)), (conv1, (20, 6)), (conv3_s2, (20, 6, 3, 3))])
def test_cuda_cores_large_tiles_at_small_sizes(fn, ws, rng):
    f = lowered(fn, [spec("float32"), spec("float32", len(ws))], BIG)
    assert "X.shared" in str(f)
    if fn is not conv3_s2:      # 64 channels x 8 rows x 32 columns a block
        assert "block=(32, 8, 1)" in str(f)
    for xs in ((1, 3, 12, 37),) if fn is conv3_s2 else ((1, 6, 12, 37), (2, 11, 5, 9)):
        X = rng.standard_normal(xs).astype(np.float32)
        W = rng.standard_normal((ws[0], xs[1]) + ws[2:]).astype(np.float32)
        want = ref(X, W, stride=2 if fn is conv3_s2 else 1)
        out = np.full(want.shape, np.nan, np.float32)
        run_simt(f, [X, W], [out], [], block_order=rng)
        check(out, want, 1e-5)


def test_cuda_core_variants(rng):
    """Every thread-register layout of the recipe (Config.xl), steps of other sizes and more
    buffers give the same result."""
    X = rng.standard_normal((1, 5, 6, 19)).astype(np.float32)
    W = rng.standard_normal((13, 5, 3, 3)).astype(np.float32)
    for over in (dict(xl="row"), dict(xl="tap", bk=4), dict(stages=3, ym=4), dict(om=4, bm=16)):
        def sched(s, over=over):
            h = s["O"]
            m = CV.find(h.stage)
            CV.conv_tile(s, h, m, CV.Config(**{**vars(CV.choose(s, h, m)), **over}))
        k = kd.kernel(conv3)
        k.schedule("cuda")(sched)
        check(k(X, W, backend="interp-cuda"), ref(X, W), 1e-5)


# ----------------------------------------------------------------- tensor cores
def tc_tol(X, W, out_dtype):
    """float32 sums of exact products (K terms), then one rounding to the result's type."""
    k = W.size // W.shape[0]
    t = k * 2.0 ** -23
    return t + (2.0 ** -8 if out_dtype == "bfloat16" else 2.0 ** -11 if out_dtype == "float16" else 0)


def half(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(np.float16)


#: channels and outputs not multiples of 16, a row shorter than a fragment, a size-1 batch
TC3 = [((2, 5, 9, 11), (6, 5, 3, 3)), ((1, 33, 6, 40), (40, 33, 3, 3)), ((1, 16, 4, 20), (16, 16, 3, 3))]


@pytest.mark.parametrize("xs,ws", TC3)
@pytest.mark.parametrize("fn", [conv3_16, conv3_f32])
def test_tensor_cores_3x3(fn, xs, ws, rng):
    X, W = half(rng, xs, "float16"), half(rng, ws, "float16")
    k = kd.kernel(fn)
    assert "wmma" in str(k.lower(X, W, backend="cuda"))
    got = k(X, W, backend="interp-cuda")
    assert got.dtype == (np.float16 if fn is conv3_16 else np.float32)
    check(got, ref(X, W), tc_tol(X, W, "float16" if fn is conv3_16 else "float32"))


@pytest.mark.parametrize("xs,ws", [((2, 20, 5, 18), (17, 20)), ((1, 40, 3, 16), (16, 40)),
                                   ((2, 7, 4, 33), (5, 7))])
def test_tensor_cores_1x1(xs, ws, rng):
    X, W = half(rng, xs, "float16"), half(rng, ws, "float16")
    check(kd.kernel(conv1_16)(X, W, backend="interp-cuda"), ref(X, W), tc_tol(X, W, "float16"))


def test_tensor_cores_bfloat16(rng):
    pytest.importorskip("ml_dtypes")
    X, W = half(rng, (1, 18, 6, 20), "bfloat16"), half(rng, (20, 18, 3, 3), "bfloat16")
    got = kd.kernel(conv3_16)(X, W, backend="interp-cuda")
    check(np.asarray(got, np.float64), ref(X, W), tc_tol(X, W, "bfloat16"))


#: the tensor-core recipe's large tiles (64 columns, 8 rows of warps), at small sizes
@pytest.mark.parametrize("fn,ws", [(conv3_16, (20, 6, 3, 3)), (conv1_16, (20, 6))])
def test_tensor_core_large_tiles_at_small_sizes(fn, ws, rng):
    f = lowered(fn, [spec("float16"), spec("float16", len(ws))], BIG)
    assert "wmma" in str(f) and "block=(32, 1, 8)" in str(f)
    for xs in ((1, 6, 10, 37), (2, 18, 3, 9)):
        X = half(rng, xs, "float16")
        W = half(rng, (ws[0], xs[1]) + ws[2:], "float16")
        want = ref(X, W)
        out = np.full(want.shape, np.nan, np.float16)
        run_simt(f, [X, W], [out], [], block_order=rng)
        check(out, want, tc_tol(X, W, "float16"))


def test_tensor_core_variants(rng):
    """Other warp grids and steps of the tensor-core recipe give the same result."""
    X, W = half(rng, (1, 35, 5, 21), "float16"), half(rng, (24, 35, 3, 3), "float16")
    for over in (dict(wo=2, wy=2, to=1), dict(tx=2, wy=1), dict(stages=3, to=2), dict(xglobal=True)):
        def sched(s, over=over):
            h = s["O"]
            m = CV.find(h.stage)
            c = TC.choose(s, h, m)
            TC.conv_tc(s, h, m, TC.TCConfig(**{**vars(c), **over}), s.stages[-1])
        k = kd.kernel(conv3_16)
        k.schedule("cuda")(sched)
        check(k(X, W, backend="interp-cuda"), ref(X, W), tc_tol(X, W, "float16"))


def test_no_warning_by_default():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kd.kernel(conv3_16).lower(spec("float16"), spec("float16"), backend="cuda")
        kd.kernel(conv3).lower(spec("float32"), spec("float32"), backend="cuda")


@pytest.mark.parametrize("fn,xs,ws,dtype", [
    (conv3, (1, 8, 10, 34), (64, 8, 3, 3), "float32"),
    (conv3_16, (1, 32, 10, 66), (64, 32, 3, 3), "float16"),
    (conv1_16, (1, 32, 8, 64), (64, 32), "float16")])
def test_interior_blocks(fn, xs, ws, dtype, rng):
    """Sizes the large tiles divide: the block runs the copy of the main loop without bounds
    tests (kdsl.gpu.interior_blocks), which the other tests' edge blocks do not reach."""
    f = lowered(fn, [spec(dtype), spec(dtype, len(ws))], BIG)
    X = rng.standard_normal(xs).astype(dtype)
    W = (rng.standard_normal(ws) / 10).astype(dtype)
    want = ref(X, W)
    out = np.full(want.shape, np.nan, np.float32 if dtype == "float32" else np.float16)
    run_simt(f, [X, W], [out], [])
    check(out, want, 1e-5 if dtype == "float32" else tc_tol(X, W, "float16"))


def _fuzz_cases(count=6, seed=26):
    r = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        win, stride = int(r.choice([1, 3])), int(r.choice([1, 1, 2]))
        n, c, k = int(r.integers(1, 3)), int(r.integers(1, 21)), int(r.integers(1, 21))
        h, w = int(r.integers(win, 12)), int(r.integers(win, 20))
        out.append((str(r.choice(["float32", "float16"])), win, stride, (n, c, h, w), k))
    return out


def _strided(win, stride):
    def f(X, W):
        n, c, h, w = X.shape
        rc = kd.reduce_axis(c, name="rc")
        if win == 1:
            return kd.compute((n, W.shape[0], (h - 1) // stride + 1, (w - 1) // stride + 1),
                              lambda b, o, y, x: kd.sum(X[b, rc, y * stride, x * stride].astype("float32")
                                                        * W[o, rc].astype("float32"), axis=rc))
        ry, rx = kd.reduce_axis(win, name="ry"), kd.reduce_axis(win, name="rx")
        return kd.compute((n, W.shape[0], (h - win) // stride + 1, (w - win) // stride + 1),
                          lambda b, o, y, x: kd.sum(
                              X[b, rc, y * stride + ry, x * stride + rx].astype("float32")
                              * W[o, rc, ry, rx].astype("float32"), axis=(rc, ry, rx)))
    return f


@pytest.mark.parametrize("dtype,win,stride,xs,k", _fuzz_cases())
def test_fuzz_shapes(dtype, win, stride, xs, k, rng):
    """Random sizes (seeded): 1x1 or 3x3, stride 1 or 2, channels and outputs not multiples of
    anything, float32 (CUDA cores) or float16 (tensor cores at stride 1)."""
    X = rng.standard_normal(xs).astype(dtype)
    W = rng.standard_normal((k, xs[1]) + ((win, win) if win > 1 else ())).astype(dtype)
    got = kd.kernel(_strided(win, stride))(X, W, backend="interp-cuda")
    check(got, ref(X, W, stride=stride), 1e-5 if dtype == "float32" else tc_tol(X, W, "float32"))
