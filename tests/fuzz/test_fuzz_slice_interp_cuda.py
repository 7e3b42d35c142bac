"""The differential fuzzer's CI slice on ``interp-cuda``: fixed-seed cases on kdsl_cuda's default
schedules, lowered by the core's GPU table and run on the race-checking SIMT interpreter (no
GPU needed), each against numpy in float64; the CUDA printed for every kernel is also
NVRTC-compiled where the cuda wheels are installed (tests/cuda_codegen/nvrtc_hook.py, installed
in the fuzz workers by the backend's setup).  Skips where kdsl_cuda is not importable.
One case: ``python -m tests.fuzz --seed 8 --show INDEX --backend interp-cuda``."""
import pytest

from .backends import BACKENDS
from .test_fuzz_slice import test_fuzz_slice as _run_chunk

#: (first case, number of cases): small cases (the SIMT interpreter runs every thread in
#: Python), about 40 s here alone
CHUNKS = [(0, 80)]


@pytest.mark.parametrize("start,count", CHUNKS, ids=[f"interp-cuda-{s}" for s, _ in CHUNKS])
def test_fuzz_slice_interp_cuda(start, count):
    reason = BACKENDS["interp-cuda"].setup()
    if reason:
        pytest.skip(f"interp-cuda: {reason}")
    # the issue-25 surface family is skipped here: its 17 cases in this range cost ~35 CPU s
    # (F43: lowering is now ~0.5 s a case; 8:79's take is 17 s of NVRTC, sorts and gathers
    # 4-5 s each on the SIMT interpreter); it runs on interp-cuda in campaigns
    _run_chunk("interp-cuda", start, count, skip_families=("surface",))
