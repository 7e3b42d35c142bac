"""Loop structure in the IR interpreter: views, reductions, guards, temporaries, errors."""
import numpy as np
import pytest

from kdsl import dtypes as dt
from kdsl.backends.interpreter import program, python_source, run_lowered
from kdsl.numerics.pyexec_rt import OutOfBounds
from kdsl.errors import InternalCompilerError
from kdsl.ir import make as mk
from kdsl.ir import nodes as n

from interp_build import F, binop, bound, c, kernel, load, loop, seq, store

pytestmark = pytest.mark.filterwarnings("error")
ADD, MUL = n.BinOp.ADD, n.BinOp.MUL


def copy2d(dtype="float32"):
    def body(A, B):
        i, j = n.var("i"), n.var("j")
        return loop(i, A.shape[0], loop(j, A.shape[1], store(B, (i, j), load(A, i, j))), F.PARALLEL)
    return kernel("copy", [("A", dtype, 2)], [("B", dtype, 2)], body)


def test_copy_reads_and_writes_views_in_place():
    f = copy2d()
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    a = base[::-2, 7:0:-3]                       # negative strides both ways
    big = np.full((5, 9), -1.0, np.float32)
    out = big[1:4, ::4].T.T                      # strided output view
    assert a.shape == out.shape == (3, 3)
    run_lowered(f, [a], [out], [])
    np.testing.assert_array_equal(out, a)
    assert big[0].tolist() == [-1.0] * 9         # nothing written outside the view
    assert (big[1:4, 1:4] == -1).all()
    src = base[:, ::-1].T[::2]                   # (4, 6), transposed and reversed
    out2 = np.empty((6, 4), np.float32).T        # Fortran-ordered output
    run_lowered(f, [src], [out2], [])
    np.testing.assert_array_equal(out2, src)


def test_copy_zero_size_arrays():
    f = copy2d()
    for shape in [(0, 5), (4, 0), (0, 0)]:
        a = np.ones(shape, np.float32)
        out = np.empty(shape, np.float32)
        run_lowered(f, [a], [out], [])
    run_lowered(f, [np.ones((3, 0), np.float32)[::-1]], [np.empty((3, 0), np.float32)], [])


def rowsum():
    def body(A, B):
        i, k = n.var("i"), n.var("k")
        init = store(B, (i,), c(0.0, dt.float32))
        upd = store(B, (i,), binop(ADD, load(B, i), load(A, i, k)))
        return loop(i, A.shape[0], seq(init, loop(k, A.shape[1], upd)))
    return kernel("rowsum", [("A", "float32", 2)], [("B", "float32", 1)], body)


def test_rowsum_init_and_reduction():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    out = np.full(5, np.nan, np.float32)
    run_lowered(rowsum(), [a[:, ::-1]], [out], [])
    np.testing.assert_allclose(out, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    # exact sequential float32 accumulation
    ref = np.zeros(5, np.float32)
    for k in range(6, -1, -1):
        ref = ref + a[:, k]
    np.testing.assert_array_equal(out, ref)


def split_copy(guarded: bool, factor=4):
    def body(A, B):
        io, ii = n.var("io"), n.var("ii")
        nn = A.shape[0]
        idx = mk.add(mk.mul(io, factor), ii)
        st = store(B, (idx,), load(A, idx))
        if guarded:
            st = n.IfThenElse(mk.lt(idx, nn), st)
        return loop(io, mk.ceildiv(nn, factor), loop(ii, factor, st, F.VECTORIZED))
    return kernel("split", [("A", "float64", 1)], [("B", "float64", 1)], body)


@pytest.mark.parametrize("size", [0, 1, 8, 10, 11])
def test_guarded_split_is_exact(size):
    a = np.arange(size, dtype=np.float64) * 1.5
    out = np.zeros(size)
    run_lowered(split_copy(True), [a], [out], [])
    np.testing.assert_array_equal(out, a)


def test_missing_guard_raises_out_of_bounds():
    a, out = np.arange(10.0), np.zeros(10)
    with pytest.raises(OutOfBounds, match=r"store of buffer 'B' at index \(10,\)") as info:
        run_lowered(split_copy(False), [a], [out], [])
    assert isinstance(info.value, InternalCompilerError)
    assert "split" in str(info.value)


def test_negative_index_is_not_wrapped():
    def body(A, B):
        i = n.var("i")
        return loop(i, A.shape[0], store(B, (i,), load(A, mk.sub(i, 1))))
    f = kernel("shift", [("A", "float32", 1)], [("B", "float32", 1)], body)
    with pytest.raises(OutOfBounds, match=r"load of buffer 'A' at index \(-1,\)"):
        run_lowered(f, [np.ones(4, np.float32)], [np.zeros(4, np.float32)], [])

    def body2(A, B):
        i = n.var("i")
        return loop(i, A.shape[0], store(B, (mk.sub(i, 1),), load(A, i)))
    f2 = kernel("shift2", [("A", "float32", 1)], [("B", "float32", 1)], body2)
    with pytest.raises(OutOfBounds, match="store of buffer 'B'"):
        run_lowered(f2, [np.ones(4, np.float32)], [np.zeros(4, np.float32)], [])


def test_shared_temporary_two_thread_phases():
    """Each block stages 4 elements in shared memory, then threads read them reversed."""
    T = 4

    def body(A, B):
        bx, tx, tx2 = n.var("bx"), n.var("tx"), n.var("tx2")
        S = n.Buffer("S", dt.float32, (c(T),), scope=n.Scope.SHARED)
        base = mk.mul(bx, T)
        phase1 = bound(tx, T, "threadIdx.x", store(S, (tx,), load(A, mk.add(base, tx))))
        phase2 = bound(tx2, T, "threadIdx.x",
                       store(B, (mk.add(base, tx2),), load(S, mk.sub(T - 1, tx2))))
        return bound(bx, mk.floordiv(A.shape[0], T), "blockIdx.x",
                     n.Allocate(S, seq(phase1, n.Barrier(), phase2)))
    f = kernel("rev4", [("A", "float32", 1)], [("B", "float32", 1)], body)
    a = np.arange(12, dtype=np.float32)
    out = np.zeros(12, np.float32)
    run_lowered(f, [a], [out], [])
    np.testing.assert_array_equal(out, a.reshape(3, 4)[:, ::-1].ravel())
    assert "threadIdx.x" in python_source(f)


def local_accumulator(init: bool):
    def body(A, B):
        tx, k = n.var("tx"), n.var("k")
        L = n.Buffer("L", dt.float32, (c(1),), scope=n.Scope.LOCAL)
        acc = loop(k, A.shape[1], store(L, (0,), binop(ADD, load(L, 0), load(A, tx, k))))
        parts = ([store(L, (0,), c(0.0, dt.float32))] if init else []) + \
            [acc, store(B, (tx,), load(L, 0))]
        return bound(tx, A.shape[0], "threadIdx.x", n.Allocate(L, seq(*parts)))
    return kernel("local", [("A", "float32", 2)], [("B", "float32", 1)], body)


def test_local_buffer_is_private_per_thread():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros(3, np.float32)
    run_lowered(local_accumulator(True), [a], [out], [])
    np.testing.assert_array_equal(out, a.sum(axis=1))
    # without an init every thread sees a fresh (poisoned) buffer, not its neighbour's sum
    run_lowered(local_accumulator(False), [a], [out], [])
    assert np.isnan(out).all()


def test_let_select_and_scalar_and_stride_bindings():
    """out[i] = (A[i] * alpha if i < cut else -1) with cut a LetStmt of a stride binding."""
    alpha = n.var("alpha", dt.float32)
    sv = n.var("sA")
    cut, i = n.var("cut"), n.var("i")
    A = n.Buffer("A", dt.float32, (n.var("len"),), strides=(sv,), param=True)
    B = n.Buffer("B", dt.float32, A.shape, param=True)
    val = n.Select(dt.float32, mk.lt(i, cut), binop(MUL, load(A, i), alpha), c(-1.0, dt.float32))
    body = n.LetStmt(cut, mk.add(sv, 1), loop(i, A.shape[0], store(B, (i,), val)))
    f = n.LoweredFunc("sel", (A,), (B,), (A.shape[0], sv, alpha), body,
                      bindings=(n.Binding(n.BindingKind.SHAPE, 0, 0), n.Binding(n.BindingKind.STRIDE, 0, 0),
                                n.Binding(n.BindingKind.SCALAR, 0)))
    a = np.arange(20, dtype=np.float32)[::2]     # stride 2 elements -> cut = 3
    out = np.zeros(10, np.float32)
    run_lowered(f, [a], [out], [0.5])
    ref = np.where(np.arange(10) < 3, a * np.float32(0.5), -1).astype(np.float32)
    np.testing.assert_array_equal(out, ref)


def test_select_evaluates_both_sides():
    """Select is eager (like a hardware select), so an unguarded load in it is caught."""
    def body(A, B):
        i = n.var("i")
        nn = A.shape[0]
        nxt = load(A, mk.add(i, 1))
        val = n.Select(dt.float32, mk.lt(mk.add(i, 1), nn), nxt, c(0.0, dt.float32))
        return loop(i, nn, store(B, (i,), val))
    f = kernel("sel2", [("A", "float32", 1)], [("B", "float32", 1)], body)
    with pytest.raises(OutOfBounds):
        run_lowered(f, [np.ones(3, np.float32)], [np.zeros(3, np.float32)], [])


def test_deep_loop_nest_and_deep_expression():
    """21 nested loops exceed Python's 20 static blocks; a 300-op chain its parser depth."""
    def body(A, B):
        vs = [n.var(f"l{k}") for k in range(21)]
        val = load(A, 0)
        for _ in range(300):
            val = binop(ADD, val, c(1.0, dt.float64))
        s = store(B, (vs[-1],), binop(ADD, load(B, vs[-1]), val))
        for k, v in reversed(list(enumerate(vs))):
            s = loop(v, 2 if k % 10 == 0 else 1, s)
        return s
    f = kernel("deep", [("A", "float64", 1)], [("B", "float64", 1)], body)
    out = np.zeros(2)
    run_lowered(f, [np.array([1.0])], [out], [])
    np.testing.assert_array_equal(out, [301.0 * 4, 301.0 * 4])
    assert "def deep_part" in python_source(f)


def test_program_is_cached_and_codegen_errors_are_internal():
    f = copy2d()
    assert program(f) is program(f)
    i = n.var("i")
    A = n.Buffer("A", dt.float32, (c(4),), param=True)
    bad = n.LoweredFunc("bad", (A,), (), (), store(A, (i,), c(0.0, dt.float32)))
    with pytest.raises(InternalCompilerError, match="variable 'i'"):
        python_source(bad)
    T = n.Buffer("T", dt.float32, (c(4),))
    bad2 = n.LoweredFunc("bad2", (A,), (), (), loop(i, 4, store(T, (i,), c(0.0, dt.float32))))
    with pytest.raises(InternalCompilerError, match="outside its allocation"):
        python_source(bad2)


def test_argument_checks():
    f = copy2d()
    with pytest.raises(InternalCompilerError, match="dtype"):
        run_lowered(f, [np.ones((2, 2))], [np.ones((2, 2), np.float32)], [])
    with pytest.raises(InternalCompilerError, match="dimensions"):
        run_lowered(f, [np.ones(2, np.float32)], [np.ones((2, 2), np.float32)], [])
    with pytest.raises(InternalCompilerError, match="read-only"):
        run_lowered(f, [np.ones((2, 2), np.float32)], [np.broadcast_to(np.float32(0), (2, 2))], [])
    i = n.var("i")
    A = n.Buffer("A", dt.float32, (c(4),), param=True)
    fixed = n.LoweredFunc("fixed", (A,), (), (), loop(i, 4, store(A, (i,), c(0.0, dt.float32))))
    with pytest.raises(InternalCompilerError, match=r"shape \(3,\) but the lowered IR expects \(4,\)"):
        run_lowered(fixed, [], [], []) if False else run_lowered(
            n.LoweredFunc("fixed", (), (A,), (), fixed.body), [], [np.zeros(3, np.float32)], [])


def test_else_branch_loop_min_and_int32_loop_var():
    """for i in [2, n): out[i] = A[i] if i % 2 == 0 else -A[i]; i is an int32 variable."""
    def body(A, B):
        i = n.var("i", dt.int32)
        ix = n.Cast(dt.int64, i)
        even = mk.eq(mk.mod(i, n.const(2, dt.int32)), n.const(0, dt.int32))
        st = n.IfThenElse(even, store(B, (ix,), load(A, ix)),
                          store(B, (ix,), n.Unary(dt.float64, n.UnOp.NEG, load(A, ix))))
        return n.For(i, n.const(2, dt.int32), n.Cast(dt.int32, mk.sub(A.shape[0], 2)),
                     F.UNROLLED, n.Seq((n.Evaluate(load(A, ix)), st)))
    f = kernel("alt", [("A", "float64", 1)], [("B", "float64", 1)], body)
    a = np.arange(7.0)
    out = np.zeros(7)
    run_lowered(f, [a], [out], [])
    np.testing.assert_array_equal(out, [0, 0, 2, -3, 4, -5, 6])
    src = python_source(f)
    assert "else:" in src and "# unrolled" in src
