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
    Finding("F1", "item 4", "numpy backend evaluates a kd.reducer named like a built-in with "
            "numpy's ufunc", ("wrong_value",), backends=("numpy",),
            features=("custom_reducer", "reducer_builtin_name")),
    Finding("F2", "item 3", "hints do not compose (vectorize+unroll, parallel+...): 'axis i1.inner "
            "... is already vectorized', internal axis names", ("hint_rejected", "unfair_error"),
            pattern=r"is already (vectorized|parallel|unrolled)|is a reduction axis of stage",
            sched=("hints",)),
    Finding("F3", "item 3", "hint values are not validated (vectorize=0/-4, unroll=1.5, threads=-2, "
            "stages=1, rfactor=0)", ("missed_error", "unfair_error"),
            pattern=r"schedule: hint (vectorize|unroll|threads|stages|rfactor|tile)=|rfactor= takes",
            sched=("hints",)),
    Finding("F4", "item 13", "parallel=True on a 0-d output: raw IndexError", ("exception",),
            pattern=r"IndexError: list index out of range", sched=("hints",)),
    Finding("F5", "item 3", "LLVM remarks ('loop not unrolled/vectorized') printed raw",
            ("raw_output",), backends=("cpu",)),
    Finding("F6", "items 11, 13", "numpy/kd functions of Python scalars stay weak (numpy 2: strong)",
            ("wrong_dtype", "exception"), pattern=r"dtype|ml_dtypes", features=("fn_of_weak",)),
    Finding("F7", "item 11", "argmax/argmin accept a tuple axis (numpy raises TypeError)",
            ("missed_error",), pattern=r"np\.arg(max|min): TypeError"),
    Finding("F9", "item 1", "a where= reduction over an uneven split loads outside the split guard",
            ("internal_error",), pattern="OutOfBounds", backends=("interp", "interp-gpu"),
            features=("ired_where",)),
    Finding("F10", "item 13", "a stage attached at a loop that is then split or rfactored: raw "
            "ValueError 'IterVar(...) is not in list' in lowering", ("exception",),
            pattern=r"is not in list"),
    Finding("F11", "item 13", "illegal compute_at accepted at the call, rejected at lowering",
            ("late_schedule_error",), pattern=r"compute_at"),
    Finding("F12", "new", "reduce_axis((lo, hi)) with hi < lo: numpy backend raw ValueError",
            ("exception",), pattern=r"broadcast shape must be non-negative", backends=("numpy",)),
    Finding("F13", "item 13", "compile time: LLVM runs for minutes on some unrolled schedules",
            ("hang",), backends=("cpu",)),
    Finding("F14", "item 11", "uint8 sums/products give int64 (numpy: uint64)", ("wrong_dtype",),
            pattern=r"dtype int64, numpy gives uint64"),
    Finding("F15", "item 1", "index past the end (index style): numpy backend InternalCompilerError, "
            "interp OutOfBounds, cpu reads garbage or crashes",
            ("internal_error", "wrong_value", "missed_error", "crash", "exception"), features=("oob",)),
    Finding("F16", "item 13", "np.float64 scalars in a kernel body are weak (numpy 2: strong float64)",
            ("wrong_dtype",), features=("np_scalar",)),
    Finding("F18", "item 13", "comparing an int8/uint8 array with a Python int outside its range "
            "wraps the int (numpy compares by value)", ("wrong_value",),
            features=("cmp_out_of_range",)),
    Finding("F19", "new", "splitting an already-split axis of a stage with a fuse: raw "
            "AttributeError ('Fuse' object has no attribute 'parent')", ("exception",),
            pattern=r"'Fuse' object has no attribute 'parent'"),
    Finding("F20", "item 13", "np.clip / kd.clip of uint8 with -1 raises (numpy compares by value)",
            ("false_rejection",), pattern=r"out of bounds for u?int", features=("clip",)),
    Finding("F21", "new", "the cpu default schedule makes an illegal compute_at (sum(axis=0, "
            "keepdims) then sum(axis=1, keepdims))", ("default_schedule_error",),
            pattern=r"compute_at", backends=("cpu",)),
    Finding("F22", "new (GPU core)", "a cross-thread reduction over an empty reduce axis leaves its "
            "result uninitialised (interp, GPU-profile schedules)", ("wrong_value",),
            backends=("interp-gpu",), sched=("explicit",)),
    Finding("F23", "item 13 (GPU core)", "cross-thread reduction legality checked at lowering, not "
            "at bind", ("late_schedule_error",),
            pattern=r"cross-thread reduction|thread-bound reduction axis"),
    Finding("F24", "item 13", "a consumer attached inside its producer's loop (the documented "
            "reverse compute_at): InternalCompilerError 'load outside its allocation'",
            ("internal_error",), pattern=r"outside its allocation"),
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
