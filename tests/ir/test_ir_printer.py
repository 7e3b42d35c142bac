"""Golden text of the IR printer: expressions, statements, functions, stage graphs."""
import textwrap

from kdsl import dtypes as dt
from kdsl.graph import Graph, Input, Stage, Tensor
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.printer import format_expr, format_func, format_graph, format_stmt

I0 = n.const(0)


def golden(text):
    return textwrap.dedent(text).strip("\n")


def rowsum_func():
    nv, mv, s0, s1 = n.var("n"), n.var("m"), n.var("A_s0"), n.var("A_s1")
    A = n.Buffer("A", dt.float32, (nv, mv), (s0, s1), param=True)
    B = n.Buffer("B", dt.float32, (nv,), param=True)
    io, ii = n.var("i.outer"), n.var("i.inner")
    idx = mk.add(mk.mul(io, 32), ii)
    guard = n.IfThenElse(mk.lt(idx, nv), n.Store(B, (idx,), n.const(0.0, dt.float32)))
    inner = n.For(ii, I0, n.const(32), n.ForKind.BOUND, guard, n.ThreadTag.THREAD_X)
    outer = n.For(io, I0, mk.ceildiv(nv, 32), n.ForKind.PARALLEL, inner)
    rf = n.Buffer("B.rf", dt.float32, (n.const(16), nv))
    k = n.var("k")
    rd = n.For(k, n.const(1), mv, n.ForKind.VECTORIZED,
               n.Store(rf, (n.const(0), k), n.Load(dt.float32, A, (k, k))))
    body = n.Seq((outer, n.Allocate(rf, rd, stages=2)))
    return n.LoweredFunc("rowsum", (A,), (B,), (nv, mv, s0, s1), body)


def test_function_golden():
    f = rowsum_func()
    assert format_func(f) == golden("""
        def rowsum(A: float32[n, m] strides (A_s0, A_s1), B: float32[n]):
          for i.outer in range(ceildiv(n, 32)):  # parallel
            for i.inner in range(32):  # bound threadIdx.x
              if i.outer*32 + i.inner < n:
                B[i.outer*32 + i.inner] = 0.0f
          allocate B.rf: float32[16, n] global, stages=2
            for k in range(1, m + 1):  # vectorized
              B.rf[0, k] = A[k, k]
    """)
    assert str(f) == format_func(f)


def test_scalar_params_listed_and_loop_kinds():
    x = n.Var(dt.float32, "alpha")
    nv = n.var("n")
    A = n.Buffer("A", dt.float32, (nv,), param=True)
    i = n.var("i")
    body = n.For(i, I0, nv, n.ForKind.UNROLLED,
                 n.Store(A, (i,), n.Binary(dt.float32, n.BinOp.MUL, n.Load(dt.float32, A, (i,)), x)))
    f = n.LoweredFunc("scale", (), (A,), (nv, x), body)
    assert format_func(f) == golden("""
        def scale(A: float32[n], alpha: float32):
          for i in range(n):  # unrolled
            A[i] = A[i]*alpha
    """)


def test_names_made_unique():
    i1, i2, i3 = n.var("i"), n.var("i"), n.var("i_1")
    A1 = n.Buffer("A", dt.float64, (n.const(4), n.const(4)))
    A2 = n.Buffer("A", dt.float64, (n.const(4),))
    st = n.Store(A1, (i1, i2), mk.cast(n.Load(dt.float64, A2, (i3,)), dt.float64))
    loop = n.For(i1, I0, n.const(4), n.ForKind.SERIAL,
                 n.For(i2, I0, n.const(4), n.ForKind.SERIAL,
                       n.For(i3, I0, n.const(4), n.ForKind.SERIAL, st)))
    text = format_stmt(n.Allocate(A1, n.Allocate(A2, loop)))
    assert text == golden("""
        allocate A: float64[4, 4] global
        allocate A_1: float64[4] global
          for i in range(4):
            for i_2 in range(4):
              for i_1 in range(4):
                A[i, i_2] = A_1[i_1]
    """)


def test_same_var_prints_same_name():
    i = n.var("i")
    e = mk.add(i, mk.mul(i, 2))
    assert format_expr(e) == "i + i*2"


def test_precedence_minimal_parens():
    a, b, c = n.var("a"), n.var("b"), n.var("c")
    B, fmt = n.BinOp, format_expr
    bin_ = lambda op, x, y: n.Binary(dt.index, op, x, y)  # noqa: E731
    assert fmt(bin_(B.MUL, bin_(B.ADD, a, b), c)) == "(a + b)*c"
    assert fmt(bin_(B.ADD, a, bin_(B.MUL, b, c))) == "a + b*c"
    assert fmt(bin_(B.SUB, a, bin_(B.SUB, b, c))) == "a - (b - c)"
    assert fmt(bin_(B.SUB, bin_(B.SUB, a, b), c)) == "a - b - c"
    assert fmt(bin_(B.FLOORDIV, a, bin_(B.MUL, b, c))) == "a // (b*c)"
    assert fmt(bin_(B.MUL, bin_(B.FLOORDIV, a, n.const(4)), n.const(8))) == "(a // 4)*8"
    assert fmt(bin_(B.MOD, bin_(B.ADD, a, b), c)) == "(a + b) % c"
    assert fmt(n.Unary(dt.index, n.UnOp.NEG, bin_(B.ADD, a, b))) == "-(a + b)"
    assert fmt(bin_(B.MUL, a, n.const(-1))) == "a*-1"
    assert fmt(bin_(B.POW, n.const(-2), a)) == "(-2)**a"
    assert fmt(bin_(B.MIN, bin_(B.ADD, a, b), c)) == "min(a + b, c)"
    assert fmt(bin_(B.AND, a, bin_(B.OR, b, c))) == "a & (b | c)"
    lt = mk.lt(a, b)
    both = n.Binary(dt.bool_, B.AND, lt, n.Unary(dt.bool_, n.UnOp.NOT, mk.eq(b, c)))
    assert fmt(both) == "a < b and not b == c"
    either = n.Binary(dt.bool_, B.OR, both, lt)
    assert fmt(n.Binary(dt.bool_, B.AND, either, lt)) == "(a < b and not b == c or a < b) and a < b"
    assert fmt(n.Compare(dt.bool_, n.CmpOp.EQ, lt, n.const(True))) == "(a < b) == True"
    assert fmt(n.Unary(dt.index, n.UnOp.NOT, a)) == "~a"


def test_constants_and_casts():
    fmt = format_expr
    assert fmt(n.const(3)) == "3"
    assert fmt(n.const(3, dt.int32)) == "int32(3)"
    assert fmt(n.const(1.0, dt.float32)) == "1.0f"
    assert fmt(n.const(1.5)) == "1.5"
    assert fmt(n.const(0.5, dt.float16)) == "0.5h"
    assert fmt(n.const(1.0, dt.bfloat16)) == "bfloat16(1.0)"
    assert fmt(n.const(float("-inf"), dt.float32)) == "float32(-inf)"
    assert fmt(n.const(True)) == "True"
    assert fmt(n.Cast(dt.int8, n.var("i"))) == "int8(i)"
    x = n.Var(dt.float32, "x")
    assert fmt(n.Unary(dt.float32, n.UnOp.EXP, x)) == "exp(x)"
    assert fmt(n.Unary(dt.bool_, n.UnOp.ISNAN, x)) == "isnan(x)"
    assert fmt(n.Select(dt.float32, mk.lt(x, n.const(0.0, dt.float32)), x,
                        n.const(0.0, dt.float32))) == "select(x < 0.0f, x, 0.0f)"


def test_statements():
    i, x = n.var("i"), n.var("x")
    S = n.Buffer("S", dt.float32, (n.const(8),), scope=n.Scope.SHARED)
    L = n.Buffer("acc", dt.float32, (), scope=n.Scope.LOCAL)
    store = n.Store(L, (), n.Load(dt.float32, S, (x,)))
    body = n.LetStmt(x, mk.add(i, 1), n.Seq((
        n.IfThenElse(mk.lt(x, 4), store,
                     n.IfThenElse(mk.lt(x, 6), n.Barrier(), n.Seq(()))),
        n.Intrinsic("wmma.load_a", (L, S, mk.mul(x, 2), 16, n.Scope.SHARED)),
        n.Evaluate(x),
    )))
    text = format_stmt(n.Allocate(S, n.Allocate(L, n.For(i, I0, n.const(3), n.ForKind.BOUND, body,
                                                           n.ThreadTag.BLOCK_Y))))
    assert text == golden("""
        allocate S: float32[8] shared
        allocate acc: float32[] local
          for i in range(3):  # bound blockIdx.y
            let x = i + 1
            if x < 4:
              acc[()] = S[x]
            elif x < 6:
              barrier(shared)
            else:
              pass
            wmma.load_a(acc, S, x*2, 16, shared)
            x
    """)


def _graph():
    nv, mv = n.var("n"), n.var("m")
    A = Tensor("A", (nv, mv), dt.float32, Input(0))
    i = n.IterVar(n.var("i"), n.Range(I0, nv))
    k = n.IterVar(n.var("k"), n.Range(I0, mv), n.IterKind.REDUCE)
    x, y = n.Var(dt.float32, "x"), n.Var(dt.float32, "y")
    comb = n.Combiner("sum", (x,), (y,), (n.Binary(dt.float32, n.BinOp.ADD, x, y),),
                      (n.const(0.0, dt.float32),))
    red = n.Reduce(dt.float32, comb, (n.TensorRead(dt.float32, A, (i.var, k.var)),), (k,))
    st = Stage("B", (i,), (k,), red, dt.float32)
    j = n.IterVar(n.var("i"), n.Range(I0, nv))
    two = n.Binary(dt.float32, n.BinOp.MUL, n.TensorRead(dt.float32, st.output, (j.var,)),
                   n.const(2.0, dt.float32))
    st2 = Stage("C", (j,), (), two, dt.float32, origin="mul")
    return Graph("g", (A,), [st, st2], (st2.output,)), red


def test_reduce_expr_and_graph():
    g, red = _graph()
    assert format_expr(red) == "sum(A[i, k], axis=[k])"
    assert format_graph(g) == golden("""
        graph g(A: float32[n, m]):
          B[i] = sum(A[i, k], axis=[k in 0..m])
          C[i_1] = B[i_1]*2.0f  # mul
          return C
    """)


def test_reduce_with_condition_and_offset_axis():
    i = n.var("i")
    k = n.IterVar(n.var("k"), n.Range(n.const(1), n.const(4)), n.IterKind.REDUCE)
    A = Tensor("A", (n.const(9),), dt.int64, Input(0))
    x, y = n.var("x"), n.var("y")
    comb = n.Combiner("max", (x,), (y,), (mk.max_(x, y),), (n.const(0),))
    red = n.Reduce(dt.int64, comb, (n.TensorRead(dt.int64, A, (mk.add(i, k.var),)),), (k,),
                   condition=mk.lt(k.var, i))
    from kdsl.ir.printer import ExprPrinter
    assert ExprPrinter(axis_ranges=True)(red) == "max(A[i + k], axis=[k in 1..5], where=k < i)"
