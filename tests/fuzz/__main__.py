"""``python -m tests.fuzz --cases N --seed S [--backend numpy,interp,cpu]``: run the fuzzer.

Every case runs on every listed backend (default: all installed) in worker
processes (crash isolation, a time limit per task).  Prints a summary, the bugs
grouped by finding, and writes every result to ``--out`` (JSON lines).
``--show I`` prints case I (source per backend, inputs, oracle, outcome) instead.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .backends import BACKENDS, available


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--backend", default=None,
                    help=f"comma-separated, from {', '.join(BACKENDS)} (default: installed defaults)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per task")
    ap.add_argument("--nice", type=int, default=0, help="niceness of the workers")
    ap.add_argument("--max-elems", type=int, default=None,
                    help="largest array of a case (default 400, what the interpreter runs "
                         "quickly); e.g. 100000 for large cases on numpy and cpu")
    ap.add_argument("--no-recheck", action="store_true",
                    help="do not rerun a hung case alone (each recheck costs a timeout)")
    ap.add_argument("--out", default=None, help="write every result here (JSON lines)")
    ap.add_argument("--show", type=int, default=None, help="print one case and run it here")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--jobs", type=int, default=1,
                    help="worker processes side by side (--gpu-schedules only)")
    ap.add_argument("--gpu-schedules", action="store_true",
                    help="explicit TVM-style GPU schedules on interp-cuda + NVRTC (gpu_cli.py)")
    a = ap.parse_args(argv)
    if a.gpu_schedules:
        from . import gpu_cli
        return gpu_cli.show(a.seed, a.show) if a.show is not None else gpu_cli.run(a)
    names = a.backend.split(",") if a.backend else None
    if a.show is not None:
        return show(a.seed, a.show, names, a.max_elems)
    usable = []
    for fb, reason in available(names):
        if reason:
            print(f"skipping backend {fb.name}: {reason}", file=sys.stderr)
        else:
            usable.append(fb.name)
    from .report import summarize
    from .supervise import Supervisor
    sup = Supervisor(timeout=a.timeout, nice=a.nice, recheck_hangs=not a.no_recheck)
    results, secs = [], {b: 0.0 for b in usable}
    out = open(a.out, "w") if a.out else None
    t_start = time.time()
    try:
        for i in range(a.start, a.start + a.cases):
            for be in usable:
                t0 = time.time()
                task = {"seed": a.seed, "index": i, "backend": be}
                if a.max_elems:
                    task["max_elems"] = a.max_elems
                r = sup.run(task)
                secs[be] += time.time() - t0
                if r["outcome"] == "ok":
                    r.pop("source", None)
                results.append(r)
                if out:
                    out.write(json.dumps(r, default=str) + "\n")
                    out.flush()
                if not a.quiet and r["outcome"] in ("bug", "fuzzer_error"):
                    print(f"{a.seed}:{i} {be} {r['outcome']} {r.get('kind')}: "
                          f"{(r.get('detail') or '')[:160]}", flush=True)
            if not a.quiet and (i + 1 - a.start) % 100 == 0:
                print(f"... {i + 1 - a.start} cases, {time.time() - t_start:.0f} s", flush=True)
    finally:
        sup.close()
        if out:
            out.close()
    print(f"\nseed {a.seed}, cases {a.start}..{a.start + a.cases - 1}, "
          f"{time.time() - t_start:.0f} s in all")
    print(summarize(results, secs))
    return 0


def show(seed: int, index: int, names=None, limit=None):
    """Print case ``index``: per backend its source, then run it here and print the outcome."""
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np
    from .case import Config, expected, generate, max_elems, render
    from .runner import make_schedule, run_task
    cfg = Config(max_elems=limit) if limit else Config()
    case = generate(seed, index, cfg)
    print(f"# case {seed}:{index}: family {case.family}, features {sorted(case.features)}, "
          f"largest array {max_elems(case)} elements")
    for j, call in enumerate(case.calls):
        print(f"# call {j}: sizes {call.binding}, layouts {call.layouts}")
        with np.printoptions(threshold=60, precision=4):
            for k, a in enumerate(call.args):
                print(f"#   arg {k}: {a!r}".replace("\n", "\n#     "))
            exp = expected(case, call)
            print(f"#   numpy: {exp if not isinstance(exp, list) else [(o.dtype, o.val) for o in exp]}"
                  .replace("\n", "\n#     "))
    for fb, reason in available(names):
        if reason:
            continue
        print(f"\n# ---- backend {fb.name} ----")
        sched = make_schedule(case, fb, render(case, None, fb.schedules_for))
        print(render(case, sched, fb.schedules_for))
        r = run_task(seed, index, fb.name, cfg, keep_source=False)
        print(f"# outcome: {r['outcome']} {r.get('kind') or ''}: {r.get('detail')}")
        if r.get("traceback"):
            print("# " + "".join(r["traceback"]).replace("\n", "\n# "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
