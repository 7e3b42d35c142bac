"""The numpy reference backend on hand-built stage graphs (numpy float64 as the oracle)."""
import numpy as np
import pytest

from kdsl import dtypes as dt
from kdsl.backends import numpy_backend as nb
from kdsl.backends.numpy_backend import NumpyBackend, run_graph
from kdsl.numerics.numpy_eval import round_bf16
from kdsl.backends.protocol import CompileRequest
from kdsl.ir import nodes as n

from handgraph import Builder, argmax_combiner, combiner, read, sum_


def elementwise(op_builder, dtypes, nd=1):
    """out[i] = op(A[i], B[i]) for inputs of ``dtypes``."""
    b = Builder()
    ins = [b.input(f"X{k}", ("n",), d) for k, d in enumerate(dtypes)]
    i = b.axis("i", b.dim("n"))
    return b.graph(b.compute("C", [i], op_builder(*[read(t, i) for t in ins])))


def run(g, *arrays, scalars=()):
    outs = [np.empty([int(a.shape[0]) for a in arrays[:1]] if not t.shape or True else (),
                     t.dtype.np) for t in g.outputs]
    run_graph(g, list(arrays), outs, list(scalars))
    return outs[0] if len(outs) == 1 else outs


@pytest.mark.parametrize("d", ["float16", "float32", "float64"])
def test_float_arith_rounds_like_numpy(d):
    D = dt.as_dtype(d)
    g = elementwise(lambda a, b: n.Binary(D, n.BinOp.DIV, n.Binary(D, n.BinOp.MUL, a, b),
                                          n.Binary(D, n.BinOp.ADD, a, b)), [D, D])
    a, b = np.random.rand(1000).astype(d) + 0.5, np.random.rand(1000).astype(d) + 0.5
    np.testing.assert_array_equal(run(g, a, b), (a * b) / (a + b))


def test_int_semantics():
    I8 = dt.int8
    g = elementwise(lambda a, b: n.Binary(I8, n.BinOp.ADD, a, b), [I8, I8])
    a = np.array([127, -128, 5], np.int8)
    np.testing.assert_array_equal(run(g, a, a), [-2, 0, 10])    # wraps
    I32 = dt.int32
    a = np.array([7, -7, 7, -7, 5], np.int32)
    b = np.array([2, 2, -2, -2, 0], np.int32)
    fd = elementwise(lambda x, y: n.Binary(I32, n.BinOp.FLOORDIV, x, y), [I32, I32])
    md = elementwise(lambda x, y: n.Binary(I32, n.BinOp.MOD, x, y), [I32, I32])
    np.testing.assert_array_equal(run(fd, a, b), [3, -4, -4, 3, 0])   # floor; /0 -> 0
    np.testing.assert_array_equal(run(md, a, b), [1, 1, -1, -1, 0])


def test_min_max_nan_and_casts():
    F = dt.float32
    g = elementwise(lambda a, b: n.Binary(F, n.BinOp.MAX, a, b), [F, F])
    a = np.array([1, np.nan, 3], np.float32)
    b = np.array([np.nan, 2, 1], np.float32)
    assert np.isnan(run(g, a, b)[:2]).all() and run(g, a, b)[2] == 3
    c = elementwise(lambda a: n.Cast(dt.int32, a), [dt.float64])
    np.testing.assert_array_equal(run(c, np.array([2.7, -2.7, 0.5])), [2, -2, 0])
    bo = elementwise(lambda a: n.Cast(dt.bool_, a), [dt.float64])
    np.testing.assert_array_equal(run(bo, np.array([0.0, -0.5])), [False, True])


def test_unary_math_and_erf():
    import math
    F = dt.float64
    for op, ref in [(n.UnOp.EXP, np.exp), (n.UnOp.SQRT, np.sqrt), (n.UnOp.TANH, np.tanh),
                    (n.UnOp.RSQRT, lambda x: 1 / np.sqrt(x)),
                    (n.UnOp.SIGMOID, lambda x: 1 / (1 + np.exp(-x))),
                    (n.UnOp.ERF, np.vectorize(math.erf))]:
        g = elementwise(lambda a: n.Unary(F, op, a), [F])
        x = np.random.rand(50) + 0.1
        np.testing.assert_allclose(run(g, x), ref(x), rtol=1e-14)


def test_bfloat16_rounding():
    x = np.array([1.0, 1.00390625, 1.01171875, 3.0e38, np.inf, np.nan], np.float32)
    r = round_bf16(x)
    assert r[0] == 1.0 and r[1] == 1.0 and r[2] == np.float32(1.015625)   # ties to even
    assert np.isinf(r[3]) or r[3] > 3e38
    assert np.isinf(r[4]) and np.isnan(r[5])
    assert ((r.view(np.uint32) & 0xFFFF) == 0)[:5].all()


def test_select_masks_out_of_range_reads():
    """C[i] = A[i + 1] if i + 1 < n else 0: the side not taken would read past the end.

    Tracing clamps that read into range (kdsl.frontend.access); a read out of range that
    no check caught is a kdsl bug, reported as one (numpy would wrap negative indices)."""
    from kdsl.errors import InternalCompilerError
    from kdsl.frontend.access import check_accesses

    def graph():
        b = Builder()
        A = b.input("A", ("n",))
        N = b.dim("n")
        i = b.axis("i", N)
        ip1 = n.Binary(dt.int64, n.BinOp.ADD, i.var, n.const(1))
        body = n.Select(dt.float64, n.Compare(dt.bool_, n.CmpOp.LT, ip1, N), read(A, ip1),
                        n.const(0.0, dt.float64))
        return b.graph(b.compute("C", [i], body))
    a = np.arange(5.0)
    with pytest.raises(InternalCompilerError, match="out-of-range read of tensor A"):
        run(graph(), a)
    g = graph()
    check_accesses(g)
    assert not g.constraints and not g.data_checks   # proven under the condition: clamped
    np.testing.assert_array_equal(run(g, a), [1, 2, 3, 4, 0])


def matmul_graph(d=dt.float32):
    b = Builder("matmul")
    A, B = b.input("A", ("n", "k"), d), b.input("B", ("k", "m"), d)
    i, j, k = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    body = sum_(n.Binary(d, n.BinOp.MUL, read(A, i, k), read(B, k, j)), [k])
    return b.graph(b.compute("C", [i, j], body, [k]))


def test_matmul_512_chunked():
    g = matmul_graph(dt.float64)
    a, b = np.random.rand(512, 512), np.random.rand(512, 512)
    out = np.empty((512, 512))
    run_graph(g, [a, b], [out], [])
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)


def test_reduce_axis_chunking(monkeypatch):
    """Budget so small that rows and the reduce axis are both split: results unchanged."""
    monkeypatch.setattr(nb, "BUDGET_BYTES", 8 * 64)
    g = matmul_graph(dt.float64)
    a, b = np.random.rand(9, 300), np.random.rand(300, 7)
    out = np.empty((9, 7))
    run_graph(g, [a, b], [out], [])
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    # argmax with a split reduce axis keeps the first maximum
    g = argmax_graph()
    x = np.random.randint(0, 5, size=(4, 333)).astype(np.float32)
    out = np.empty(4, np.int64)
    run_graph(g, [x], [out], [])
    np.testing.assert_array_equal(out, x.argmax(1))


def argmax_graph():
    b = Builder("argmax")
    A = b.input("A", ("n", "m"), dt.float32)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    comb = argmax_combiner(dt.float32)
    body = n.Reduce(dt.int64, comb, (k.var, read(A, i, k)), (k,), None, 0)
    return b.graph(b.compute("B", [i], body, [k]))


def test_generic_combiners_argmax_and_product():
    g = argmax_graph()
    x = np.random.randint(0, 4, size=(6, 37)).astype(np.float32)   # many ties
    out = np.empty(6, np.int64)
    run_graph(g, [x], [out], [])
    np.testing.assert_array_equal(out, x.argmax(1))
    b = Builder("rowprod")
    A = b.input("A", ("n", "m"))
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    prod = combiner("product", dt.float64, n.BinOp.MUL, 1.0)   # not a native name
    g = b.graph(b.compute("P", [i], n.Reduce(dt.float64, prod, (read(A, i, k),), (k,)), [k]))
    x = np.random.rand(5, 13) + 0.5
    out = np.empty(5)
    run_graph(g, [x], [out], [])
    np.testing.assert_allclose(out, x.prod(1), rtol=1e-13)


def test_conditional_reduce_scalar_stage_and_empty():
    """sum of A[k] where A[k] > 0.5, a 0-d output; and an empty reduction gives the identity."""
    b = Builder()
    A = b.input("A", ("n",))
    k = b.raxis("k", b.dim("n"))
    cond = n.Compare(dt.bool_, n.CmpOp.GT, read(A, k), n.const(0.5, dt.float64))
    red = n.Reduce(dt.float64, combiner("sum", dt.float64, n.BinOp.ADD, 0.0), (read(A, k),),
                   (k,), cond)
    g = b.graph(b.compute("S", [], red, [k]))
    x = np.random.rand(1001)
    out = np.empty(())
    run_graph(g, [x], [out], [])
    np.testing.assert_allclose(out, x[x > 0.5].sum())
    run_graph(g, [np.empty(0)], [out], [])
    assert out == 0


def test_multistage_softmax_strided_input_and_int_sum():
    b = Builder("softmax")
    X = b.input("X", ("n", "m"), contiguous=False)
    N, M = b.dim("n"), b.dim("m")
    F = dt.float64
    i, k = b.axis("i", N), b.raxis("k", M)
    mx = b.compute("mx", [i], n.Reduce(F, combiner("max", F, n.BinOp.MAX, float("-inf")),
                                       (read(X, i, k),), (k,)), [k])
    i2, j2 = b.axis("i", N), b.axis("j", M)
    e = b.compute("e", [i2, j2], n.Unary(F, n.UnOp.EXP, n.Binary(
        F, n.BinOp.SUB, read(X, i2, j2), read(mx, i2))))
    i3, k3 = b.axis("i", N), b.raxis("k", M)
    s = b.compute("s", [i3], sum_(read(e, i3, k3), [k3]), [k3])
    i4, j4 = b.axis("i", N), b.axis("j", M)
    y = b.compute("y", [i4, j4], n.Binary(F, n.BinOp.DIV, read(e, i4, j4), read(s, i4)))
    g = b.graph(y)
    x = np.random.rand(20, 16)[::2, ::-1]
    out = np.empty((10, 16))
    run_graph(g, [x], [out], [])
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-13)


def test_backend_object_protocol():
    be = NumpyBackend()
    g = matmul_graph()
    req = CompileRequest(g, None, None)
    assert be.spec.name == "numpy" and be.spec.device == "host"
    assert be.schedule(None, []) is None
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    o = be.empty((3, 2), dt.float32)
    be.compile(req)([a, b], [o], [])
    np.testing.assert_array_equal(o, np.full((3, 2), 4.0))
    text = be.source(req)
    assert "C" in text and "A" in text
    assert be.accepts(a) and not be.accepts([1.0])


def test_scalar_params_and_float16_output():
    b = Builder()
    A = b.input("A", ("n",), dt.float16)
    s = b.scalar("s", dt.float64)
    i = b.axis("i", b.dim("n"))
    body = n.Binary(dt.float16, n.BinOp.MUL, read(A, i), n.Cast(dt.float16, s))
    g = b.graph(b.compute("B", [i], body))
    a = np.random.rand(100).astype(np.float16)
    out = np.empty(100, np.float16)
    run_graph(g, [a], [out], [0.3])
    np.testing.assert_array_equal(out, a * np.float16(0.3))
