"""Findings already recorded in FINDINGS.md, as matchers over fuzz results.

A bug that matches one of these is reported by its finding id instead of as
NEW; the CI slice marks its chunk xfail for known findings and fails on NEW
ones.  When a fix merges, delete its entry here (and flip its test in
test_findings*.py): the slice then fails if the bug comes back.
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
]


def match_known(r: dict):
    """The id of the first finding matching result ``r``, else None."""
    for f in FINDINGS:
        if f.matches(r):
            return f.id
    return None
