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


FINDINGS: list = [
    Finding("F6", "items 11, 13", "numpy/kd functions of Python scalars stay weak (numpy 2: strong)",
            ("wrong_dtype", "exception"), pattern=r"dtype|ml_dtypes", features=("fn_of_weak",)),
    Finding("F9", "item 1", "a where= reduction over an uneven split loads outside the split guard",
            ("internal_error",), pattern="OutOfBounds", backends=("interp", "interp-gpu"),
            features=("ired_where",)),
    Finding("F10", "item 13", "a stage attached at a loop that is then split or rfactored: raw "
            "ValueError 'IterVar(...) is not in list' in lowering", ("exception",),
            pattern=r"is not in list"),
    Finding("F12", "new", "reduce_axis((lo, hi)) with hi < lo: numpy backend raw ValueError",
            ("exception",), pattern=r"broadcast shape must be non-negative", backends=("numpy",)),
    Finding("F13", "item 13", "compile time: LLVM runs for minutes on some unrolled schedules",
            ("hang",), backends=("cpu",)),
    Finding("F19", "new", "splitting an already-split axis of a stage with a fuse: raw "
            "AttributeError ('Fuse' object has no attribute 'parent')", ("exception",),
            pattern=r"'Fuse' object has no attribute 'parent'"),
    Finding("F25", "new", "cache_write of a two-value (argmin/argmax) rfactor stage keeps one "
            "value: ICE 'argmin.rf.v1 is read where it is not computed'", ("internal_error",),
            pattern=r"\.rf\.v\d+ is read where it is not computed"),
    # last: the catch-all for user errors without a hint (after the specific ones above)
    Finding("F8", "items 3, 11", "user errors that do not say what would work (no hint)",
            ("unfair_error",), pattern=r"no hint saying what would work"),
]


def match_known(r: dict):
    """The id of the first finding matching result ``r``, else None."""
    for f in FINDINGS:
        if f.matches(r):
            return f.id
    return None
