"""Run one GPU-schedule case (``gen_gpu_schedule``) on ``interp-cuda`` + NVRTC and judge it.

Outcomes (``outcome``/``kind`` of the result dict, like ``runner.run_task``'s):

- ``ok``; ``fair_refusal`` (a located kdsl user error with a hint, for a schedule whose
  intent is 'may' or 'illegal', or whose message names a real illegality: ``FAIR``);
- bugs: ``wrong_value`` (incl. NaN, wrong dtype/shape), ``simt_report`` (the SIMT
  interpreter's race / out-of-bounds / divergent-barrier / async-copy reports),
  ``nvrtc_failure`` (the printed CUDA does not generate or compile), ``internal_error``
  (InternalCompilerError or a raw Python exception), ``legal_refused`` (a user error for
  a TVM-legal schedule), ``unfair_refusal`` (a refusal without location or hint),
  ``missed_error`` (an illegal schedule, e.g. > 1024 threads, accepted); ``crash`` /
  ``hang`` come from the supervisor.
"""
from __future__ import annotations

import os
import re
import sys
import time
import traceback

import numpy as np

from .case import rng_for
from .gpu_plan import Plan

BACKEND = "gpu-sched"          # the name results carry (task["backend"])

#: refusals that name a real illegality even for a schedule the generator thought legal
FAIR = [
    r"shared memory .*(exceed|more than|limit)",
    # kdsl's software pipeliner takes one ring depth per loop (says so, with the fix); the
    # generator now picks one count per case, older runs met it
    r"pipelined over loop \S+ with different stage counts",
]


#: what a refusal of an 'illegal' case (a block of > 1024 threads) must name
THREAD_LIMIT = r"1024|threads per block|too many threads|block of \d+ threads"


def generate(seed: int, index: int):
    from .gen_gpu_schedule import GpuCase
    from .gpu_families import FAMILIES
    rng = rng_for(seed, index, 0, BACKEND)
    names = list(FAMILIES)
    w = np.asarray([FAMILIES[k][1] for k in names], np.float64)
    fam = names[int(rng.choice(len(names), p=w / w.sum()))]
    plan = Plan()
    src, args, exp = FAMILIES[fam][0](rng, plan)
    lines = plan.order(rng_for(seed, index, 1, BACKEND))
    feats = set(plan.features)
    dims = [d for a in args for d in a.shape]
    if 0 in dims:
        feats.add("size0")
    if 1 in dims:
        feats.add("size1")
    return GpuCase(seed, index, fam, src, lines, args, exp, feats, plan.intent, plan.why)


_READY = {}


def setup() -> str | None:
    """Register ``cuda`` (kdsl_cuda, for its schedules) and install the NVRTC hook."""
    if "r" in _READY:
        return _READY["r"]
    from .backends import BACKENDS
    reason = BACKENDS["interp-cuda"].setup()
    if reason is None:
        hook_dir = os.path.join(os.path.dirname(os.path.dirname(__file__)), "cuda_codegen")
        if hook_dir not in sys.path:
            sys.path.insert(0, hook_dir)
        import nvrtc_hook
        if not nvrtc_hook.available():
            reason = "the NVRTC hook is off (cuda wheels missing or KDSL_CUDA_COMPILE_ALL=0)"
    _READY["r"] = reason
    return reason


def load(case):
    import linecache
    fname = f"<gpu fuzz case {case.name} #{len(case.lines)}>"
    src = case.source()
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"__name__": "gpu_fuzz_case"}
    exec(compile(src, fname, "exec"), ns)
    return ns["kern"]


def run_gpu_task(seed: int, index: int, keep_source: bool = True) -> dict:
    t0 = time.time()
    res = {"seed": seed, "index": index, "backend": BACKEND, "sched": "explicit"}
    try:
        _judge(res, seed, index, keep_source)
    except Exception as e:      # the fuzzer's own failure, never counted as a kdsl bug
        res.update(outcome="fuzzer_error", kind=type(e).__name__, detail=traceback.format_exc(limit=8))
    res["seconds"] = round(time.time() - t0, 3)
    return res


def _judge(res, seed, index, keep_source):
    reason = setup()
    if reason:
        res.update(outcome="skip", kind=None, detail=reason)
        return
    case = generate(seed, index)
    res.update(family=case.family, features=sorted(case.features), intent=case.intent, why=case.why,
               shapes=[list(a.shape) for a in case.args])
    if keep_source:
        res["source"] = case.source()
    _execute(res, case)


def _judge_lines(case, lines) -> tuple:
    """(outcome, kind, error type) of ``case`` run with schedule ``lines`` (for minimising)."""
    import copy
    c = copy.copy(case)
    c.lines = list(lines)
    r = {}
    try:
        _execute(r, c)
    except Exception as e:      # a dropped definition: not the same bug
        return ("fuzzer_error", type(e).__name__, None)
    return (r.get("outcome"), r.get("kind"), r.get("error_type"))


def _execute(res, case):
    """Run ``case`` (its kernel under its schedule lines) and record the outcome in ``res``."""
    kern = load(case)
    try:
        got = kern(*case.args, backend="interp-cuda")
    except Exception as e:
        _error(res, case, e)
        return
    if case.intent == "illegal":
        res.update(outcome="bug", kind="missed_error", detail=f"no error, expected one: {case.why}")
        return
    outs = got if isinstance(got, tuple) else (got,)
    for k, (g, (dt, val, bound)) in enumerate(zip(outs, case.expected)):
        bad = compare(g, dt, val, bound)
        if bad:
            res.update(outcome="bug", kind="wrong_value", detail=f"output {k}: {bad}")
            return
    res.update(outcome="ok", kind=None, detail="")


def compare(g, dt, val, bound) -> str | None:
    g = np.asarray(g)
    if g.dtype.name != dt:
        return f"dtype {g.dtype.name}, expected {dt}"
    if g.shape != val.shape:
        return f"shape {g.shape}, expected {val.shape}"
    if bound is None:
        ok = g == val
    else:
        gg = g.astype(np.float64)
        with np.errstate(all="ignore"):
            ok = (gg == val) | (np.isnan(gg) & np.isnan(val)) | (np.abs(gg - val) <= bound)
    if np.all(ok):
        return None
    bad = np.argwhere(~ok)
    ex = "; ".join(f"at {tuple(int(i) for i in ix)}: got {g[tuple(ix)]!r}, expected {val[tuple(ix)]!r}"
                   for ix in bad[:3])
    return f"{len(bad)}/{g.size} elements wrong: {ex}"


def _from_hook(e) -> bool:
    """Whether ``e`` was raised by the NVRTC hook (codegen or NVRTC), not by the run."""
    tb = traceback.extract_tb(e.__traceback__)
    return any(f.filename.endswith("nvrtc_hook.py") and f.name == "check" for f in tb)


def _error(res, case, e):
    from kdsl.gpu.simt.races import SimtError
    from kdsl.errors import InternalCompilerError, KdslUserError
    from .check import fairness
    msg = str(e).splitlines()[0] if str(e) else ""
    detail = f"{type(e).__name__}: {msg}"
    res["error_type"] = type(e).__name__
    if _from_hook(e):
        kind = "nvrtc_failure"
        errs = [ln.strip() for ln in str(e).splitlines() if "error" in ln and ln.strip() != msg]
        detail += "".join(f" | {ln}" for ln in errs[:3])
    elif isinstance(e, SimtError):
        kind = "simt_report"
    elif isinstance(e, InternalCompilerError) or not isinstance(e, KdslUserError):
        kind = "internal_error"
    else:
        unfair = fairness(e, explicit=True)
        hint = f" [hint: {e.hint}]" if getattr(e, "hint", None) else ""
        if unfair and case.intent == "legal":
            kind = "legal_refused"
            detail += hint + " [" + "; ".join(unfair) + "]"
        elif unfair:
            kind = "unfair_refusal"
            detail += " [" + "; ".join(unfair) + "]"
        elif case.intent == "illegal" and not re.search(THREAD_LIMIT, e.message + " " + (e.hint or "")):
            kind = "missed_error"      # refused, but for another reason: the limit goes unnamed
            detail = f"refused without naming the illegality ({case.why}): {detail}"
        elif case.intent != "legal" or any(re.search(p, e.message, re.I) for p in FAIR):
            res.update(outcome="fair_refusal", kind=None, detail=detail + hint)
            return
        else:
            kind = "legal_refused"
            detail += hint
    res.update(outcome="bug", kind=kind, detail=detail)
    res["traceback"] = traceback.format_exception(type(e), e, e.__traceback__, limit=14)[-14:]
