"""Elementwise stages that read a tensor transposed (``a.T + 0.0``, ``x + y.T``) go through a
shared-memory tile (kdsl_cuda/schedules/transpose.py): coalesced reads along A's rows, coalesced
writes along the output's.  Checked on the SIMT executor (race-checked, blocks in any order)
against numpy at shapes that do and do not divide the 32 x 32 tile, 1 and 0 sizes; the
tests/conftest.py hook NVRTC-compiles every kernel run here."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.frontend.spec import TensorSpec
from kdsl.gpu.simt import run_simt
from test_cuda_size_classes import lowered

BIG = dict(n=(8192, 16383), m=(8192, 16383))


def transpose_add(a):
    return a.T + 0.0


def add_transposed(x, y):
    return x * 2.0 + y.T


def test_transpose_through_shared_tile(rng):
    f = lowered(transpose_add, [TensorSpec(("n", "m"), "float32")], BIG)
    text = str(f)
    assert "a.shared: float32[32, 32]" in text and "async_copy" in text, text
    assert [k.launch.block for k in f.kernels] == [(32, 8, 1)]
    for shp in [(64, 96), (33, 70), (1, 40), (45, 1), (0, 5)]:
        a = rng.standard_normal(shp).astype(np.float32)
        out = np.full(shp[::-1], -7, np.float32)
        run_simt(f, [a], [out], [], block_order=rng)
        np.testing.assert_array_equal(out, a.T + 0.0)


@pytest.mark.parametrize("dtype", [np.float16])
def test_other_operand_read_directly(dtype, rng):
    """Through the kernel API: y's tile in shared memory, x read along its rows; float16."""
    k = kd.kernel(add_transposed)
    for nm in [(40, 70), (33, 33)]:
        x = rng.standard_normal(nm).astype(dtype)
        y = rng.standard_normal(nm[::-1]).astype(dtype)
        got = k(x, y, backend="interp-cuda")
        assert "y.shared" in str(k.lower(x, y, backend="cuda"))
        want = (x * dtype(2.0) + y.T)
        np.testing.assert_array_equal(got, want)


def test_small_constant_axis_keeps_elementwise():
    """A transposed read with an axis shorter than a tile keeps the elementwise recipe."""
    f = lowered(transpose_add, [TensorSpec((8, "m"), "float32")], dict(m=(8192, 16383)))
    assert "shared" not in str(f)


def test_tensor_read_both_ways_keeps_elementwise(rng):
    """``x + x.T`` reads x straight and transposed: no shared tile of x (its region would be
    the box around two tiles); still correct."""
    k = kd.kernel(lambda x: x + x.T)
    x = rng.standard_normal((40, 40)).astype(np.float32)
    assert "shared" not in str(k.lower(x, backend="cuda"))
    np.testing.assert_array_equal(k(x, backend="interp-cuda"), x + x.T)
