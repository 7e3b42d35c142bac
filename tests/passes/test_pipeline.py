"""The lowering pipeline: one golden printout per pass, the table-editing API, KDSL_DUMP=passes."""
import dataclasses

import numpy as np
import pytest

import kdsl as kd
from handgraph import Builder, matmul_graph, read, sum_
from pipeline_goldens import GOLDEN
from seed_schedules import bind_rows, cross_thread
from wmma_schedules import mm16_graph, wmma_one_warp
from kdsl import dtypes as dt
from kdsl.backends.interpreter import run_lowered
from kdsl.errors import InternalCompilerError
from kdsl.gpu.verify import verify as verify_gpu_form
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.gpu import pipeline as G
from kdsl.passes import pipeline as P
from kdsl.passes.state import LowerState
from kdsl.schedule import Schedule


def chain_graph():
    """U = A * 2 (inlined), T = U + 1 (attached at O's outer loop), O[j] = T[j] * 3."""
    b = Builder("chain")
    A = b.input("A", ("n",), dt.float64)
    i = b.axis("i", b.dim("n"))
    U = b.compute("U", [i], n.Binary(dt.float64, n.BinOp.MUL, read(A, i), n.const(2.0, dt.float64)))
    k = b.axis("k", b.dim("n"))
    T = b.compute("T", [k], n.Binary(dt.float64, n.BinOp.ADD, read(U, k), n.const(1.0, dt.float64)))
    j = b.axis("j", b.dim("n"))
    O = b.compute("O", [j], n.Binary(dt.float64, n.BinOp.MUL, read(T, j), n.const(3.0, dt.float64)))
    return b.graph(O)


def chain_schedule(s):
    s["U"].compute_inline()
    O = s["O"]
    jo, _ = O.split(O.axes[0], factor=4)
    s["T"].compute_at(O, jo)


def rowsum_graph():
    b = Builder("rowsum")
    A = b.input("A", ("n", "m"), dt.float32)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    return b.graph(b.compute("B", [i], sum_(read(A, i, k), [k]), [k]))


def rowsum_split(s):
    B = s["B"]
    B.split(B.reduce_axes[0], factor=8)


def chain_vthread(s):
    """O's tile of 8 per block split over vthread.x (2) and threadIdx.x (4)."""
    s["U"].compute_inline()
    s["T"].compute_inline()
    O = s["O"]
    bo, ji = O.split(O.axes[0], factor=8)
    vo, ti = O.split(ji, nparts=2)
    O.bind(bo, "blockIdx.x")
    O.bind(vo, "vthread.x")
    O.bind(ti, "threadIdx.x")


def mm_pipelined(s):
    """A 4x4 tile of C per block; A's 4x4 shared tile double-buffered over the K-tile loop."""
    C = s["C"]
    AA = s.cache_read("A", "shared", [C])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 4, 4)
    ko, ki = C.split(C.reduce_axes[0], factor=4)
    C.reorder(io, jo, ko, ii, ji, ki)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        C.bind(ax, tag)
    AA.compute_at(C, ko)
    AA.bind(AA.axes[0], "threadIdx.y")
    AA.bind(AA.axes[1], "threadIdx.x")
    AA.double_buffer()
def gpu_matmul_graph():
    from handgraph import matmul_graph
    return matmul_graph()


def mm_shared_tiles(s):
    """8x8 threads per block, one C element each; A and B tiles per K step of 8 copied to
    shared memory by the block's threads (the sync pass's barriers)."""
    C = s["C"]
    AA, BB = s.cache_read("A", "shared", [C]), s.cache_read("B", "shared", [C])
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    ko, ki = C.split(C.reduce_axes[0], factor=8)
    C.reorder(io, jo, ko, ii, ji, ki)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        C.bind(ax, tag)
    for X in (AA, BB):
        X.compute_at(C, ko)
        X.bind(X.axes[0], "threadIdx.y")
        X.bind(X.axes[1], "threadIdx.x")


def rows_cached(s):
    """One row of A per block, copied once into shared memory (a one-shot copy: async_copies)
    and summed by 32 threads across (a cross-thread reduction)."""
    B = s["B"]
    AA = s.cache_read("A", "shared", [B])
    B.bind(B.axes[0], "blockIdx.x")
    ko, ki = B.split(B.reduce_axes[0], factor=32)
    B.reorder(B.axes[0], ki, ko)
    B.bind(ki, "threadIdx.x")
    AA.compute_at(B, B.axes[0])
    o, t = AA.split(AA.axes[1], factor=32)
    AA.reorder(AA.axes[0], t, o)
    AA.bind(t, "threadIdx.x")


def _register_tiles(s, tile, per, pad=False):
    """C in ``tile`` x ``tile`` blocks of threads each accumulating ``per`` x ``per`` in
    C.local, BK 8, per-k slices of shared A and B tiles in registers: (the shared caches of A
    and B, C.local, the K-step loop their copies go under)."""
    C = s["C"]
    CL = s.cache_write(C, "local")
    AA, BB = (s.cache_read(t, "shared", [CL], pad=pad) for t in ("A", "B"))
    AL, BL = s.cache_read(AA, "local", [CL]), s.cache_read(BB, "local", [CL])
    by, bx, yi, xi = C.tile(C.axes[0], C.axes[1], tile, tile)
    ty, yi = C.split(yi, factor=per)
    tx, xi = C.split(xi, factor=per)
    C.reorder(by, bx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        C.bind(ax, tag)
    CL.compute_at(C, tx)
    ko, ki = CL.split(CL.reduce_axes[0], factor=8)
    CL.reorder(ko, ki, *CL.axes)
    AL.compute_at(CL, ki)
    BL.compute_at(CL, ki)
    return AA, BB, CL, ko


def mm_thread_tiles(s):
    """The seed-002 thread-tiling step scaled down: 32x32 block tiles, 8x8 threads of 4x4,
    BK 8; shared tiles relaxed over the threads and allocated at block level."""
    AA, BB, CL, ko = _register_tiles(s, 32, 4)
    for X in (AA, BB):
        X.compute_at(CL, ko)
        o, t = X.split(X.fuse(*X.axes), factor=64)
        y, x = X.split(t, factor=8)
        X.bind(y, "threadIdx.y")
        X.bind(x, "threadIdx.x")


def padded_matmul_graph():
    """matmul_graph with a ``sum`` combiner (what ``A @ B`` traces to): padded_compute's case."""
    b = Builder("mm")
    A = b.input("A", ("n", "k"), dt.float32)
    B = b.input("B", ("k", "m"), dt.float32)
    i, j, r = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    red = sum_(n.Binary(dt.float32, n.BinOp.MUL, read(A, i, r), read(B, r, j)), [r])
    red = dataclasses.replace(red, combiner=dataclasses.replace(red.combiner, kind=n.CombinerKind.SUM))
    return b.graph(b.compute("C", [i, j], red, [r]))


def mm_padded_tiles(s):
    """The default GEMM's structure scaled down: 8x8 block tiles, 4x4 threads of 2x2, BK 8;
    A and B through padded shared caches, copied by 16-byte vectors, double-buffered."""
    AA, BB, CL, ko = _register_tiles(s, 8, 2, pad=True)
    for X in (AA, BB):
        X.compute_at(CL, ko)
        r, c = X.axes
        c, v = X.split(c, factor=4)
        y, x = X.split(X.fuse(r, c), factor=4)
        X.bind(y, "threadIdx.y")
        X.bind(x, "threadIdx.x")
        X.vectorize(v)
        X.double_buffer()


def scan_graph():
    """``np.cumsum`` of a float32 vector, traced (the GPU tile scan's case)."""
    from kdsl.frontend.spec import TensorSpec
    from kdsl.frontend.trace import trace
    return trace(lambda x: np.cumsum(x), [TensorSpec(("n",), "float32")])


def scan_tiny_tiles(s):
    """The cuda default scan schedule with tiny tiles (32 threads x 2 rows) for 300 steps:
    block totals, their scan in one staged tile, the data's tiles."""
    import kdsl.backends.scan_schedules as ss
    from kdsl_cuda.schedules import schedule
    names = ("GPU_BLOCK_MIN", "GPU_TILE_THREADS", "GPU_TILE_ROWS", "GPU_ONE_TILE_BYTES")
    saved = {k: getattr(ss, k) for k in names}
    s.size_hints = {s.graph.params[0].shape[0]: (300, 300)}
    try:
        for k, v in zip(names, (4, 32, 2, 0)):
            setattr(ss, k, v)
        schedule(s, [])
    finally:
        for k, v in saved.items():
            setattr(ss, k, v)


def _chain():
    s = Schedule(chain_graph())
    chain_schedule(s)
    return s


def state_after(graph_fn, sched_fn, stop, pipeline=P.SEQUENTIAL):
    s = Schedule(graph_fn())
    sched_fn(s)
    return P.run_pipeline(LowerState(s), pipeline, stop_after=stop)


GOLDEN_CASES = {
    "placement": (chain_graph, chain_schedule, "placement"),
    "inline": (chain_graph, chain_schedule, "inline"),
    "bound_inference": (chain_graph, chain_schedule, "bound_inference"),
    "padded_compute": (padded_matmul_graph, mm_padded_tiles, "padded_compute"),
    "coalesced_fallbacks": (padded_matmul_graph, mm_padded_tiles, "coalesced_fallbacks"),
    "storage": (chain_graph, chain_schedule, "storage"),
    "loop_nests": (chain_graph, chain_schedule, "loop_nests"),
    "loop_nests_reduction": (rowsum_graph, rowsum_split, "loop_nests"),
    "loop_nests_cross_thread": (rowsum_graph, cross_thread, "loop_nests"),
    "tensorize": (mm16_graph, wmma_one_warp, "tensorize"),
    "simplify": (chain_graph, chain_schedule, "simplify"),
    "lower_cross_thread": (rowsum_graph, cross_thread, "lower_cross_thread"),
    "storage_gpu": (gpu_matmul_graph, mm_thread_tiles, "storage"),
    "sync": (gpu_matmul_graph, mm_shared_tiles, "sync"),
    "interior_blocks": (gpu_matmul_graph, mm_shared_tiles, "interior_blocks"),
    "full_thread_tiles": (gpu_matmul_graph, mm_shared_tiles, "full_thread_tiles"),
    "blocked_sums": (rowsum_graph, rowsum_split, "blocked_sums"),
    "device_kernels": (rowsum_graph, bind_rows, "device_kernels"),
    "shared_layout": (gpu_matmul_graph, mm_shared_tiles, "shared_layout"),
    "async_copies": (rowsum_graph, rows_cached, "async_copies"),
    "sequential_kernels": (rowsum_graph, bind_rows, "sequential_kernels"),
    "lower_async_copies": (chain_graph, chain_schedule, "lower_async_copies"),
    "pipeline_legality": (chain_graph, chain_schedule, "pipeline_legality"),
    "scan_legality": (chain_graph, chain_schedule, "scan_legality"),
    "software_pipeline": (matmul_graph, mm_pipelined, "software_pipeline"),
    "vthread": (chain_graph, chain_vthread, "vthread"),
    "scan_tiles": (scan_graph, scan_tiny_tiles, "scan_tiles"),
}
#: the table each golden case runs: GPU form; the GPU table plus the passes that undo GPU form; the
#: GPU passes as the sequential interpreter checks them (GPU_SEQUENTIAL); else the core's SEQUENTIAL
_UNDO = G.GPU_SEQUENTIAL.passes[G.GPU_SEQUENTIAL.index("sequential_kernels"):]
GOLDEN_TABLE = {"device_kernels": G.PIPELINE, "scan_tiles": G.PIPELINE, "shared_layout": G.PIPELINE, "async_copies": G.PIPELINE,
                "sequential_kernels": G.PIPELINE.append(*_UNDO),
                **{case: G.GPU_SEQUENTIAL for case in ("tensorize", "software_pipeline", "vthread", "sync",
                                                       "interior_blocks", "full_thread_tiles", "coalesced_fallbacks",
                                                       "pipeline_legality", "lower_async_copies", "storage_gpu")}}



def test_the_table_lists_every_pass_in_order():
    core = ("scan_legality", "placement", "inline", "bound_inference", "padded_compute", "storage", "loop_nests",
            "simplify")
    assert P.CORE.names() == core
    assert P.SEQUENTIAL.names() == core + ("lower_cross_thread", "blocked_sums")
    assert G.PIPELINE.names() == (
        "scan_legality", "placement", "pipeline_legality", "inline", "bound_inference", "padded_compute", "storage",
        "loop_nests", "scan_tiles", "tensorize", "simplify", "software_pipeline", "vthread", "sync", "interior_blocks",
        "full_thread_tiles", "async_copies", "coalesced_fallbacks", "shared_layout", "device_kernels")
    assert G.for_target("cuda") is G.PIPELINE
    assert G.for_target("cpu") is G.for_target("interp") is G.for_target(None) is P.SEQUENTIAL
    # the sequential table runs no pass of the GPU layer; the GPU table verifies with the GPU rules
    assert all(p.fn.__module__.startswith("kdsl.passes.") for p in P.SEQUENTIAL)
    assert P.SEQUENTIAL.verifier is None and G.PIPELINE.verifier is verify_gpu_form
    assert G.PIPELINE.remove("sync").verifier is verify_gpu_form         # edits keep the verifier
    for p in G.PIPELINE.passes + G.GPU_SEQUENTIAL.passes:
        doc = __import__(p.fn.__module__, fromlist=["_"]).__doc__
        assert "Assumes" in doc and "Guarantees" in doc, p.name


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden_after_each_pass(case):
    graph_fn, sched_fn, stop = GOLDEN_CASES[case]
    table = GOLDEN_TABLE.get(case, P.SEQUENTIAL)
    assert str(state_after(graph_fn, sched_fn, stop, table)) == GOLDEN[case]


def test_every_pass_has_a_golden():
    assert {stop for _, _, stop in GOLDEN_CASES.values()} == set(G.PIPELINE.names()) | set(G.GPU_SEQUENTIAL.names())


@pytest.mark.parametrize("size", [0, 1, 7, 8, 13])
def test_chain_runs(size):
    a = np.random.default_rng().random(size)
    s = Schedule(chain_graph())
    chain_schedule(s)
    out = np.zeros(size)
    run_lowered(P.lower(s), [a], [out], [])
    np.testing.assert_allclose(out, (a * 2 + 1) * 3)


def test_lowered_func_has_typed_bindings_and_tensorize_requests():
    s = Schedule(rowsum_graph())
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    mma = kd.intrin.wmma(16, 16, 16)
    B.tensorize(ki, mma)
    # the request as loop_nests records it (the GPU table's tensorize pass would refuse a row sum;
    # a sequential target runs the tensorized nest as the loops it is)
    f = P.lower(s)
    assert f.bindings == (n.Binding(n.BindingKind.SHAPE, 0, 0), n.Binding(n.BindingKind.SHAPE, 0, 1))
    (req,) = f.tensorize
    assert req.stage is B.stage and req.axis is ki and req.intrin is mma
    assert f.kernels == () and f.workspaces == () and set(f.attrs) == {"pass_times"}
    assert set(f.attrs["pass_times"]) == set(P.SEQUENTIAL.names())
    with pytest.raises(InternalCompilerError, match="typed fields"):
        n.LoweredFunc("f", (), (), (), f.body, {"bindings": ()})


RAN = []


def _mark(tag):
    def fn(func):
        RAN.append(tag)
        return func
    return fn


def test_insert_replace_append_by_name():
    base = P.SEQUENTIAL
    pipe = (base.insert_before("simplify", ("m1", _mark(1)))
                .insert_after("blocked_sums", P.Pass("m2", _mark(2)))
                .append(P.Pass("m3", _mark(3))))
    assert pipe.names()[6:] == ("loop_nests", "m1", "simplify", "lower_cross_thread", "blocked_sums", "m2", "m3")
    assert base.names() == P.SEQUENTIAL.names()            # edits never change the original
    assert base.remove("blocked_sums").names() == base.names()[:-1]
    RAN.clear()
    f = state_after(chain_graph, chain_schedule, None, pipe).func
    assert RAN == [1, 2, 3] and str(f) == str(P.lower(_chain()))
    # replacing a schedule-level pass: later passes see its result
    seen = []

    def my_storage(state):
        seen.append(state.domains is not None)
        return P.plan_storage(state)
    pipe = base.replace("storage", P.Pass("storage", my_storage, P.Level.SCHEDULE))
    assert str(state_after(chain_graph, chain_schedule, "loop_nests", pipe)) == GOLDEN["loop_nests"]
    assert seen == [True]
    # the IR passes of the replaced pipeline (here: simplify replaced by nothing useful)
    pipe = base.replace("simplify", P.Pass("simplify", lambda f: f))
    assert str(state_after(chain_graph, chain_schedule, "simplify", pipe)) == GOLDEN["loop_nests"]


def test_pipeline_errors_are_clear():
    with pytest.raises(P.PipelineError, match=r"no lowering pass named 'simplfy'; the pipeline has: scan_legality, placement"):
        G.PIPELINE.insert_after("simplfy", ("x", _mark(0)))
    with pytest.raises(P.PipelineError, match="no lowering pass named 'nope'"):
        G.PIPELINE.replace("nope", ("x", _mark(0)))
    with pytest.raises(P.PipelineError, match="two passes are named 'simplify'"):
        G.PIPELINE.append(("simplify", _mark(0)))
    with pytest.raises(P.PipelineError, match="schedule-level pass 'late' comes after IR pass 'tensorize'"):
        G.PIPELINE.append(P.Pass("late", lambda s: s, P.Level.SCHEDULE))
    with pytest.raises(P.PipelineError, match="schedule-level pass 'loop_nests' comes after IR pass 'early'"):
        G.PIPELINE.insert_before("loop_nests", ("early", _mark(0)))
    no_ir = G.PIPELINE.replace("loop_nests", P.Pass("loop_nests", lambda s: s, P.Level.SCHEDULE))
    with pytest.raises(P.PipelineError, match="IR pass 'tensorize' runs before any pass made the loop IR"):
        state_after(chain_graph, chain_schedule, None, no_ir)
    pipe = G.PIPELINE.replace("bound_inference", P.Pass("bound_inference", lambda s: s, P.Level.SCHEDULE))
    with pytest.raises(InternalCompilerError, match="'padded_compute' needs the state's 'domains'"):
        state_after(chain_graph, chain_schedule, None, pipe)


def test_dump_passes_lists_every_pass(monkeypatch, capsys):
    monkeypatch.setenv("KDSL_DUMP", "passes")
    pipe = P.SEQUENTIAL.append(("extra", _mark(5)))
    state_after(chain_graph, chain_schedule, None, pipe)
    err = capsys.readouterr().err
    heads = [line[len("# ---- after "):] for line in err.splitlines() if line.startswith("# ---- after ")]
    assert heads == list(pipe.names())
    assert GOLDEN["bound_inference"] in err and GOLDEN["simplify"] in err


def test_config_reads_verify_and_dump(monkeypatch):
    from kdsl import config
    monkeypatch.delenv("KDSL_VERIFY", raising=False)
    assert config.verify()                      # under pytest
    monkeypatch.setenv("KDSL_VERIFY", "0")
    assert not config.verify()
    monkeypatch.setenv("KDSL_DUMP", "passes")
    assert config.dump_passes() and config.dump()
    monkeypatch.setenv("KDSL_DUMP", "1")
    assert not config.dump_passes() and config.dump()


def test_verify_runs_after_every_ir_pass(monkeypatch):
    monkeypatch.setenv("KDSL_VERIFY", "1")
    # a store to a buffer that is neither a parameter nor allocated
    bad = n.Store(n.Buffer("nowhere", dt.float64, (mk.as_expr(1),)), (mk.as_expr(0),), n.const(1.0, dt.float64))

    def breaks(func):
        return dataclasses.replace(func, body=n.Seq((bad, func.body)))
    with pytest.raises(InternalCompilerError):
        state_after(chain_graph, chain_schedule, None, P.SEQUENTIAL.append(("breaks", breaks)))
    monkeypatch.setenv("KDSL_VERIFY", "0")
    state_after(chain_graph, chain_schedule, None, P.SEQUENTIAL.append(("breaks", breaks)))
