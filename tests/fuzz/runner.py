"""Run one task (a case on one backend) in this process and judge it.

The result is a plain dict (JSON-able): seed, index, backend, family, features,
schedule kind, outcome ('ok', 'user_error', 'skip', 'bug', 'fuzzer_error'), bug
kind, detail, the reproducer source, seconds.  ``supervise.py`` runs tasks in
worker processes; this module is what a worker calls.
"""
from __future__ import annotations

import time
import traceback

import numpy as np

from kdsl.errors import KdslUserError

from . import check, gen_schedule
from .backends import BACKENDS
from .case import Config, expected, generate, load, max_elems, render, rng_for
from .oracle import OracleRaise

_SETUP = {}


def _ready(fb) -> str | None:
    if fb.name not in _SETUP:
        _SETUP[fb.name] = fb.setup()
    return _SETUP[fb.name]


def make_schedule(case, fb, src_plain: str):
    """Generate ``case``'s schedule for backend ``fb`` against a live Schedule of its graph."""
    if not fb.schedules or case.sched_kind == "none" or (
            case.sched_kind == "explicit" and not fb.explicit):
        return None
    from kdsl.runtime.signature import signature_from_args
    from kdsl.schedule import Schedule
    ns = load(src_plain, f"<fuzz {case.name} plain>")
    kern = ns["kern"]
    args = case.calls[0].args
    try:
        sig = signature_from_args(args, kern.arg_names, kern.constants, kern.specialize, None)
        graph = kern._graph(sig)
    except KdslUserError:
        return None          # the kernel itself is rejected; the call shows how
    rng = rng_for(case.seed, case.index, 2, fb.profile)
    sched = Schedule(graph)
    if case.sched_kind == "hints":
        return gen_schedule.hints(sched, rng)
    if fb.profile == "gpu-tvm":
        return gen_schedule.gpu_tvm(sched, rng)
    return gen_schedule.explicit(sched, rng, fb.profile)


def rejected_for(src_plain: str, spec, args) -> str | None:
    """The message of the fair user error that replaying explicit schedule ``spec`` raises on
    the graph of a call with ``args``, else None.  ``spec`` was generated against the first
    call's graph; a later call's sizes can make a primitive illegal (a size-1 axis is a
    constant extent, a size-16 one is not), and kdsl then rightly rejects it at that call."""
    from kdsl.runtime.signature import signature_from_args
    from kdsl.schedule import Schedule
    kern = load(src_plain, "<fuzz replay>")["kern"]
    try:
        sig = signature_from_args(args, kern.arg_names, kern.constants, kern.specialize, None)
        L = gen_schedule.Live(Schedule(kern._graph(sig)), None)
        for line in spec.lines:
            L.run(line)
    except KdslUserError as e:
        return e.message if not check.fairness(e) else None
    return None


def run_task(seed: int, index: int, backend: str, cfg: Config | None = None, keep_source=True) -> dict:
    t0 = time.time()
    fb = BACKENDS[backend]
    res = {"seed": seed, "index": index, "backend": backend}
    try:
        _judge(res, seed, index, fb, cfg or Config(), keep_source)
    except Exception as e:     # the fuzzer's own failure: never counted as a kdsl bug
        res.update(outcome="fuzzer_error", kind=type(e).__name__,
                   detail=traceback.format_exc(limit=8))
    res["seconds"] = round(time.time() - t0, 3)
    return res


def _judge(res, seed, index, fb, cfg, keep_source):
    reason = _ready(fb)
    if reason:
        res.update(outcome="skip", kind=None, detail=reason)
        return
    case = generate(seed, index, cfg)
    res.update(family=case.family, features=sorted(case.features), sched=case.sched_kind)
    if case.family in cfg.skip_families:
        res.update(outcome="skip", kind=None, detail=f"family {case.family} skipped")
        return
    if max_elems(case) > fb.max_elems:
        res.update(outcome="skip", kind=None, detail=f"{max_elems(case)} elements")
        return
    plain = render(case, None, fb.schedules_for)
    sched = make_schedule(case, fb, plain)
    src = render(case, sched, fb.schedules_for)
    res["source"] = src if keep_source else None
    res["sched"] = "none" if sched is None else sched.kind
    if sched is not None:
        res["sched_rejected"] = [list(r) for r in sched.rejected]
        res["sched_illegal"] = sched.illegal
        if sched.illegal:
            res["features"] = res["features"] + [f"illegal_{sched.kind}"]
    explicit = sched is None or sched.kind != "hints"
    must = None      # why the call must raise
    may = False      # an error is acceptable (hints without a defined meaning)
    if sched is not None and sched.illegal:
        must = f"schedule: {sched.illegal}"
    if sched is not None and sched.kind == "hints" and not sched.meaningful:
        may = True
    try:
        ns = load(src, f"<fuzz case {seed}:{index} {fb.name}>")
    except Exception as e:
        _record_error(res, e, must or ("may" if may else None), explicit, sched)
        return
    kern = ns["kern"]
    details = []
    for j, call in enumerate(case.calls):
        exp = expected(case, call)
        call_must = must
        if isinstance(exp, OracleRaise):
            call_must = f"numpy: {exp}"
        before = [np.array(a) if isinstance(a, np.ndarray) else a for a in call.args]
        try:
            got = kern(*call.args, backend=fb.target)
        except Exception as e:
            if (call_must is None and j > 0 and sched is not None and sched.kind == "explicit"
                    and isinstance(e, KdslUserError) and rejected_for(plain, sched, call.args) == e.message):
                call_must = f"schedule: illegal for call {j}'s sizes"
            _record_error(res, e, call_must or ("may" if may else None), explicit, sched, j)
            if res["outcome"] == "bug" or call_must or may:
                return
            continue
        for a, b in zip(call.args, before):
            if isinstance(a, np.ndarray) and not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                res.update(outcome="bug", kind="clobbered_input", detail=f"call {j}: an input was modified")
                return
        if call_must:
            res.update(outcome="bug", kind="missed_error", detail=f"call {j}: no error, expected "
                       f"one ({call_must})", call=j)
            return
        outs = got if isinstance(got, tuple) else (got,)
        if len(outs) != len(exp):
            res.update(outcome="bug", kind="wrong_shape", detail=f"{len(outs)} results, expected {len(exp)}")
            return
        for k, (g, e) in enumerate(zip(outs, exp)):
            kind, det = check.compare(e, g)
            if kind is not None:
                res.update(outcome="bug", kind=kind, detail=f"call {j} output {k}: {det}", call=j,
                           binding=call.binding, layouts=call.layouts)
                return
            details.append(det)
    res.update(outcome="ok", kind=None, detail="; ".join(details[:3]))


def _record_error(res, e, expect, explicit, sched, call=None):
    ok_at_call = sched is None or (sched.kind == "explicit" and not sched.illegal)
    outcome, kind, detail = check.classify_error(e, expect, explicit, ok_at_call)
    if kind == "late_schedule_error" and sched is None:
        kind = "default_schedule_error"
    if outcome == "bug" and kind == "false_rejection" and sched is not None and sched.kind == "hints":
        kind = "hint_rejected"
    res.update(outcome=outcome, kind=kind, detail=detail, call=call,
               error_type=type(e).__name__)
    if outcome == "bug":
        res["traceback"] = traceback.format_exception(type(e), e, e.__traceback__, limit=12)[-12:]
