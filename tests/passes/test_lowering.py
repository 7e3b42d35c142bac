"""Every schedule primitive lowered and executed by the loop-IR interpreter vs numpy (float64)."""
import numpy as np
import pytest

from handgraph import Builder, combiner, matmul_graph, read, rowsum_graph, sum_
from seed_schedules import bind_rows, cross_thread, rfactor_only, split_only
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.errors import ScheduleError
from kdsl.ir import nodes as n
from kdsl.gpu.pipeline import GPU_SEQUENTIAL
from kdsl.passes.pipeline import lower
from kdsl.schedule import Schedule

RNG = np.random.default_rng(0)


def conv_graph():
    b = Builder("conv")
    I = b.input("I", ("n", "m"), dt.float64)
    F = b.input("F", (3, 3), dt.float64)
    from kdsl.ir import make as mk
    i = b.axis("i", mk.sub(b.dim("n"), 2))
    j = b.axis("j", mk.sub(b.dim("m"), 2))
    di, dj = b.raxis("di", 3), b.raxis("dj", 3)
    prod = n.Binary(dt.float64, n.BinOp.MUL, read(I, mk.add(i.var, di.var), mk.add(j.var, dj.var)), read(F, di, dj))
    return b.graph(b.compute("O", [i, j], sum_(prod, [di, dj]), [di, dj]))


def run(g, sched_fn, args, out_shapes, out_dtypes=None, pipeline=None):
    s = Schedule(g)
    sched_fn(s)
    f = lower(s, pipeline=pipeline)
    outs = [np.zeros(sh, (out_dtypes or [np.float32] * len(out_shapes))[k]) for k, sh in enumerate(out_shapes)]
    run_lowered(f, list(args), outs, [])
    return outs, f


SHAPES = [(0, 3), (1, 1), (3, 0), (5, 7), (33, 17), (64, 48)]


def _rfactor_parallel_chunks(s):
    B = s["B"]
    ko, _ = B.split(B.reduce_axes[0], nparts=4)
    BF = s.rfactor(B, ko, factor_axis=1)
    BF.parallel(BF.axes[1])


def _reorder_reduce_outside(s):
    B = s["B"]
    io, ii = B.split(B.axes[0], factor=4)
    B.reorder(io, B.reduce_axes[0], ii)
    B.vectorize(ii)


SCHEDULES = [lambda s: None, split_only, rfactor_only, cross_thread, bind_rows, _rfactor_parallel_chunks,
             _reorder_reduce_outside]


@pytest.mark.parametrize("sched", SCHEDULES, ids=lambda f: getattr(f, "__name__", "default"))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("view", ["contig", "strided"])
def test_rowsum_schedules(sched, shape, view):
    a = RNG.random(shape).astype(np.float32)
    g = rowsum_graph(contig=(view == "contig"))
    if view == "strided":
        a = np.asfortranarray(RNG.random((shape[0], shape[1] * 2)).astype(np.float32))[::-1, ::2]
    (out,), _ = run(g, sched, [a], [(a.shape[0],)])
    np.testing.assert_allclose(out, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def _conv_split(s):
    O = s["O"]
    io, ii = O.split(O.axes[0], factor=4)
    jo, ji = O.split(O.axes[1], factor=5)
    O.reorder(io, jo, ii, ji)
    O.unroll(O.reduce_axes[1])


def _conv_fuse_parallel(s):
    O = s["O"]
    f = O.fuse(O.axes[0], O.axes[1])
    fo, fi = O.split(f, factor=7)
    O.parallel(fo)


@pytest.mark.parametrize("sched", [lambda s: None, _conv_split, _conv_fuse_parallel])
@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (4, 9), (13, 11)])
def test_conv2d_reduction(sched, shape):
    I = RNG.random(shape)
    F = RNG.random((3, 3))
    (out,), _ = run(conv_graph(), sched, [I, F], [(shape[0] - 2, shape[1] - 2)], [np.float64])
    ref = np.zeros((shape[0] - 2, shape[1] - 2))
    for di in range(3):
        for dj in range(3):
            ref += I[di:di + shape[0] - 2, dj:dj + shape[1] - 2] * F[di, dj]
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def _mm_shared(s):
    C = s["C"]
    AA = s.cache_read("A", "shared", [C])
    BB = s.cache_read("B", "shared", [C])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    ko, ki = C.split(C.reduce_axes[0], factor=4)
    C.reorder(io, jo, ko, ii, ji, ki)
    C.bind(io, "blockIdx.y")
    C.bind(jo, "blockIdx.x")
    AA.compute_at(C, ko)
    BB.compute_at(C, ko)
    AA.double_buffer()


def _mm_cache_write(s):
    C = s["C"]
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 4, 4)
    CL.compute_at(C, jo)
    ko, ki = CL.split(CL.reduce_axes[0], factor=3)


def _mm_packed(s):
    """The cpu GEMM recipe: K blocks by rfactor, a local tile per row block, B packed per K block.

    The packed copy of B is read by C.rf but attached to a loop of C (C reads C.rf).
    """
    C = s["C"]
    ko, _ = C.split(C.reduce_axes[0], factor=3)
    rf = s.rfactor(C, ko)
    (kv,) = C.reduce_axes
    io, ii = C.split(C.axes[0], factor=2)
    ioo, ioi = C.split(io, factor=2)
    jo, ji = C.split(C.axes[1], factor=4)
    C.reorder(ioo, jo, kv, ioi, ii, ji)
    C.fuse(ioo, jo)
    rf.compute_at(C, ioi)
    rko, ri, rj = rf.axes
    rf.reorder(rko, rf.reduce_axes[0], ri, rj)
    BP = s.cache_read("B", "local", [rf])
    BP.compute_at(C, kv)


def _mm_panels_root(s):
    s.pack("B", [s["C"]], axis=1, factor=3)


def _mm_panels_at(s):
    """B in panels of 3 columns, copied per K block at C's K-block loop (the cpu GEMM layout)."""
    C = s["C"]
    ko, _ = C.split(C.reduce_axes[0], factor=4)
    rf = s.rfactor(C, ko)
    (kv,) = C.reduce_axes
    jo, ji = C.split(C.axes[1], factor=3)
    C.reorder(kv, C.axes[0], jo, ji)
    rf.compute_at(C, jo)
    BP = s.pack("B", [rf], axis=-1, factor=3)
    BP.compute_at(C, kv)


def _mm_vthread(s):
    C = s["C"]
    io, ii = C.split(C.axes[0], nparts=2)
    C.bind(io, "vthread.x")
    C.unroll(C.reduce_axes[0])


@pytest.mark.parametrize("sched", [lambda s: None, _mm_shared, _mm_cache_write, _mm_vthread, _mm_packed,
                                   _mm_panels_root, _mm_panels_at])
@pytest.mark.parametrize("nkm", [(1, 1, 1), (0, 3, 2), (5, 0, 3), (9, 7, 10), (16, 8, 16), (11, 13, 9)])
def test_matmul_schedules(sched, nkm):
    nn, kk, mm = nkm
    A, B = RNG.random((nn, kk)).astype(np.float32), RNG.random((kk, mm)).astype(np.float32)
    (out,), f = run(matmul_graph(), sched, [A, B], [(nn, mm)])
    np.testing.assert_allclose(out, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_shared_cache_is_allocated_inside_block_loops():
    (_,), f = run(matmul_graph(), _mm_shared, [np.ones((8, 8), np.float32)] * 2, [(8, 8)], pipeline=GPU_SEQUENTIAL)
    text = str(f)
    # A.shared is double-buffered: a ring of two [8, 4] tiles (the GPU layer's software_pipeline pass)
    assert "allocate A.shared: float32[2, 8, 4] shared, stages=2" in text
    assert "allocate B.shared: float32[4, 8] shared" in text
    assert "bound blockIdx.y" in text


def elementwise_chain_graph():
    """T = A * 2 (an intermediate stage), O[i] = T[i] + 1."""
    b = Builder("chain")
    A = b.input("A", ("n",), dt.float64)
    i = b.axis("i", b.dim("n"))
    T = b.compute("T", [i], n.Binary(dt.float64, n.BinOp.MUL, read(A, i), n.const(2.0, dt.float64)))
    j = b.axis("j", b.dim("n"))
    O = b.compute("O", [j], n.Binary(dt.float64, n.BinOp.ADD, read(T, j), n.const(1.0, dt.float64)))
    return b.graph(O)


def _inline(s):
    s["T"].compute_inline()


def _producer_at(s):
    O = s["O"]
    jo, ji = O.split(O.axes[0], factor=4)
    s["T"].compute_at(O, jo)


def _consumer_at(s):
    T = s["T"]
    to, ti = T.split(T.axes[0], factor=3)
    s["O"].compute_at(T, to)


@pytest.mark.parametrize("sched", [lambda s: None, _inline, _producer_at, _consumer_at])
@pytest.mark.parametrize("size", [0, 1, 7, 12])
def test_elementwise_placement(sched, size):
    a = RNG.random(size)
    (out,), f = run(elementwise_chain_graph(), sched, [a], [(size,)], [np.float64])
    np.testing.assert_allclose(out, a * 2 + 1)


def test_inline_removes_buffer():
    (_,), f = run(elementwise_chain_graph(), _inline, [np.ones(3)], [(3,)], [np.float64])
    assert "allocate" not in str(f)


def commutative_argmax(dtype):
    """(index, value): take the right pair if its value is larger, or equal with a smaller index."""
    from kdsl.ir import make as mk
    il, vl, ir_, vr = n.var("il"), n.Var(dtype, "vl"), n.var("ir"), n.Var(dtype, "vr")
    take = mk.binary(n.BinOp.OR, mk.compare(n.CmpOp.GT, vr, vl),
                     mk.logical_and(mk.eq(vr, vl), mk.lt(ir_, il)))
    return n.Combiner("argmax", (il, vl), (ir_, vr), (mk.select(take, ir_, il), mk.select(take, vr, vl)),
                      (n.const(-1, dt.int64), n.const(float("-inf"), dtype)))


def argmax_graph():
    b = Builder("am")
    A = b.input("A", ("n", "m"), dt.float32)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    c = commutative_argmax(dt.float32)
    body = n.Reduce(dt.int64, c, (k.var, read(A, i, k)), (k,), None, 0)
    return b.graph(b.compute("B", [i], body, [k]))


@pytest.mark.parametrize("sched", [lambda s: None, rfactor_only, cross_thread])
@pytest.mark.parametrize("shape", [(1, 1), (4, 5), (9, 40)])
def test_argmax_multi_value(sched, shape):
    a = RNG.integers(0, 5, shape).astype(np.float32)  # ties on purpose
    (out,), _ = run(argmax_graph(), sched, [a], [(shape[0],)], [np.int64])
    np.testing.assert_array_equal(out, a.argmax(1))


def test_product_reducercross_thread():
    b = Builder("rowprod")
    A = b.input("A", ("n", "m"), dt.float64)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    c = combiner("product", dt.float64, n.BinOp.MUL, 1.0)
    g = b.graph(b.compute("B", [i], n.Reduce(dt.float64, c, (read(A, i, k),), (k,)), [k]))
    a = RNG.random((37, 23)) + 0.5
    (out,), _ = run(g, cross_thread, [a], [(37,)], [np.float64])
    np.testing.assert_allclose(out, a.prod(1))


def test_store_predicate_and_print():
    g = rowsum_graph()
    s = Schedule(g)
    cross_thread(s)
    text = str(lower(s))
    for piece in ["bound blockIdx.x", "bound threadIdx.y", "bound threadIdx.x", "allocate B.rf", "barrier",
                  "< n", "< m"]:
        assert piece in text, piece


# ------------------------------------------------------------------ errors
def test_errors_name_what_exists():
    s = Schedule(rowsum_graph())
    B = s["B"]
    with pytest.raises(ScheduleError, match="stages: B"):
        s["C"]
    with pytest.raises(ScheduleError, match="rfactor"):
        B.parallel(B.reduce_axes[0])
    ko, ki = B.split(B.reduce_axes[0], factor=4)
    with pytest.raises(ScheduleError, match="already split"):
        B.split(B.reduce_axes[0], factor=2)
    with pytest.raises(ScheduleError, match="k.outer, k.inner"):
        B.axis("k")
    with pytest.raises(ScheduleError, match="adjacent"):
        B.fuse(B.axes[0], ki)
    with pytest.raises(ScheduleError, match="positive int"):
        B.split(ki, factor=0)
    with pytest.raises(ScheduleError, match="thread tag"):
        B.bind(ki, "threadIdx.w")
    with pytest.raises(ScheduleError, match="blockIdx"):
        B.bind(ki, "blockIdx.x")


def test_compute_at_reader_outside_loop_is_an_error():
    s = Schedule(elementwise_chain_graph())
    O, T = s["O"], s["T"]
    jo, ji = O.split(O.axes[0], factor=4)
    T.compute_at(O, ji)
    assert "allocate T" in str(lower(s))  # legal: its only reader encloses it
    s2 = Schedule(matmul_graph())
    C = s2["C"]
    AA = s2.cache_read("A", "local", [C])
    BB = s2.cache_read("B", "local", [C])
    with pytest.raises(ScheduleError, match="neither reads"):
        AA.compute_at(BB, BB.axes[0])


def test_packed_operand_attached_to_a_later_stage():
    (_,), f = run(matmul_graph(), _mm_packed, [np.ones((8, 8), np.float32)] * 2, [(8, 8)])
    text = str(f)
    # the panel is the K block x column block that one iteration of C's kv loop reads
    assert "allocate B.local: float32[3, 4] local" in text
    assert text.index("allocate B.local") < text.index("allocate C.rf")


def test_pack_layout_and_errors():
    (_,), f = run(matmul_graph(), _mm_panels_at, [np.ones((8, 8), np.float32)] * 2, [(8, 8)])
    assert "allocate B.packed: float32[ceildiv(m, 3), 4, 3] local" in str(f)   # panels of 4x3
    s = Schedule(matmul_graph())
    with pytest.raises(ScheduleError, match="factor must be a positive int"):
        s.pack("B", [s["C"]], axis=1, factor=0)
    with pytest.raises(ScheduleError, match="has 2 axes"):
        s.pack("B", [s["C"]], axis=2, factor=4)
    s.cache_write(s["C"], "local")
    with pytest.raises(ScheduleError, match="stage C does not read B"):
        s.pack("B", [s["C"]], axis=1, factor=4)


def test_attach_outside_a_reader_of_a_later_stage_is_an_error():
    s = Schedule(matmul_graph())
    C = s["C"]
    CL = s.cache_write(C, "local")
    BB = s.cache_read("B", "local", [CL])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 4, 4)
    BB.compute_at(C, jo)          # C reads CL reads BB, but CL runs at the root
    with pytest.raises(ScheduleError, match="its reader C.local runs at the root, outside that loop") as ei:
        s.finish()                # reported when the schedule is finished, at the call's line
    assert "BB.compute_at(C, jo)" in str(ei.value)
    CL.compute_at(C, jo)          # with its reader inside the loop (attached later), it is legal
    assert "allocate B.local" in str(lower(s))


def test_compute_at_consumer_inside_reduction_is_an_error():
    s = Schedule(rowsum_graph())
    B = s["B"]
    with pytest.raises(ScheduleError, match="is a reduction"):
        B.compute_inline()
