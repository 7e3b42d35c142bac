"""CI slice of the explicit GPU-schedule generator (issue 24): fixed-seed TVM-style GPU schedules
(gen_gpu_schedule.py, gpu_families.py) on ``interp-cuda`` against numpy in float64, each kernel
also NVRTC-compiled, in a worker process.  Fails on a bug that no finding in known.py describes
(and on the fuzzer's own errors); xfail, naming them, when its only bugs are known findings.
Skips where kdsl_cuda or the cuda wheels are missing.  One case:
``python -m tests.fuzz --gpu-schedules --seed 24 --show INDEX``; more:
``python -m tests.fuzz --gpu-schedules --cases N --seed S``."""
import pytest

from .gpu_runner import BACKEND, setup
from .known import match_known
from .report import signature
from .supervise import Supervisor

SEED = 24
#: (first case, number of cases): about 3 cases/s on one idle core (~25 s; 50 s with the
#: other core busy)
CHUNKS = [(0, 75)]


@pytest.mark.parametrize("start,count", CHUNKS, ids=[f"gpu-schedules-{s}" for s, _ in CHUNKS])
def test_fuzz_slice_gpu_schedules(start, count):
    reason = setup()
    if reason:
        pytest.skip(f"gpu-schedules: {reason}")
    sup = Supervisor(timeout=120)
    new, known, ok = [], {}, 0
    try:
        for i in range(start, start + count):
            r = sup.run({"seed": SEED, "index": i, "backend": BACKEND})
            ok += r["outcome"] == "ok"
            if r["outcome"] not in ("bug", "fuzzer_error"):
                continue
            fid = match_known(r) if r["outcome"] == "bug" else None
            if fid:
                known.setdefault(fid, []).append(f"{SEED}:{i}")
            else:
                new.append(f"{SEED}:{i} {signature(r)}\n    {(r.get('detail') or '')[:300]}")
    finally:
        sup.close()
    if new:
        pytest.fail(f"{len(new)} new bug(s) (show one with python -m tests.fuzz --gpu-schedules "
                    f"--seed {SEED} --show INDEX):\n" + "\n".join(new[:20]))
    assert ok >= count // 3, f"only {ok}/{count} cases ran to a right answer: the generator drifted"
    if known:
        pytest.xfail("known findings: " + ", ".join(f"{k} ({len(v)}: {' '.join(v[:3])})"
                                                    for k, v in sorted(known.items())))
