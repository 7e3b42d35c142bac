"""CI's slice of the differential fuzzer: a fixed seed, a few hundred cases per backend.

Cases run in worker processes (a crash or hang is a finding, not the end of the
run).  A chunk fails on any bug that no finding in known.py describes (and on
any error of the fuzzer itself); a chunk whose only bugs are known findings is
xfail, naming them.  More cases: ``python -m tests.fuzz --cases N --seed S``.
"""
import pytest

from .backends import BACKENDS
from .known import match_known
from .report import signature
from .supervise import Supervisor

SEED = 8
#: (backend, first case, number of cases) per chunk: ~300 cases on the reference
#: executors, fewer on cpu, where each case is an LLVM compile (about 1-2 s here);
#: interp-gpu runs GPU-style schedules (bind, cross-thread reductions) on the interpreter
CHUNKS = [("numpy", 0, 150), ("numpy", 150, 150), ("interp", 0, 150), ("interp", 150, 150),
          ("interp-gpu", 0, 150), ("cpu", 0, 40), ("cpu", 40, 40)]


@pytest.mark.parametrize("backend,start,count", CHUNKS, ids=[f"{b}-{s}" for b, s, _ in CHUNKS])
def test_fuzz_slice(backend, start, count, skip_families=()):
    reason = BACKENDS[backend].setup()
    if reason:
        pytest.fail(f"backend {backend}: {reason}")
    sup = Supervisor(timeout=120)
    new, known = [], {}
    try:
        for i in range(start, start + count):
            task = {"seed": SEED, "index": i, "backend": backend}
            if skip_families:
                task["skip_families"] = list(skip_families)
            r = sup.run(task)
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
        pytest.fail(f"{len(new)} new bug(s) on {backend} (show one with python -m tests.fuzz "
                    f"--seed {SEED} --show INDEX --backend {backend}):\n" + "\n".join(new[:20]))
    if known:
        pytest.xfail("known findings: " + ", ".join(f"{k} ({len(v)}: {' '.join(v[:3])})"
                                                    for k, v in sorted(known.items())))
