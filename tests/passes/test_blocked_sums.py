"""blocked_sums: the printed IR it produces, where it must not fire, and that the blocked loop
IR computes the numpy result in the bounds-checking interpreter (block size shrunk so that
small shapes cross many blocks; 0 and 1 sizes, sizes that do not divide the block or tile),
with infinities and NaNs giving numpy's answer and float32 sums no longer saturating."""
import textwrap

import numpy as np
import pytest

from handgraph import Builder, combiner, read, sum_
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.verifier import verify
from kdsl.passes import blocked_sums as bs
from kdsl.gpu.pipeline import PIPELINE
from kdsl.passes.pipeline import SEQUENTIAL, lower
from kdsl.schedule import Schedule

F32, F64 = dt.float32, dt.float64


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 4 terms: every shape below crosses several blocks."""
    monkeypatch.setattr(bs, "BLOCK", 4)


def rowsum_graph(dtype=F32):
    b = Builder("rowsum")
    A = b.input("A", ("n", "m"), dtype)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    return b.graph(b.compute("B", [i], sum_(read(A, i, k), [k]), [k]))


def fullsum_graph(dtype=F32):
    b = Builder("fullsum")
    A = b.input("A", ("n", "m"), dtype)
    r, k = b.raxis("r", b.dim("n")), b.raxis("k", b.dim("m"))
    return b.graph(b.compute("S", [], sum_(read(A, r, k), [r, k]), [r, k]))


def reduce_graph(dtype, op, identity, name):
    b = Builder("red")
    A = b.input("A", ("n",), dtype)
    k = b.raxis("k", b.dim("n"))
    red = n.Reduce(dtype, combiner(name, dtype, op, identity), (read(A, k),), (k,))
    return b.graph(b.compute("S", [], red, [k]))


def test_pass_is_in_the_sequential_table_only():
    assert SEQUENTIAL.passes[SEQUENTIAL.index("blocked_sums")].fn is bs.blocked_sums
    assert "blocked_sums" not in PIPELINE.names()     # GPU form: sums accumulate like cuBLAS


def test_golden_row_sum():
    f = lower(Schedule(rowsum_graph()))
    verify(f)
    assert str(f) == textwrap.dedent("""\
        def rowsum(A: float32[n, m], B: float32[n]):
          for i in range(n):
            B[i] = 0.0f
            if m <= 1024:
              for k in range(m):
                B[i] = B[i] + A[i, k]
            else:
              allocate B.comp: float32[] local
              allocate B.acc: float32[] local
                B.comp[()] = 0.0f
                for k.blk in range(ceildiv(m, 1024)):
                  B.acc[()] = 0.0f
                  for k in range(k.blk*1024, k.blk*1024 + min(1024, m - k.blk*1024)):
                    B.acc[()] = B.acc[()] + A[i, k]
                  let B.t = B[i] + B.acc[()]
                  let B.e = select(abs(B[i]) >= abs(B.acc[()]), B[i] - B.t + B.acc[()], B.acc[()] - B.t + B[i])
                  B.comp[()] = select(abs(B.e) < float32(inf), B.comp[()] + B.e, B.comp[()])
                  B[i] = B.t
                B[i] = B[i] + B.comp[()]""")


def _column_schedule(s):
    """Column order: ``i.outer, k, i.inner`` (the output index uses a loop inside k)."""
    B = s["B"]
    io, ii = B.split(B.axes[0], factor=8)
    B.reorder(io, B.reduce_axes[0], ii)


def test_tile_accumulator_for_a_column_order():
    s = Schedule(rowsum_graph())
    _column_schedule(s)
    text = str(lower(s))
    assert "allocate B.acc: float32[8] local" in text and "allocate B.comp: float32[8] local" in text
    assert "B.acc[i.inner] = B.acc[i.inner] + A[i.outer*8 + i.inner, k]" in text
    # the flush (once per block) and the final fold of the compensation walk the same tile
    # loop under the output's guard
    lines = [ln.strip() for ln in text.splitlines()]
    flush = lines.index("let B.t = B[i.outer*8 + i.inner] + B.acc[i.inner]")
    assert lines[flush - 2:flush] == ["for i.inner in range(8):", "if i.outer*8 + i.inner < n:"]
    assert lines[-3:] == ["for i.inner in range(8):", "if i.outer*8 + i.inner < n:",
                          "B[i.outer*8 + i.inner] = B[i.outer*8 + i.inner] + B.comp[i.inner]"]


def test_nested_reduction_compensates_across_the_outer_loop():
    text = str(lower(Schedule(fullsum_graph())))
    # the compensation lives around the outer reduction loop; short rows (an (n, 2) array):
    # blocks of rows share one accumulator; long rows: the blocks cut the inner loop
    assert text.index("allocate S.comp") < text.index("if max(m, 1) <= 1024:")
    assert "for r.blk in range((n + (max(1024 // max(m, 1), 1) - 1)) // max(1024 // max(m, 1), 1)):" in text
    assert text.index("for r.blk in") < text.index("else:") < text.index("for k.blk in")
    assert text.rstrip().endswith("S[()] = S[()] + S.comp[()]")


def test_short_constant_inner_loop_widens_the_block_of_the_outer_one():
    b = Builder("w")
    A = b.input("A", ("n", 8), F32)
    r, k = b.raxis("r", b.dim("n")), b.raxis("k", 8)
    text = str(lower(Schedule(b.graph(b.compute("S", [], sum_(read(A, r, k), [r, k]), [r, k])))))
    assert "for r.blk in range(ceildiv(n, 128))" in text and "k.blk" not in text


@pytest.mark.parametrize("dtype,op,identity,name", [
    (dt.int32, n.BinOp.ADD, 0, "sum"), (F32, n.BinOp.MUL, 1.0, "prod"),
    (F32, n.BinOp.MAX, -np.inf, "max"), (F32, n.BinOp.MIN, np.inf, "min")])
def test_integer_sums_products_and_min_max_are_untouched(dtype, op, identity, name):
    f = lower(Schedule(reduce_graph(dtype, op, identity, name)))
    assert ".acc" not in str(f) and ".comp" not in str(f)


def test_short_sums_are_untouched():
    b = Builder("short")
    A = b.input("A", (1000,), F32)
    k = b.raxis("k", 1000)
    f = lower(Schedule(b.graph(b.compute("S", [], sum_(read(A, k), [k]), [k]))))
    assert ".acc" not in str(f)


def _loop(v, ext, body, kind=n.ForKind.SERIAL):
    return n.For(v, mk.as_expr(0), mk.as_expr(ext), kind, body)


def _func(body, ins, outs, scalars):
    return n.LoweredFunc("f", tuple(ins), tuple(outs), tuple(scalars), body)


def test_other_reads_of_the_accumulator_keep_the_sum_as_it_is():
    """``B`` read by another statement inside the loop (a running sum): not a plain sum."""
    m, k = n.var("m"), n.var("k")
    A = n.Buffer("A", F32, (m,), param=True)
    B = n.Buffer("B", F32, (mk.as_expr(1),), param=True)
    C = n.Buffer("C", F32, (m,), param=True)
    b0 = (mk.as_expr(0),)
    upd = n.Store(B, b0, n.Binary(F32, n.BinOp.ADD, n.Load(F32, B, b0), n.Load(F32, A, (k,))))
    body = _loop(k, m, n.Seq((upd, n.Store(C, (k,), n.Load(F32, B, b0)))))
    f = _func(body, [A], [B, C], [m])
    assert bs.blocked_sums(f) is f


def test_parallel_and_unknown_tile_loops_are_left_alone():
    m, k, j = n.var("m"), n.var("k"), n.var("j")
    A = n.Buffer("A", F32, (m, m), param=True)
    B = n.Buffer("B", F32, (m,), param=True)
    upd = n.Store(B, (j,), n.Binary(F32, n.BinOp.ADD, n.Load(F32, B, (j,)), n.Load(F32, A, (k, j))))
    f = _func(_loop(k, m, _loop(j, m, upd)), [A], [B], [m])       # tile of unknown size
    assert bs.blocked_sums(f) is f
    g = _func(_loop(k, m, _loop(j, m, upd), n.ForKind.PARALLEL), [A], [B], [m])
    assert bs.blocked_sums(g) is g


def _run(f, a, out_shape, dtype):
    out = np.zeros(out_shape, dtype)
    run_lowered(f, [a], [out], [])
    return out


@pytest.mark.parametrize("shape", [(3, 0), (0, 5), (1, 1), (2, 3), (3, 4), (5, 17), (2, 64)])
def test_blocked_row_and_column_sums_compute_the_sum(small_blocks, shape):
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 8, size=shape).astype(np.float32)    # exact in any order
    for sched in (None, _column_schedule):
        s = Schedule(rowsum_graph())
        if sched:
            sched(s)
        f = lower(s)
        assert ".acc" in str(f)
        np.testing.assert_array_equal(_run(f, a, shape[:1], np.float32), a.sum(axis=1))


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (3, 5), (9, 2), (4, 33)])
def test_blocked_full_sum_computes_the_sum(small_blocks, shape):
    a = np.random.default_rng(2).integers(-8, 8, size=shape).astype(np.float64)
    f = lower(Schedule(fullsum_graph(F64)))
    assert _run(f, a, (), np.float64)[()] == a.sum()


def test_float32_sum_no_longer_saturates(small_blocks):
    """Sequential float32: 2**24 + 1 == 2**24, so every later 1 is lost; blocks add them up."""
    a = np.ones((1, 2001), np.float32)
    a[0, 0] = 2.0 ** 24
    got = _run(lower(Schedule(rowsum_graph())), a, (1,), np.float32)[0]
    assert abs(float(got) - (2.0 ** 24 + 2000)) <= 4      # the first block may lose its 3 ones


@pytest.mark.parametrize("vals,want", [
    ([np.inf] + [1.0] * 9, np.inf), ([1.0] * 5 + [-np.inf] + [1.0] * 4, -np.inf),
    ([np.inf, 1.0, 2.0, 3.0, -np.inf, 1.0], np.nan), ([1.0, np.nan] + [2.0] * 7, np.nan),
    ([3e38] * 9, np.inf), ([3e38, 3e38, -3e38, -3e38, 1.0], np.inf)])
def test_infinities_and_nans_give_numpys_result(small_blocks, vals, want):
    a = np.array([vals], np.float32)
    got = _run(lower(Schedule(rowsum_graph())), a, (1,), np.float32)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(want) == np.isnan(got) and (np.isnan(want) or got == want)
        assert (np.isnan(np.sum(a)) and np.isnan(got)) or np.sum(a) == got


# ------------------------------------------------------------------ traced kernels, interpreter
def _kernels():
    import kdsl as kd

    @kd.kernel
    def total(x):
        return x.sum()

    @kd.kernel
    def mean(x):
        return x.mean()

    @kd.kernel
    def cols(x):
        return x.sum(axis=0)

    return total, mean, cols


def test_interp_sums_every_layout(small_blocks):
    total, mean, cols = _kernels()
    x = np.random.default_rng(3).integers(-9, 9, 301).astype(np.float32)   # exact sums
    for v in (x, x[::2], x[::-3], x[:300].reshape(100, 3)[:, 1], x[:0], x[:1]):
        assert total(v, backend="interp") == v.sum()
    assert mean(x[::2], backend="interp") == np.float32(x[::2].sum() / x[::2].size)
    a = x[:300].reshape(30, 10)
    for v in (a, a.T, a[::-1, ::2]):
        np.testing.assert_array_equal(cols(v, backend="interp"), v.sum(axis=0))


def test_interp_reproducer_does_not_saturate(small_blocks):
    """The issue's ``ones[::2]`` past 2**24, at small scale: one large first term."""
    total, mean, _ = _kernels()
    x = np.ones(4002, np.float32)
    x[0] = 2.0 ** 24
    for v in (x[::2], x[::-1]):
        assert abs(float(total(v, backend="interp")) - float(v.astype(np.float64).sum())) <= 4


@pytest.mark.parametrize("shape", [(7, 5), (13, 37), (4, 16), (0, 3), (1, 1)])
def test_lanes_around_a_short_inner_loop(small_blocks, shape):
    """Regression: a full sum in 8 vector lanes (``vectorize`` on its reduce axis), the lane
    guard ``r0.outer*8 + r0.inner < n`` under the rows: when blocks of rows share one
    accumulator, the flush runs outside the row loop and must not keep that guard."""
    import kdsl as kd
    k = kd.kernel(kd.schedule(None, vectorize="r0")(lambda a: a.sum()))
    a = np.random.default_rng(4).integers(-9, 9, size=shape).astype(np.float32)
    if min(shape) > 1:        # (size-1 axes are traced as constants: no loop to block)
        assert ".comp" in str(k.lower(a, backend="interp"))
    assert k(a, backend="interp") == a.sum()


def test_lane_tile_of_an_output_row_is_blocked():
    """Regression: ``sum.rf[i0, lane]`` (vectorize=8 on a row sum): the tile's bounds hold for
    every row i0 of the parallel loop around it, so its ragged lane guard does not stop the
    blocking (the ranges of the loops around the root are used)."""
    import kdsl as kd
    k = kd.kernel(kd.schedule(None, vectorize=8)(lambda a: a.sum(axis=1)))
    a = np.random.default_rng(5).integers(-9, 9, size=(3, 37)).astype(np.float32)
    assert "allocate sum.rf.acc: float32[8] local" in str(k.lower(a, backend="interp"))
    np.testing.assert_array_equal(k(a, backend="interp"), a.sum(axis=1))
