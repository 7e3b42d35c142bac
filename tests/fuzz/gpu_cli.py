"""``python -m tests.fuzz --gpu-schedules --cases N --seed S``: the GPU-schedule campaign.

Each case (``gpu_runner.generate``) runs in a worker process (crash isolation, a
time limit) on ``interp-cuda`` with every kernel NVRTC-compiled; prints each bug
as it comes (its known finding id, or NEW), then throughput (cases/s), a table by
outcome and the bugs grouped by finding.  ``--show I`` prints case I (kernel,
schedule, inputs, oracle) and runs it here: the complete reproducer.
"""
from __future__ import annotations

import json
import time
from collections import Counter

from .known import match_known
from .report import summarize

OUTCOMES = [("ok", "right answer"), ("fair_refusal", "fair refusal"),
            ("bug:wrong_value", "wrong answer"), ("bug:simt_report", "SIMT race/OOB report"),
            ("bug:nvrtc_failure", "NVRTC/codegen failure"), ("bug:internal_error", "internal error"),
            ("bug:legal_refused", "legal schedule refused"), ("bug:unfair_refusal", "unfair refusal"),
            ("bug:missed_error", "illegal schedule accepted"), ("bug:crash", "crash"),
            ("bug:hang", "hang"), ("fuzzer_error", "fuzzer error"), ("skip", "skipped")]


def key(r: dict) -> str:
    return r["outcome"] if r["outcome"] != "bug" else f"bug:{r.get('kind')}"


def table(results: list, secs: float) -> str:
    """The summary table by outcome, with known/NEW split for bugs."""
    c = Counter(key(r) for r in results)
    new = Counter(key(r) for r in results if r["outcome"] in ("bug", "fuzzer_error") and not match_known(r))
    n = len(results) or 1
    lines = [f"{'outcome':34s} {'cases':>6s} {'%':>6s} {'NEW':>5s}"]
    seen = set()
    for k, label in OUTCOMES + [(k, k) for k in sorted(c) if k not in dict(OUTCOMES)]:
        if k in seen or not c.get(k):
            continue
        seen.add(k)
        lines.append(f"{label + ' (' + k + ')':34s} {c[k]:6d} {100 * c[k] / n:6.1f} {new.get(k, 0):5d}")
    lines.append(f"{'total':34s} {len(results):6d}   in {secs:.0f} s: "
                 f"{len(results) / max(secs, 1e-9):.2f} cases/s, {secs / n:.2f} s/case")
    return "\n".join(lines)


def run(a) -> int:
    """The campaign: cases ``a.start ..`` of seed ``a.seed``, ``a.jobs`` workers side by side
    (threads, each driving its own supervised worker process; results in index order)."""
    import threading
    from .gpu_runner import setup
    from .supervise import Supervisor
    reason = setup()
    if reason:
        print(f"gpu-schedules: {reason}")
        return 1
    jobs = max(1, getattr(a, "jobs", 1))
    out = open(a.out, "w") if a.out else None
    results: dict = {}
    lock = threading.Lock()
    t0 = time.time()

    def shard(k: int) -> None:
        sup = Supervisor(timeout=a.timeout, nice=a.nice, recheck_hangs=not a.no_recheck)
        try:
            for i in range(a.start + k, a.start + a.cases, jobs):
                r = sup.run({"seed": a.seed, "index": i, "backend": "gpu-sched"})
                if r["outcome"] == "ok":
                    r.pop("source", None)
                with lock:
                    results[i] = r
                    if out:
                        out.write(json.dumps(r, default=str) + "\n")
                        out.flush()
                    if not a.quiet and r["outcome"] in ("bug", "fuzzer_error"):
                        fid = match_known(r) or "NEW"
                        print(f"{a.seed}:{i} {r.get('family')} {fid} {r.get('kind')}: "
                              f"{(r.get('detail') or '')[:150]}", flush=True)
                    done = len(results)
                    if not a.quiet and done % 100 == 0:
                        dt = time.time() - t0
                        print(f"... {done} cases, {dt:.0f} s, {done / dt:.2f} cases/s", flush=True)
        finally:
            sup.close()

    threads = [threading.Thread(target=shard, args=(k,), daemon=True) for k in range(jobs)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if out:
            out.close()
    results = [results[i] for i in sorted(results)]
    secs = time.time() - t0
    print(f"\ngpu-schedules: seed {a.seed}, cases {a.start}..{a.start + a.cases - 1}")
    print(table(results, secs))
    print(summarize(results))
    print(f"\nreproduce one: python -m tests.fuzz --gpu-schedules --seed {a.seed} --show INDEX")
    return 0


def show(seed: int, index: int) -> int:
    """Print case ``index`` as a complete program, then run it here and print the outcome."""
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np
    from .gpu_runner import generate, run_gpu_task
    case = generate(seed, index)
    print(f"# gpu-schedule case {seed}:{index}: family {case.family}, intent {case.intent}"
          f"{' (' + case.why + ')' if case.why else ''}, features {sorted(case.features)}")
    print(case.source())
    with np.printoptions(threshold=80, precision=4):
        for k, a in enumerate(case.args):
            print(f"# arg {k}: shape {a.shape} {a.dtype} strides {a.strides} "
                  f"{'C' if a.flags.c_contiguous else 'F' if a.flags.f_contiguous else 'strided'}")
            print(f"arg{k} = np.array({a.tolist()!r}, np.{a.dtype.name})"
                  + (".T.copy().T" if a.flags.f_contiguous and not a.flags.c_contiguous and a.ndim == 2 else ""))
        print(f"print(kern({', '.join(f'arg{k}' for k in range(len(case.args)))}, backend='interp-cuda'))")
        for k, (dt, val, _) in enumerate(case.expected):
            print(f"# expected output {k} ({dt}): {val!r}".replace("\n", "\n#   "))
    r = run_gpu_task(seed, index, keep_source=False)
    print(f"# outcome: {r['outcome']} {r.get('kind') or ''} [{match_known(r) or ('NEW' if r['outcome'] == 'bug' else '-')}]: "
          f"{r.get('detail')}")
    if r.get("traceback"):
        print("# " + "".join(r["traceback"]).replace("\n", "\n# "))
    return 0
