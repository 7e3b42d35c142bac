"""CUDA C++ for every GPU schedule of the core suite, compiled to sm_90 cubins by NVRTC (no GPU
needed): the gpu_core schedules, the seed-002 ladder, the seed-000 cross-thread schedules,
row-per-block reductions (sum, argmax, softmax, layernorm), for several dtypes.  The source is
checked against the IR: one kernel per DeviceKernel with its launch bounds, a __syncthreads()
per barrier (plus two per cross-thread reduction), __shared__ tiles of the IR's sizes."""
import math
import re

import pytest

import schedules as S
import test_cross_thread as X
import test_kernels as K
from seed_schedules import bind_rows, cross_thread
from test_seed002_ladder import LADDER
from kdsl import dtypes as dt
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.passes.pipeline import lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule
from kdsl_cuda.build import compile_cubin
from kdsl_cuda.codegen import generate
from kdsl_cuda.codegen.cross_thread import _AXIS as AXIS, contiguous

F32, F64 = dt.float32, dt.float64


def _traced(fn, dtype="float32"):
    return lambda: trace(fn, [TensorSpec(("n", "m"), dtype)])


CASES = {
    # name: (graph factory, schedule)
    "scale_elementwise_2d": (S.scale_graph, S.elementwise_2d),
    "rowsum_row_per_block_f32": (S.rowsum_graph, S.row_per_block),
    "rowsum_row_per_block_f64": (lambda: S.rowsum_graph(F64), S.row_per_block),
    "rowsum_row_per_block_i32": (lambda: S.rowsum_graph(dt.int32), S.row_per_block),
    "rowsum_row_per_block_strided": (lambda: S.rowsum_graph(contig=False), S.row_per_block),
    "mm_threads": (S.matmul_graph, S.mm_threads),
    "mm_shared_no_sync_f32": (S.matmul_graph, S.mm_shared_no_sync),
    "mm_shared_no_sync_f64": (lambda: S.matmul_graph(F64), S.mm_shared_no_sync),
    "mm_vthread": (S.matmul_graph, S.mm_vthread),
    "mm_double_buffer": (S.matmul_graph, S.mm_double_buffer),
    "mm_pipeline_3": (S.matmul_graph, lambda s: S.mm_double_buffer(s, stages=3)),
    "seed_bind_rows": (S.rowsum_graph, bind_rows),
    "seed_cross_thread_f32": (S.rowsum_graph, cross_thread),
    "seed_cross_thread_f64": (lambda: S.rowsum_graph(F64), cross_thread),
    "seed_cross_thread_strided": (lambda: S.rowsum_graph(contig=False), cross_thread),
    "row_threads_32": (S.rowsum_graph, X.row_threads(32)),
    "row_threads_64_i64": (lambda: S.rowsum_graph(dt.int64), X.row_threads(64)),
    "row_threads_32_xy": (S.rowsum_graph, X.row_threads(32, two=True)),
    "colsum": (X.colsum_graph, X.colsum_sched),
    "argmax_user_combiner": (X.argmax_graph, X.row_threads(32)),
    "argmax_traced_f64": (_traced(X._argmax, "float64"), X.row_threads(32)),
    "softmax_row_per_block_fused": (_traced(X.softmax), X.row_per_block_fused(32)),
    "layernorm_row_per_block_fused": (_traced(X.layernorm), X.row_per_block_fused(64)),
    "softmax_row_per_block_default": (_traced(X.softmax), X.row_per_block_fused(32, local=False)),
    "layernorm_row_per_block_default_f64": (_traced(X.layernorm, "float64"), X.row_per_block_fused(32, local=False)),
    "softmax_unfused_3_kernels": (_traced(K._softmax), K.unfused),
    "softmax_fused_local": (_traced(K._softmax), K.fused),
}
CASES["conv3x3_shared_input_tile"] = (S.conv3x3_graph, S.conv_shared_tile)
for step in LADDER:
    CASES["ladder_" + step.__name__] = (S.matmul_graph, step)
    CASES["ladder_f64_" + step.__name__] = (lambda: S.matmul_graph(F64), step)


def lowered(graph_fn, sched_fn):
    s = Schedule(graph_fn())
    sched_fn(s)
    return gpu_lower(s)


def kernel_text(source: str, name: str) -> str:
    """The text of kernel ``name`` in ``source`` (from its signature to the next kernel)."""
    start = source.index(f"\n{name}(")
    end = source.find('extern "C" __global__', start)
    return source[start:end if end >= 0 else len(source)]


def _group(c, block):
    axes = {AXIS[t] for t in c.threads}
    return axes, math.prod(block[a] for a in axes)


def ctr_uses_shared(c, block) -> bool:
    """Whether a cross-thread reduction needs shared memory (and its two barriers): not when
    its groups are aligned runs of at most 32 lanes (a power of two: a warp butterfly)."""
    axes, g = _group(c, block)
    return g > 1 and not (contiguous(axes, block) and g <= 32 and g & (g - 1) == 0)


def ctr_uses_shuffles(c, block) -> bool:
    axes, g = _group(c, block)
    return g > 1 and contiguous(axes, block)


def _elements(b) -> int:
    """Elements a shared buffer's declaration holds: its shape, or its padded rows."""
    if b.strides is not None:
        return int(b.strides[0].value) * int(b.shape[0].value)
    return math.prod(int(e.value) for e in b.shape)


def check_source(func, source):
    """The printed kernels against the IR they come from."""
    kernels = func.kernels
    assert kernels
    assert source.count('extern "C" __global__') == len(kernels)
    assert "#include" not in source
    for k in kernels:
        nthreads = math.prod(k.launch.block)
        assert f"__launch_bounds__({nthreads})\n{k.name}(" in source
        text = kernel_text(source, k.name)
        barriers = len(collect(k.body, lambda x: type(x) is n.Barrier))
        ctrs = collect(k.body, lambda x: type(x) is n.CrossThreadReduce)
        staged = [c for c in ctrs if ctr_uses_shared(c, k.launch.block)]
        assert text.count("__syncthreads();") == barriers + 2 * len(staged), k.name
        assert ("kd_shfl_" in text) == any(ctr_uses_shuffles(c, k.launch.block) for c in ctrs), k.name
        shared = {a.buffer for a in collect(k.body, lambda x: type(x) is n.Allocate)
                  if a.buffer.scope is n.Scope.SHARED}
        decls = re.findall(r"__shared__ __align__\(16\) (\w+) (\w+)\[(\d+)\];", text)
        assert len(decls) == len(shared) + sum(len(c.results) for c in staged), k.name
        sizes = sorted(int(d[2]) for d in decls if not d[1].startswith("kd_red"))
        assert sizes == sorted(_elements(b) for b in shared), k.name
        assert all(int(d[2]) <= nthreads for d in decls if d[1].startswith("kd_red"))
        for tag in {lp.thread for lp in collect(k.body, lambda x: type(x) is n.For and x.kind is n.ForKind.BOUND)}:
            assert tag.value in text, (k.name, tag)
        for inp in func.inputs:        # an input a kernel reads is a const restrict pointer
            if any(x.buffer is inp for x in collect(k.body, lambda x: type(x) is n.Load)):
                assert re.search(rf"const \w+\* __restrict__ {re.escape(inp.name)}\b", text), (k.name, inp)


#: schedules the cuda lowering refuses (a ScheduleError in the user's terms): the fused row
#: statistics are local buffers attached outside the thread loops that compute and read them
REFUSED = {"softmax_row_per_block_fused", "layernorm_row_per_block_fused"}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_schedules_say_why(case):
    from kdsl.errors import ScheduleError
    with pytest.raises(ScheduleError, match="local memory"):
        lowered(*CASES[case])


@pytest.mark.parametrize("case", sorted(set(CASES) - REFUSED))
def test_every_gpu_schedule_compiles_to_a_cubin(case):
    func = lowered(*CASES[case])
    mod = generate(func)
    check_source(func, mod.source)
    cubin = compile_cubin(mod.source, name=case + ".cu")
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000
    for k in func.kernels:           # every kernel is in the cubin under its extern "C" name
        assert k.name.encode() in cubin


def test_cross_thread_reduction_shuffles_every_value_of_the_combiner():
    """argmax over 32 threads: an xor butterfly of 5 steps moving index and value together,
    no shared memory and no barrier."""
    func = lowered(X.argmax_graph, X.row_threads(32))
    src = generate(func).source
    body = kernel_text(src, func.kernels[0].name)
    assert body.count("kd_shfl_xor(") == 2 * 5
    assert re.search(r"const int64_t \w+ = kd_shfl_xor\(\w+, \w+, 16\);", body)
    assert re.search(r"const float \w+ = kd_shfl_xor\(\w+, \w+, 16\);", body)
    assert "__syncthreads" not in body and "__shared__" not in body


def test_thread_loop_shorter_than_the_block_is_guarded():
    """Hand IR: a 32-thread block whose second loop over threadIdx.x has 16 iterations gets
    ``if (threadIdx.x < 16)``; the full-size loop gets none; nested same-tag loops name the
    same hardware index."""
    A = n.Buffer("A", dt.float32, (n.const(64),), param=True)
    b, t, t2 = n.var("b"), n.var("t"), n.var("t2")
    one = n.const(1.0, dt.float32)
    full = n.For(t, n.const(0), n.const(32), n.ForKind.BOUND,
                 n.Store(A, (t,), one), n.ThreadTag.THREAD_X)
    short = n.For(t2, n.const(0), n.const(16), n.ForKind.BOUND,
                  n.Store(A, (n.Binary(dt.index, n.BinOp.ADD, t2, n.const(32)),), one), n.ThreadTag.THREAD_X)
    body = n.For(b, n.const(0), n.const(2), n.ForKind.BOUND, n.Seq((full, short)), n.ThreadTag.BLOCK_X)
    k = n.DeviceKernel("guarded", n.Launch((n.const(2), n.const(1), n.const(1)), (32, 1, 1)), body)
    func = n.LoweredFunc("guarded", (), (A,), (), k)
    src = generate(func).source
    assert src.count("if (threadIdx.x < 16)") == 1 and "threadIdx.x < 32" not in src
    assert "blockIdx.x <" not in src          # the block loop's extent is the grid's
    assert compile_cubin(src)[:4] == b"\x7fELF"


def test_params_with_explicit_strides_index_through_them():
    func = lowered(lambda: S.rowsum_graph(contig=False), S.row_per_block)
    (A,) = func.inputs
    assert A.strides is not None
    src = generate(func).source
    stride_names = [v.name for v, b in zip(func.scalars, func.bindings) if b.kind is n.BindingKind.STRIDE]
    assert stride_names and all(re.search(rf"int64_t {re.escape(s)}\b", src) for s in stride_names)
    assert re.search(r"A\[[^\]]*\* " + re.escape(stride_names[0]), src)
