"""The default cuda schedules chosen by ``sched.size_hints`` (the benchmark sizes of issue 10):
the structure each size class gets (kernels, blocks), each one correct at small sizes on the
SIMT executor (race-checked, any block order), and its CUDA compiled by NVRTC for sm_90."""
import numpy as np
import pytest

import cuda_workloads as W
from kdsl.gpu.simt import run_simt
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.ir import nodes as n
from kdsl.passes.pipeline import lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.runtime.dispatch import make_schedule
from kdsl_cuda.schedules import schedule


def F(*names):
    return TensorSpec(names, "float32")


def lowered(fn, specs, sizes, hints=()):
    """``fn`` traced for ``specs``, given the default cuda schedule for ``sizes`` (name ->
    (lo, hi)), lowered for cuda."""
    g = trace(fn, specs)
    s = make_schedule(g)
    dims = {}
    for p in g.params:
        for d in getattr(p, "shape", ()):
            if isinstance(d, n.Var):
                dims[d.name] = d
    s.size_hints = {dims[k]: v for k, v in sizes.items() if k in dims}
    schedule(s, list(hints))
    return gpu_lower(s)


def one(x):
    return (x, x)


# name: (fn, specs, sizes, expected [(block, ...)] per kernel, small inputs)
CLASSES = {
    "rowsum_square": (W.rowsum, [F("n", "m")], dict(n=one(16384), m=one(16384)), [(256, 1, 1)]),
    "rowsum_tall_skinny": (W.rowsum, [F("n", "m")], dict(n=one(4194304), m=one(256)), [(32, 8, 1)]),
    "rowsum_short_wide": (W.rowsum, [F("n", "m")], dict(n=one(256), m=one(4194304)),
                          [(512, 1, 1), (16, 16, 1)]),
    "colsum_square": (W.colsum, [F("n", "m")], dict(n=one(16384), m=one(16384)),
                      [(256, 1, 1), (128, 1, 1)]),
    "total_2_28": (W.total, [F("n")], dict(n=one(1 << 28)), [(256, 1, 1), (256, 1, 1)]),
    "argmax_square": (W.argmax_rows, [F("n", "m")], dict(n=one(16384), m=one(16384)), [(256, 1, 1)]),
    "softmax_8192": (W.softmax, [F("n", "m")], dict(n=one(8192), m=one(8192)), [(512, 1, 1)]),
    "layernorm_8192": (W.layernorm, [F("n", "m")], dict(n=one(8192), m=one(8192)), [(512, 1, 1)]),
    "softmax_short_rows": (W.softmax, [F("n", "m")], dict(n=one(65536), m=one(100)), [(32, 1, 1)]),
    "gelu_2_28": (W.gelu_add, [F("n"), F("n")], dict(n=one(1 << 28)), [(256, 1, 1)]),
    "scale_add_rows": (W.scale_add, [F("n", "m"), F("n", "m")], dict(n=one(4096), m=one(4096)),
                       [(256, 1, 1)]),
    "conv3x3_16384": (W.conv3x3, [F("n", "m"), TensorSpec((3, 3), "float32")],
                      dict(n=one(16384), m=one(16384)), [(32, 4, 1)]),
    "matmul_4096": (W.matmul, [F("n", "k"), F("k", "m")], dict(n=one(4096), m=one(4096), k=one(4096)),
                    [(16, 16, 1)]),
    "rowsum_range_class": (W.rowsum, [F("n", "m")], dict(n=(8192, 16383), m=(8192, 16383)),
                           [(256, 1, 1)]),
}

SMALL = {  # small shapes for each class's schedule: dividing, not dividing, size 1, empty
    "F1": [(1,), (4100,), (0,)],      # (1-D classes launch fixed grids: each run costs alike)
    "F2": [(3, 40), (5, 1030), (1, 1), (0, 3), (2, 0)],
}


def inputs(name, shape, rng):
    fn = CLASSES[name][0]
    if fn is W.conv3x3:
        return [rng.standard_normal((shape[0] + 2, shape[1] + 2)).astype(np.float32),
                rng.standard_normal((3, 3)).astype(np.float32)]
    if fn is W.matmul:
        return [rng.standard_normal((shape[0], 9)).astype(np.float32),
                rng.standard_normal((9, shape[1])).astype(np.float32)]
    k = len(CLASSES[name][1])
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(k)]


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_structure(name):
    fn, specs, sizes, blocks = CLASSES[name]
    f = lowered(fn, specs, sizes)
    assert [k.launch.block for k in f.kernels] == blocks


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_class_schedule_is_correct_at_small_sizes(name, rng):
    fn, specs, sizes, _ = CLASSES[name]
    f = lowered(fn, specs, sizes)
    rank = len(specs[0].shape)
    for shape in SMALL["F%d" % rank]:
        if fn in (W.argmax_rows, W.softmax, W.layernorm) and shape[-1] == 0:
            continue   # numpy has no value for them on empty rows
        args = inputs(name, shape, rng)
        want = np.asarray(W.ORACLES[fn](*[a.astype(np.float64) for a in args]))
        dtype = np.int64 if fn is W.argmax_rows else np.float32
        out = np.full(want.shape, -7, dtype)
        run_simt(f, args, [out], [], block_order=rng)
        if fn is W.argmax_rows:
            np.testing.assert_array_equal(out, want)
        else:
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_nvrtc_compiles(name):
    pytest.importorskip("cuda.core")
    from kdsl_cuda.build import compile_cubin
    from kdsl_cuda.codegen import generate
    fn, specs, sizes, _ = CLASSES[name]
    mod = generate(lowered(fn, specs, sizes))
    assert compile_cubin(mod.source, name=name + ".cu")[:4] == b"\x7fELF"


def test_unknown_sizes_are_robust():
    """Without size hints: a warp per row (any row length), 256 partials for a full sum."""
    f = lowered(W.rowsum, [F("n", "m")], {})
    assert [k.launch.block for k in f.kernels] == [(32, 8, 1)]
    f = lowered(W.total, [F("n")], {})
    assert [str(k.launch.grid[0]) for k in f.kernels][0].endswith("value=256)")
