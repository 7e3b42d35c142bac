"""Findings already recorded in FINDINGS.md, as matchers over fuzz results.

A bug that matches one of these is reported by its finding id instead of as
NEW; the CI slice marks its chunk xfail for known findings and fails on NEW
ones.  When a fix merges, delete its entry here (and flip its test in
test_findings.py): the slice then fails if the bug comes back.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    id: str
    area: str
    title: str
    kinds: tuple                 # bug kinds covered
    pattern: str = ""            # regex searched in the result's detail
    backends: tuple = ()         # () = any backend
    features: tuple = ()         # every one must be among the case's features
    sched: tuple = ()            # schedule kinds ('none', 'hints', 'explicit'); () = any

    def matches(self, r: dict) -> bool:
        if r.get("kind") not in self.kinds:
            return False
        if self.backends and r.get("backend") not in self.backends:
            return False
        if self.sched and r.get("sched") not in self.sched:
            return False
        feats = set(r.get("features") or ())
        if any(f not in feats for f in self.features):
            return False
        return not self.pattern or re.search(self.pattern, r.get("detail") or "") is not None


_G = ("gpu-sched",)       # the explicit GPU-schedule generator (gpu_runner.py)
_RACE = ("simt_report", "wrong_value")

FINDINGS: list = [
    # issue 24, open on main (other helpers fix them); found by the GPU-schedule generator
    Finding("I24-1", "issue 24 item 1", "size-1 dims + vectorised cooperative shared copy: NaN",
            ("wrong_value",), r"\bnan\b", _G, ("vec_copy",)),
    Finding("I24-2", "issue 24 item 2", "stage attached at a block loop, not spread over the threads",
            _RACE, "", _G, ("unspread",)),
    Finding("I24-2", "issue 24 item 2", "cooperative copy left unbound inside the block: every thread copies",
            _RACE, "", _G, ("fetch_unspread",)),
    Finding("I24-2", "issue 24 item 2", "cross-thread reduction in an epilogue without threadIdx.x: every thread stores",
            _RACE, "", _G, ("xthread_epi",)),
    Finding("I24-3", "issue 24 item 3", "rfactor + cross-thread reduction with an epilogue",
            _RACE, "", _G, ("rfactor_xthread_epi",)),
    Finding("I24-4", "issue 24 item 4", "blocks of more than 1024 threads accepted",
            ("missed_error",), "", _G, ("threads_over_1024",)),
    Finding("I24-6", "issue 24 item 6", "two runtime-sized shared buffers: NVRTC rejects the undeclared A_1_i",
            ("nvrtc_failure",), r'identifier "\w+_i" is undefined', _G),
    Finding("I24-8", "issue 24 item 8", "TVM order refused: a stage attached before its reader is",
            ("legal_refused",), r"but its reader \S+ runs at the root"),
    Finding("I24-8", "issue 24 item 8", "TVM order refused: double_buffer/pipeline before compute_at",
            ("legal_refused",), r"pipeline: stage \S+ is computed at the root", _G),
    Finding("I24-9", "issue 24 item 9", "split of a constant extent smaller than the factor: thread extents differ",
            ("legal_refused",), r"binds threadIdx\.\w to loops of \d+ iterations", _G),
    Finding("I24-9", "issue 24 item 9", "docs' wmma/wgmma schedule on a size-1 (constant) dim refused",
            ("legal_refused",), r"tensorize\(.*the loop under \S+ has extent \d+, w?g?mma", _G),
    # found by the GPU-schedule generator (FINDINGS.md, "Issue 24 GPU-schedule fuzzer")
    Finding("I24-10", "issue 24 item 10", "TVM GPU form refused: a local stage attached outside the thread loops",
            ("legal_refused",), "", _G, ("local_outside_threads",)),
]


def match_known(r: dict):
    """The id of the first finding matching result ``r``, else None."""
    for f in FINDINGS:
        if f.matches(r):
            return f.id
    return None
