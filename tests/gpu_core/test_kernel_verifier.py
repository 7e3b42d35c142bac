"""The verifier's GPU rules (kdsl.gpu.verify) on hand-built DeviceKernels: one good kernel,
then one broken kernel per rule; and the sequential tail's async-copy lowering on hand IR."""
import numpy as np
import pytest

from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import run_simt
from kdsl.errors import InternalCompilerError
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.gpu.verify import verify
from kdsl.gpu.pipeline import GPU_SEQUENTIAL
from kdsl.passes.pipeline import run_passes
from kdsl.gpu.sequential import lower_async_copies

F32 = dt.float32
NB, NT = 3, 8
X, Y = n.ThreadTag.THREAD_X, n.ThreadTag.THREAD_Y


def c(v):
    return n.const(v)


A = n.Buffer("A", F32, (c(NB * NT),), param=True)
O = n.Buffer("O", F32, (c(NB * NT),), param=True)


def tloop(body_fn, extent=NT, tag=X, name="t"):
    t = n.var(name)
    return n.For(t, c(0), extent if isinstance(extent, n.Expr) else c(extent), n.ForKind.BOUND,
                 body_fn(t), tag)


def func(block_body, launch_block=(NT, 1, 1), scalars=(), grid=None):
    """One kernel: for b (blockIdx.x, NB blocks): block_body(b)."""
    b = n.var("b")
    loop = n.For(b, c(0), c(NB), n.ForKind.BOUND, block_body(b), n.ThreadTag.BLOCK_X)
    launch = n.Launch(grid or (c(NB), c(1), c(1)), launch_block)
    k = n.DeviceKernel("hand_kernel0", launch, loop)
    return n.LoweredFunc("hand", (A,), (O,), tuple(scalars), k,
                         bindings=tuple(n.Binding(n.BindingKind.SCALAR, i) for i in range(len(scalars))))


def gidx(b, t):
    return mk.add(mk.mul(b, NT), t)


def copy(S):
    """S[t] = A[b*NT + t]; barrier; O[b*NT + t] = S[NT-1-t] (S shared, allocated per block)."""
    def body(b):
        fill = tloop(lambda t: n.Store(S, (t,), n.Load(F32, A, (gidx(b, t),))))
        rev = tloop(lambda t: n.Store(O, (gidx(b, t),), n.Load(F32, S, (mk.sub(NT - 1, t),))), name="u")
        return n.Allocate(S, n.Seq((fill, n.Barrier(), rev)))
    return body


SH = n.Buffer("S", F32, (c(NT),), scope=n.Scope.SHARED)


def test_a_good_kernel_verifies_and_runs():
    f = func(copy(SH))
    verify(f)
    a = np.arange(NB * NT, dtype=np.float32)
    out = np.zeros_like(a)
    run_simt(f, [a], [out], [])
    np.testing.assert_array_equal(out, a.reshape(NB, NT)[:, ::-1].ravel())


def broken(f, match):
    with pytest.raises(InternalCompilerError, match=match):
        verify(f)


def test_thread_extent_must_be_constant():
    m = n.var("m")
    f = func(lambda b: tloop(lambda t: n.Store(O, (gidx(b, t),), n.const(0.0, F32)), extent=m),
             scalars=(m,))
    broken(f, "the extent of the threadIdx.x loop t is not a constant")


def test_shorter_thread_loop_is_masked():
    # a loop shorter than the block (a capped thread tile, a stage pinned to thread 0) is
    # masked, not refused (issue 24: the block's size is the longest loop of the tag)
    def body(b):
        one = tloop(lambda t: n.Store(O, (gidx(b, t),), n.const(0.0, F32)))
        two = tloop(lambda t: n.Store(O, (gidx(b, t),), n.const(1.0, F32)), extent=4, name="u")
        return n.Seq((one, two))
    verify(func(body))


def test_thread_loop_longer_than_the_launch():
    f = func(lambda b: tloop(lambda t: n.Store(O, (gidx(b, t),), n.const(0.0, F32))), launch_block=(4, 1, 1))
    broken(f, "has 8 iterations, more than the launch's 4 threads")


def test_block_loop_inside_a_thread_loop():
    f = func(lambda b: tloop(lambda t: n.For(n.var("g"), c(0), c(2), n.ForKind.BOUND,
                                              n.Store(O, (gidx(b, t),), n.const(0.0, F32)),
                                              n.ThreadTag.BLOCK_Y)))
    broken(f, "the blockIdx.y loop g is inside a thread loop")


def test_barrier_under_a_condition_on_a_thread_index():
    def body(b):
        return tloop(lambda t: n.IfThenElse(mk.lt(t, 4), n.Barrier()))
    broken(func(body), "a barrier under a condition on a thread index")


def test_barrier_under_a_loop_whose_bounds_depend_on_the_thread():
    def body(b):
        def inner(t):
            r = n.var("r")
            return n.For(r, c(0), t, n.ForKind.SERIAL, n.Barrier())
        return tloop(inner)
    broken(func(body), "a barrier under a condition on a thread index")


def test_barrier_under_a_uniform_condition_is_fine():
    def body(b):
        return tloop(lambda t: n.IfThenElse(mk.lt(b, 2), n.Barrier()))
    verify(func(body))


def test_barrier_inside_a_thread_loop_shorter_than_the_block():
    f = func(lambda b: tloop(lambda t: n.Barrier(), extent=4), launch_block=(8, 1, 1))
    broken(f, "a barrier inside the threadIdx.x loop t of 4 iterations, shorter than the block's 8")


def test_shared_allocation_inside_a_thread_loop():
    def body(b):
        return tloop(lambda t: n.Allocate(SH, n.Store(SH, (t,), n.const(0.0, F32))))
    broken(func(body), "shared buffer 'S' is allocated inside the threadIdx.x loop t")


def test_local_buffer_used_outside_its_thread_loop():
    L = n.Buffer("L", F32, (c(1),), scope=n.Scope.LOCAL)

    def body(b):
        inner = tloop(lambda t: n.Store(L, (c(0),), n.const(1.0, F32)))
        return n.Allocate(L, inner)
    broken(func(body), "local buffer 'L' is used inside the threadIdx.x loop t but allocated outside it")

    def good(b):
        return tloop(lambda t: n.Allocate(L, n.Seq((n.Store(L, (c(0),), n.const(1.0, F32)),
                                                   n.Store(O, (gidx(b, t),), n.Load(F32, L, (c(0),)))))))
    verify(func(good))


def test_grid_uses_only_the_functions_scalars():
    q = n.var("q")
    broken(func(copy(SH), grid=(q, c(1), c(1))), "grid size .* is not an index expression")


def test_kernels_only_at_the_root_and_bound_loops_only_inside_them():
    f = func(copy(SH))
    k = f.body
    nested = n.LoweredFunc("hand", (A,), (O,), (), n.For(n.var("i"), c(0), c(1), n.ForKind.SERIAL, k))
    broken(nested, "a DeviceKernel below the root")
    b = n.var("b2")
    loose = n.For(b, c(0), c(NB), n.ForKind.BOUND, copy(SH)(b), n.ThreadTag.BLOCK_X)
    broken(n.LoweredFunc("hand", (A,), (O,), (), n.Seq((k, loose))),
           "a loop bound to a GPU block or thread outside every DeviceKernel")


# ----------------------------------------------------------------- the sequential tail
def test_async_copies_become_stores_at_issue(monkeypatch):
    """S[t] <- A[b*NT + t] when t < 5, else zero fill; commit; wait; barrier; O[...] = S[...]."""
    monkeypatch.setenv("KDSL_VERIFY", "0")    # the verifier's AsyncCopy rules come with vpipe
    def body(b):
        cp = tloop(lambda t: n.AsyncCopy(SH, (t,), n.Load(F32, A, (gidx(b, t),)), mk.lt(t, 5)))
        use = tloop(lambda t: n.Store(O, (gidx(b, t),), n.Load(F32, SH, (t,))), name="u")
        return n.Allocate(SH, n.Seq((cp, n.CommitGroup(), n.WaitGroup(0), n.Barrier(), use)))
    f = func(body)
    g = lower_async_copies(f)
    text = str(g)
    assert "async_copy" not in text and "commit_group" not in text and "wait_group" not in text
    assert "if t < 5:" in text and "S[t] = 0.0f" in text
    undo = GPU_SEQUENTIAL.passes[GPU_SEQUENTIAL.index("sequential_kernels"):]
    seq = run_passes(f, undo)                     # kernels unwrapped, copies lowered
    assert seq.kernels == () and "kernel " not in str(seq)
    a = np.arange(1, NB * NT + 1, dtype=np.float32)
    out = np.full_like(a, np.nan)
    run_lowered(seq, [a], [out], [])
    want = np.where(np.arange(NB * NT) % NT < 5, a, 0)
    np.testing.assert_array_equal(out, want)
    assert lower_async_copies(seq) is seq          # nothing left to do: the same object
