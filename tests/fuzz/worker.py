"""A worker process: reads tasks (JSON lines) on stdin, answers on its own pipe.

Each task is ``{"seed", "index", "backend"}``; the worker first says
``{"event": "start"}`` (so the supervisor knows what a crash interrupted), runs
it, and answers the result.  Everything the run writes to file descriptors 1
and 2 (LLVM remarks, stray prints) is captured per task: a compiler's raw text
reaching the user is itself a finding (``raw_output``).
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import warnings

_RAW = re.compile(r"^(warning|remark|error|note): .*$", re.MULTILINE)


def main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    cap = tempfile.TemporaryFile()
    os.dup2(cap.fileno(), 1)
    os.dup2(cap.fileno(), 2)
    warnings.simplefilter("ignore")     # numpy's own RuntimeWarnings (x / 0) are numpy's behaviour
    from .case import Config
    from .runner import run_task
    cfg = Config()
    for line in sys.stdin:
        task = json.loads(line)
        proto.write(json.dumps({"event": "start", **task}) + "\n")
        cap.seek(0)
        cap.truncate()
        if "selftest" in task:      # the supervisor's own tests: die or stall on purpose
            _selftest(task["selftest"])
        if task["backend"] == "gpu-sched":     # the explicit GPU-schedule generator
            from .gpu_runner import run_gpu_task
            res = run_gpu_task(task["seed"], task["index"])
        else:
            c = cfg
            if task.get("max_elems") or task.get("skip_families"):
                c = Config(max_elems=task.get("max_elems") or cfg.max_elems,
                           skip_families=tuple(task.get("skip_families") or ()))
            res = run_task(task["seed"], task["index"], task["backend"], c)
        sys.stdout.flush()
        sys.stderr.flush()
        cap.seek(0)
        text = cap.read().decode("utf-8", "replace")
        raw = _RAW.findall(text) and [m.group(0) for m in _RAW.finditer(text)]
        if raw:
            res["raw_output"] = sorted(set(raw))[:5]
            if res.get("outcome") in ("ok", "user_error"):
                res.update(outcome="bug", kind="raw_output",
                           detail="printed to the user: " + " | ".join(sorted(set(raw))[:3]))
        proto.write(json.dumps(res, default=str) + "\n")


def _selftest(what):
    import ctypes
    import time
    if what == "segv":
        ctypes.string_at(0)
    elif what == "hang":
        time.sleep(3600)


if __name__ == "__main__":
    main()
