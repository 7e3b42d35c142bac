"""The differential fuzzer's CI slice on the GPU (issue 10 item 6): fixed-seed cases on the
``cuda`` backend (its default schedules), each against numpy in float64 like every other
backend, in worker processes.  Runs under the ``cuda`` mark (skipped without a device); a
chunk fails on a new bug, is xfail when its only bugs are known findings (known.py).
One case: ``python -m tests.fuzz --seed 8 --show INDEX --backend cuda``."""
import pytest

from .test_fuzz_slice import test_fuzz_slice as _run_chunk

pytestmark = pytest.mark.cuda

#: (first case, number of cases): 80 cases, about 100 kernels (~10 s of NVRTC): the GPU suite
#: as a whole stays under ~400 compiled kernels
CHUNKS = [(0, 40), (40, 40)]


@pytest.mark.parametrize("start,count", CHUNKS, ids=[f"cuda-{s}" for s, _ in CHUNKS])
def test_fuzz_slice_cuda(start, count):
    _run_chunk("cuda", start, count)
