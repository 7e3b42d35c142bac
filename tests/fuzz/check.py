"""Judging one run: compare a result with the oracle, judge an error's fairness, classify.

Outcomes: ``ok``; ``user_error`` (the kernel, schedule or call is invalid — numpy
raises too, or the schedule breaks a documented rule — and kdsl says so fairly);
``skip`` (the backend does not take this case, e.g. too big for the interpreter);
``bug`` with a ``kind``: wrong_value, wrong_dtype, wrong_shape, internal_error
(InternalCompilerError), exception (any other Python exception), crash (the
process died), hang (past the time limit), unfair_error (a user error without a
location in the user's code, without a hint saying what would work, printing raw
IR objects or internal axis names the user never created), false_rejection (kdsl
refuses a kernel numpy computes), missed_error (no error where numpy raises or a
schedule is illegal), late_schedule_error (a schedule accepted at the primitive
call but rejected later), raw_output (a compiler's raw text printed to the user).
"""
from __future__ import annotations

import re

import numpy as np

from kdsl.errors import InternalCompilerError, KdslUserError, ScheduleError, _is_internal

from . import fdtypes as fd
from .oracle import OVal

_RAW_IR = re.compile(r"\b(IterVar|TensorRead|Var|Binary|Const|Compare|Cast|Select|Reduce|Call|"
                     r"Range|Buffer|Load|Store)\(|object at 0x|<kdsl\.")
_INTERNAL_AXIS = re.compile(r"\b[A-Za-z_]\w*\.(inner|outer|fused|v)\b|\w\.rf\b")
#: a message that states what would work in its own text (a requirement, what exists, an example)
_ALTERNATIVES = re.compile(r"(axes are|has axes|has loop axes|stages:|the hints are|use one of|readers of|"
                           r"supported dtypes|e\.g\.|use |give |pass |cast |name each|make |must be |"
                           r"must have |split it|call it )", re.IGNORECASE)


def fairness(e: BaseException, explicit: bool = True) -> list:
    """What is unfair about error ``e`` (empty: fair).  ``explicit``: the user wrote the
    schedule primitives themselves (so split/fuse names are theirs)."""
    if not isinstance(e, KdslUserError):
        return [f"not a kdsl user error ({type(e).__name__})"]
    probs = []
    loc = e.loc
    if loc is None:
        probs.append("no source location")
    elif _is_internal(loc.file):
        probs.append(f"location inside kdsl ({loc.short})")
    text = e.message + " " + (e.hint or "")
    if not e.hint and not _ALTERNATIVES.search(e.message):
        probs.append("no hint saying what would work")
    if _RAW_IR.search(text):
        probs.append("raw IR objects in the message")
    if not explicit and _INTERNAL_AXIS.search(text):
        probs.append("names internal axes/stages the user never created")
    return probs


def compare(exp: OVal, got) -> tuple[str | None, str]:
    """(bug kind or None, detail) of a result against the oracle."""
    if not isinstance(got, np.ndarray):
        if isinstance(got, np.generic):
            got = np.asarray(got)
        else:
            return "wrong_shape", f"result is a {type(got).__name__}, not an array"
    if got.dtype.name != exp.dtype:
        return "wrong_dtype", f"dtype {got.dtype.name}, numpy gives {exp.dtype}"
    if got.shape != tuple(np.shape(exp.val)):
        return "wrong_shape", f"shape {got.shape}, numpy gives {np.shape(exp.val)}"
    mask = exp.M()
    if fd.is_float(exp.dtype):
        g = got.astype(np.float64)
        v = np.asarray(exp.val, np.float64)
        tol = 2 * exp.E() + 2 * fd.TINY[exp.dtype]
        with np.errstate(all="ignore"):
            ok = mask | (np.isnan(v) & np.isnan(g)) | (v == g) | (np.isfinite(v) & (np.abs(g - v) <= tol))
    else:
        ok = mask | (got == np.asarray(exp.val).astype(got.dtype))
    if np.all(ok):
        return None, f"{int(mask.sum())}/{mask.size} undetermined"
    bad = np.argwhere(~ok)
    lines = []
    for ix in bad[:4]:
        ix = tuple(int(i) for i in ix)
        e = np.asarray(exp.val)[ix]
        bound = f" (bound {float(np.asarray(exp.E())[ix]) * 2:.3g})" if fd.is_float(exp.dtype) else ""
        lines.append(f"at {ix}: got {got[ix]!r}, expected {e!r}{bound}")
    return "wrong_value", f"{len(bad)}/{got.size} elements wrong: " + "; ".join(lines)


def classify_error(e: BaseException, expect: str | None, explicit: bool, sched_ok_at_call: bool) -> tuple:
    """(outcome, bug kind, detail) for an exception a kernel call raised.

    ``expect``: why an error is expected ('numpy: ...', 'schedule: ...', 'hint: ...') or None.
    ``sched_ok_at_call``: every schedule primitive was accepted when it was called.
    """
    detail = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if isinstance(e, InternalCompilerError):
        return "bug", "internal_error", detail
    if not isinstance(e, KdslUserError):
        return "bug", "exception", detail
    unfair = fairness(e, explicit)
    if unfair:
        return "bug", "unfair_error", detail + " [" + "; ".join(unfair) + "]"
    if expect is not None:
        return "user_error", None, detail
    if isinstance(e, ScheduleError) and sched_ok_at_call and explicit:
        return "bug", "late_schedule_error", detail
    return "bug", "false_rejection", detail
