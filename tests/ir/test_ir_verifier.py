"""The loop-IR verifier: a valid function passes; each rule has a failing example."""
import pytest

from kdsl import dtypes as dt
from kdsl.errors import InternalCompilerError
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.verifier import verify, verify_expr

F32 = dt.float32
nv = n.var("n")
i, j = n.var("i"), n.var("j")
A = n.Buffer("A", F32, (nv,), param=True)
Bo = n.Buffer("B", F32, (nv,), param=True)
Z = n.const(0)


def loop(v, body, ext=nv, kind=n.ForKind.SERIAL, thread=None):
    return n.For(v, Z, mk.as_expr(ext), kind, body, thread)


def func(body, scalars=(nv,)):
    return n.LoweredFunc("f", (A,), (Bo,), scalars, body)


def load(buf, *idx):
    return n.Load(buf.dtype, buf, tuple(idx))


def copy(v=i):
    return n.Store(Bo, (v,), load(A, v))


def fails(body, match, scalars=(nv,)):
    with pytest.raises(InternalCompilerError, match=match) as info:
        verify(func(body, scalars))
    return str(info.value)


def test_valid_function_passes():
    T = n.Buffer("T", F32, (n.const(32),), scope=n.Scope.SHARED)
    x = n.var("x")
    body = loop(i, n.Allocate(T, loop(j, n.Seq((
        n.Store(T, (j,), load(A, i)), n.Barrier(),
        n.LetStmt(x, mk.add(i, j), n.IfThenElse(mk.lt(x, nv), n.Store(Bo, (i,), load(T, j)))),
    )), 32, n.ForKind.BOUND, n.ThreadTag.THREAD_X)), kind=n.ForKind.BOUND, thread=n.ThreadTag.BLOCK_X)
    verify(func(body))


def test_var_out_of_scope():
    text = fails(n.Seq((loop(i, copy()), copy())), "variable 'i' is used outside")
    assert "B[i] = A[i]" in text          # the offending statement is printed
    fails(copy(j), "variable 'j'", scalars=(nv,))
    fails(loop(i, copy(), ext=mk.add(i, 1)), "variable 'i'")   # extent is outside the loop
    x = n.var("x")
    fails(n.Seq((n.LetStmt(x, Z, n.Seq(())), copy(x))), "variable 'x'")


def test_rebinding_in_scope():
    fails(loop(i, loop(i, copy())), "bound again")


def test_index_count():
    fails(loop(i, n.Store(Bo, (i, i), load(A, i))), "2 indices for buffer 'B' of 1")
    fails(loop(i, n.Store(Bo, (i,), load(A))), "0 indices for buffer 'A'")


def test_dtype_mismatch():
    bad = n.Binary(F32, n.BinOp.ADD, load(A, i), n.const(1.0))
    text = fails(loop(i, n.Store(Bo, (i,), bad)), "dtype mismatch in \\+")
    assert "A[i] + 1.0" in text
    sel = n.Select(F32, mk.lt(i, 3), load(A, i), n.const(0.0))
    fails(loop(i, n.Store(Bo, (i,), sel)), "select")
    cmp_ = n.Compare(dt.bool_, n.CmpOp.LT, load(A, i), n.const(1.0))
    fails(loop(i, n.IfThenElse(cmp_, copy())), "dtype mismatch in <")
    fails(loop(i, n.Store(Bo, (i,), n.const(1.0))), "store of float64")
    fails(loop(i, n.IfThenElse(i, copy())), "if condition")


def test_graph_nodes_remain():
    t = n.TensorRead(F32, object(), (i,))
    fails(loop(i, n.Store(Bo, (i,), t)), "TensorRead remains")
    with pytest.raises(InternalCompilerError, match="Reduce remains"):
        verify_expr(n.Reduce(F32, None, (load(A, i),), ()))
    verify_expr(t, graph=True)


def test_store_to_input():
    fails(loop(i, n.Store(A, (i,), load(A, i))), "store to input buffer 'A'")


def test_buffer_outside_allocate():
    T = n.Buffer("T", F32, (nv,))
    fails(loop(i, n.Seq((n.Allocate(T, n.Store(T, (i,), load(A, i))), n.Store(Bo, (i,), load(T, i))))),
          "buffer 'T' is used outside its Allocate")
    other = n.Buffer("C", F32, (nv,), param=True)
    fails(loop(i, n.Store(other, (i,), load(A, i))), "not a parameter")


def test_thread_nesting():
    blk = lambda body: loop(j, body, 4, n.ForKind.BOUND, n.ThreadTag.BLOCK_X)  # noqa: E731
    thr = lambda v, body: loop(v, body, 4, n.ForKind.BOUND, n.ThreadTag.THREAD_X)  # noqa: E731
    # a block loop inside a thread loop is a user's schedule until device_kernels reports it
    # (ScheduleError); inside a DeviceKernel the GPU rules (kdsl.gpu.verify) reject it (tests/gpu_core)
    verify(func(thr(i, blk(copy()))))
    fails(loop(i, blk(copy()), 4, n.ForKind.BOUND, n.ThreadTag.BLOCK_X), "blockIdx.x nested inside another")
    verify(func(blk(thr(i, copy()))))
    # nested thread loops of one tag are one hardware index (GPU_PLAN's execution model)
    k = n.var("k")
    verify(func(blk(thr(i, thr(k, copy(k))))))


def test_shape_vars_must_be_scalars():
    fails(loop(i, copy()), "not among the function's scalars", scalars=())


def test_verify_expr_scope():
    verify_expr(mk.add(i, j))
    verify_expr(mk.add(i, j), scope={i, j})
    with pytest.raises(InternalCompilerError, match="'j'"):
        verify_expr(mk.add(i, j), scope={i})
