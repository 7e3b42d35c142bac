"""Device kernels and launches (issue 9 item 5) and the interpreter as a backend for cuda schedules
(``backend="interp-cuda"``, item 9): the GPU table's host program, its launches and workspaces,
SIMT and sequential results against numpy in float64, the user's errors."""
import numpy as np
import pytest

import kdsl as kd
from schedules import elementwise_2d, matmul_graph, mm_shared_no_sync, mm_threads, rand, scale_graph
from kdsl.backends import registry
from kdsl.backends.interpreter import run_lowered
from kdsl.numerics.numpy_eval import ExprEval
from kdsl.gpu.simt import RaceError, run_simt
from kdsl.errors import ScheduleError, ShapeError
from kdsl.ir import nodes as n
from kdsl.gpu import pipeline as G
from kdsl.passes import pipeline as P
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.gpu.sequential import sequential_kernels
from kdsl.schedule import Schedule


def _softmax(X):
    n_, m_ = X.shape
    k1 = kd.reduce_axis(m_, name="k1")
    mx = kd.compute((n_,), lambda i: kd.max(X[i, k1], axis=k1), name="mx")
    e = kd.compute((n_, m_), lambda i, j: kd.exp(X[i, j] - mx[i]), name="e")
    k2 = kd.reduce_axis(m_, name="k2")
    s = kd.compute((n_,), lambda i: kd.sum(e[i, k2], axis=k2), name="s")
    return kd.compute((n_, m_), lambda i, j: e[i, j] / s[i], name="out")


def unfused(s):
    """Three root nests: row maxima and row sums one row per thread, the quotient in 4x8 tiles."""
    s["e"].compute_inline()
    for name in ("mx", "s"):
        st = s[name]
        io, ii = st.split(st.axes[0], factor=32)
        st.bind(io, "blockIdx.x")
        st.bind(ii, "threadIdx.x")
    out = s["out"]
    io, jo, ii, ji = out.tile(out.axes[0], out.axes[1], 4, 8)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        out.bind(ax, tag)


def fused(s):
    """One kernel: a row per thread, its maximum and sum in the thread's local memory."""
    s["e"].compute_inline()
    out = s["out"]
    io, ii = out.split(out.axes[0], factor=4)
    out.bind(io, "blockIdx.x")
    out.bind(ii, "threadIdx.x")
    for name in ("s", "mx"):
        s[name].compute_at(out, ii)
        s[name].set_scope("local")


def kernel_with(sched):
    """A fresh softmax kernel carrying ``sched`` for cuda and for the interpreter."""
    k = kd.kernel(_softmax)
    k.schedule("cuda")(sched)
    k.schedule("interp")(sched)
    return k


def softmax64(x):
    if x.size == 0:
        return x.astype(np.float64)
    e = np.exp(x.astype(np.float64) - x.astype(np.float64).max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


SPEC = kd.TensorSpec(("n", "m"), kd.float32)
SHAPES = [(64, 64), (70, 33), (1, 1), (3, 17), (0, 5), (5, 0)]


def evaluate(e, func, shape):
    """A launch Expr's value for an input of ``shape`` (the scalars are the input's shape)."""
    env = {v: shape[b.dim] for v, b in zip(func.scalars, func.bindings)}
    return int(ExprEval(env, {})(e))


# ----------------------------------------------------------------- the host program
def test_unfused_softmax_is_three_kernels_in_order_with_workspaces():
    f = kernel_with(unfused).lower(SPEC, backend="cuda")
    names = [k.name for k in f.kernels]
    assert names == ["_softmax_kernel0", "_softmax_kernel1", "_softmax_kernel2"]
    assert [b.name for b in f.workspaces] == ["mx", "s"]
    assert all(b.scope is n.Scope.GLOBAL for b in f.workspaces)
    assert [k.launch.block for k in f.kernels] == [(32, 1, 1), (32, 1, 1), (8, 4, 1)]
    text = str(f)
    # the host program: workspaces, then each kernel with its launch, in order
    assert text.index("allocate mx: float32[n] global") < text.index("allocate s: float32[n] global") \
        < text.index("kernel _softmax_kernel0<<<grid=(ceildiv(n, 32), 1, 1), block=(32, 1, 1)>>>:") \
        < text.index("kernel _softmax_kernel1<<<") \
        < text.index("kernel _softmax_kernel2<<<grid=(ceildiv(m, 8), ceildiv(n, 4), 1), block=(8, 4, 1)>>>:")
    assert "blk" not in text and "comp" not in text      # no compensated sums on the GPU
    # the sequential table of the same schedule: the same loops, no kernels
    g = kernel_with(unfused).lower(SPEC, backend="interp")
    assert g.kernels == () and [b.name for b in g.workspaces] == ["mx", "s"]


def test_fused_softmax_is_one_kernel():
    f = kernel_with(fused).lower(SPEC, backend="cuda")
    (k,) = f.kernels
    assert k.name == "_softmax_kernel0" and k.launch.block == (4, 1, 1)
    assert f.workspaces == ()


@pytest.mark.parametrize("shape", SHAPES)
def test_launch_dimensions_for_any_shape(shape):
    f = kernel_with(unfused).lower(SPEC, backend="cuda")
    nn, mm = shape
    want = [(-(-nn // 32), 1, 1), (-(-nn // 32), 1, 1), (-(-mm // 8), -(-nn // 4), 1)]
    got = [tuple(evaluate(g, f, shape) for g in k.launch.grid) for k in f.kernels]
    assert got == want


@pytest.mark.parametrize("sched", [unfused, fused])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_simt_and_interpreter_match_numpy(sched, shape, rng):
    k = kernel_with(sched)
    x = rand(rng, shape, np.float32)
    if shape[1] == 0:   # a row max over no columns raises, as numpy's x.max(axis=1) (issue 24)
        for backend in ("interp-cuda", "interp"):
            with pytest.raises(ShapeError, match="empty axis"):
                k(x, backend=backend)
        return
    simt = k(x, backend="interp-cuda")
    seq = k(x, backend="interp")
    np.testing.assert_allclose(simt, softmax64(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(seq, softmax64(x), rtol=1e-5, atol=1e-6)


def test_unwrapping_the_kernels_gives_the_sequential_loops():
    s1, s2 = (Schedule(matmul_graph()) for _ in range(2))
    mm_threads(s1)
    mm_threads(s2)
    gpu = gpu_lower(s1)
    seq = P.lower(s2, pipeline=P.SEQUENTIAL.remove("blocked_sums"))
    assert len(gpu.kernels) == 1 and "kernel " not in str(seq)
    assert str(sequential_kernels(gpu)) == str(seq)


@pytest.mark.parametrize("shape", [(8, 16), (9, 13), (1, 1), (0, 3)])
def test_gpu_form_runs_under_simt_in_any_block_order(shape, rng):
    f = gpu_lower(_sched(elementwise_2d))
    (k,) = f.kernels
    assert k.launch.block == (8, 4, 1)
    A = rand(rng, shape, np.float64)
    got = np.full(shape, np.nan)
    run_simt(f, [A], [got], [], block_order=np.random.default_rng(3))
    np.testing.assert_array_equal(got, A * 2 + 1)
    seq = np.full(shape, np.nan)
    run_lowered(P.lower(_sched(elementwise_2d)), [A], [seq], [])
    np.testing.assert_array_equal(seq, got)


def _sched(fn):
    s = Schedule(scale_graph())
    fn(s)
    return s


def test_races_are_still_found_inside_device_kernels(rng):
    s = Schedule(matmul_graph())
    mm_shared_no_sync(s)       # shared tiles, and a GPU table without the sync pass: no barrier
    f = P.lower(s, pipeline=G.PIPELINE.remove("sync"))
    A, B = rand(rng, (16, 8), np.float32), rand(rng, (8, 16), np.float32)
    with pytest.raises(RaceError, match="kernel 'mm_kernel0'"):
        run_simt(f, [A, B], [np.zeros((16, 16), np.float32)], [])


# ----------------------------------------------------------------- the user's errors
def test_unbound_stage_on_a_gpu_target_says_to_bind_it():
    k = kd.kernel(_softmax)
    k.schedule("cuda")(lambda s: None)       # an explicit schedule that binds nothing
    with pytest.raises(ScheduleError, match=r"stage 'mx' runs outside every GPU kernel") as e:
        k.lower(SPEC, backend="cuda")
    assert "bind" in str(e.value)
    k(np.ones((2, 3), np.float32), backend="interp")         # fine sequentially


def test_symbolic_thread_extent_says_to_split():
    k = kd.kernel(_softmax)

    @k.schedule("cuda")
    def whole_rows(s):
        out = s["out"]
        s["e"].compute_inline()
        for name in ("s", "mx"):
            s[name].compute_at(out, out.axes[0])
        out.bind(out.axes[0], "blockIdx.x")
        out.bind(out.axes[1], "threadIdx.x")         # m threads: not a constant
    with pytest.raises(ScheduleError, match=r"binds j to threadIdx.x over a number of iterations "
                                            r"that is not a constant") as e:
        k.lower(SPEC, backend="cuda")
    assert "split the axis by a constant factor" in str(e.value)
    assert "test_kernels.py" in str(e.value)        # located at the user's line


def test_two_extents_for_one_thread_index():
    def two(s):
        s["e"].compute_inline()
        for name, f in (("mx", 32), ("s", 16)):
            st = s[name]
            io, ii = st.split(st.axes[0], factor=f)
            st.bind(io, "blockIdx.x")
            st.bind(ii, "threadIdx.x")
        out = s["out"]
        io, ii = out.split(out.axes[0], factor=8)
        out.bind(io, "blockIdx.x")
        out.bind(ii, "threadIdx.x")
    # separate kernels may differ: only one kernel's loops must agree
    f = kernel_with(two).lower(SPEC, backend="cuda")
    assert [k.launch.block[0] for k in f.kernels] == [32, 16, 8]
    s = Schedule(matmul_graph())
    C = s["C"]
    AA = s.cache_read("A", "shared", [C])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        C.bind(ax, tag)
    AA.compute_at(C, jo)
    a0, a1 = AA.split(AA.axes[1], factor=4)
    AA.bind(AA.axes[0], "threadIdx.y")
    AA.bind(a1, "threadIdx.x")                    # 4 threads where C has 8
    # issue 24: the block is as wide as the longest loop; the copy's loop of 4 is masked
    f = gpu_lower(s)
    assert [k.launch.block for k in f.kernels] == [(8, 8, 1)]
    rng = np.random.default_rng(5)
    A, B = rand(rng, (13, 6), np.float32), rand(rng, (6, 11), np.float32)
    got = np.full((13, 11), np.nan, np.float32)
    run_simt(f, [A, B], [got], [])
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_sequential_targets_keep_running_what_a_gpu_cannot():
    s = Schedule(scale_graph())
    s["O"].bind(s["O"].axes[0], "threadIdx.x")    # a symbolic number of threads
    f = P.lower(s)
    A = np.arange(6.0).reshape(2, 3)
    out = np.zeros((2, 3))
    run_lowered(f, [A], [out], [])
    np.testing.assert_array_equal(out, A * 2 + 1)
    with pytest.raises(ScheduleError, match="not a constant"):
        gpu_lower(_sched(lambda s: s["O"].bind(s["O"].axes[0], "threadIdx.x")))


# ----------------------------------------------------------------- the backend and its registry
def test_interp_cuda_backend_is_built_in_and_not_a_target():
    assert "interp-cuda" in kd.backends() and "interp-cuda" not in registry.known_targets()
    be = registry.get_backend("interp-cuda")
    s = be.spec
    assert s.name == "interp-cuda" and s.target == "cuda" and s.device == "host" and s.size_classes
    with pytest.raises(ValueError, match="GPU target"):
        type(be)(target="cpu")


def test_interp_cuda_runs_only_cuda_schedules(rng):
    k = kd.kernel(_softmax)
    k.schedule("cuda")(fused)
    x = rand(rng, (6, 5), np.float32)
    np.testing.assert_allclose(k(x, backend="interp-cuda"), softmax64(x), rtol=1e-5)
    np.testing.assert_allclose(k(x, backend="interp"), softmax64(x), rtol=1e-5)  # its own (none)
    src = k.source(x, backend="interp-cuda")
    assert "kernel _softmax_kernel0<<<grid=(ceildiv(X_0, 4), 1, 1), block=(4, 1, 1)>>>:" in src


def test_copy_over_fewer_thread_rows_than_its_consumer_is_masked():
    """The copy of a shared tile dealt out over 4 rows of threads inside C's 8x8 threads: once a
    ScheduleError (two extents for threadIdx.y); since issue 24 the block is 8 rows high and
    the copy's loop of 4 masked (threads 4..7 skip it), checked race-free on the SIMT executor."""
    from schedules import _coop_copy, tile_2d
    s = Schedule(matmul_graph())
    C = s["C"]
    AA = s.cache_read("A", "shared", [C])
    tile_2d(C, 8, 8)
    ko, ki = C.split(C.reduce_axes[0], factor=8)
    AA.compute_at(C, ko)
    _coop_copy(AA, 4, 8)
    f = gpu_lower(s)
    assert [k.launch.block for k in f.kernels] == [(8, 8, 1)]
    rng = np.random.default_rng(6)
    A, B = rand(rng, (17, 19), np.float32), rand(rng, (19, 9), np.float32)
    got = np.full((17, 9), np.nan, np.float32)
    run_simt(f, [A, B], [got], [])
    np.testing.assert_allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
