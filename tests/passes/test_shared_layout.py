"""shared_layout: shared tiles whose rows are a multiple of 32 bytes get rows padded by 16
bytes (strides); everything else keeps its layout; every reference names the padded buffer;
sequential tables do not run it."""
import numpy as np
import pytest

import kdsl as kd
from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.pipeline import PIPELINE
from kdsl.passes.pipeline import SEQUENTIAL
from kdsl.gpu.shared_layout import padded_strides


def _buf(shape, dtype=dt.float32, scope=n.Scope.SHARED, strides=None):
    return n.Buffer("S", dtype, tuple(mk.as_expr(s) if isinstance(s, int) else s for s in shape),
                    strides, scope)


def _ints(st):
    return None if st is None else tuple(int(s.value) for s in st)


def test_padded_strides():
    assert _ints(padded_strides(_buf((128, 32), dt.float16))) == (40, 1)        # 64 B rows
    assert _ints(padded_strides(_buf((8, 128)))) == (132, 1)                   # 512 B rows
    assert _ints(padded_strides(_buf((2, 32, 128), dt.float16))) == (32 * 136, 136, 1)
    assert _ints(padded_strides(_buf((16, 16), dt.float16))) == (24, 1)        # 32 B rows
    assert _ints(padded_strides(_buf((4, 8), dt.float64))) == (10, 1)
    for keep in (_buf((64,)), _buf((8, 7)), _buf((8, 4), dt.float16),          # 1-D, 28 B, 8 B
                 _buf((8, 128), scope=n.Scope.LOCAL), _buf((8, 128), scope=n.Scope.GLOBAL),
                 _buf((8, n.var("m")))):
        assert padded_strides(keep) is None


def test_only_the_gpu_table_pads():
    assert "shared_layout" in PIPELINE.names()
    assert "shared_layout" not in SEQUENTIAL.names()


@kd.kernel
@kd.schedule("cuda", tensor_cores=True)
def mm(A, B):
    return A @ B


def test_tensor_core_tiles_are_padded_and_every_reference_follows(monkeypatch):
    monkeypatch.setenv("KDSL_CUDA_WGMMA", "0")      # the mma.sync recipe's fragment-loaded tiles
    f = mm.lower(kd.TensorSpec((256, 256), "float16"), kd.TensorSpec((256, 256), "float16"),
                 backend="cuda")
    shared = {a.buffer.name: a.buffer for a in collect(f.body, lambda x: type(x) is n.Allocate)
              if a.buffer.scope is n.Scope.SHARED}
    assert _ints(shared["A.shared"].strides) == (256 * 72, 72, 1)     # 256 x 64 tiles
    assert _ints(shared["B.shared"].strides) == (64 * 136, 136, 1)    # 64 x 128 tiles
    refs = collect(f.body, lambda x: type(x) in (n.AsyncCopy, n.WmmaLoad, n.Load, n.Store))
    for r in refs:
        b = r.src if type(r) is n.WmmaLoad else r.buffer
        if b.scope is n.Scope.SHARED:
            assert b.strides is not None, r


def test_wgmma_operand_tiles_are_swizzled_not_padded(monkeypatch):
    """Tiles that Hopper's tensor cores read (the default on sm_90) get the 128-byte swizzle
    instead of padding, and every reference names the swizzled buffer."""
    hopper = pytest.importorskip("kdsl_cuda.schedules.hopper")
    monkeypatch.setattr(hopper, "_arch", "sm_90")
    f = mm.lower(kd.TensorSpec((256, 256), "float16"), kd.TensorSpec((256, 256), "float16"),
                 backend="cuda")
    shared = [a.buffer for a in collect(f.body, lambda x: type(x) is n.Allocate)
              if a.buffer.scope is n.Scope.SHARED]
    assert shared and all(b.swizzle == 128 and b.strides is None for b in shared)
    for r in collect(f.body, lambda x: type(x) in (n.AsyncCopy, n.WgmmaMma)):
        for b in ((r.a, r.b) if type(r) is n.WgmmaMma else (r.buffer,)):
            assert b.swizzle == 128, r


def test_padded_kernels_run_on_simt(rng):
    A = rng.standard_normal((70, 90)).astype(np.float16)
    B = rng.standard_normal((90, 50)).astype(np.float16)
    got = mm(A, B, backend="interp-cuda")
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-2)
