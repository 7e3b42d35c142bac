"""examples/gemm_ladder.py --check in CI: every step of the seed-002 ladder at its full tile
sizes on interp-cuda (SIMT, race-checked) against numpy in float64, at shapes that do and do
not divide the tiles (0 and 1 sizes included); the NVRTC hook compiles each (the tensor-core
step included).  Also examples/wmma_gemm.py."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import gemm_ladder  # noqa: E402
import wmma_gemm  # noqa: E402


#: the example's CHECK_SHAPES with its dividing 256x32x256 cut to 128x32x128 (a quarter of the
#: SIMT work): still whole 128-wide tiles and several K steps of 8 and 16 for every step
SHAPES = [(128, 32, 128)] + gemm_ladder.CHECK_SHAPES[1:]


@pytest.mark.parametrize("step", list(gemm_ladder.STEPS))
def test_ladder_step_on_the_simt_interpreter(step):
    shapes = None if step in ("tensor_core", "wgmma") else SHAPES     # (their own shapes: no 1s)
    assert gemm_ladder.check_step(step, shapes=shapes, seed=1) == []


def test_check_mode_exit_status():
    assert gemm_ladder.main(["--check", "--only", "native_gemm"]) == 0


def test_fits_falls_back_for_size_one():
    """k == 1 is a constant in the trace: the tiled steps cannot fill a block's copies."""
    assert gemm_ladder.check_step("double_buffer", shapes=[(3, 1, 200), (200, 1, 3)]) == []


def test_wmma_example_check():
    assert wmma_gemm.check(seed=2) == []
