"""Run tasks in worker processes with a time limit each, surviving crashes.

A task that kills its worker (segfault, abort) is reported as a ``crash`` and
run again alone in a fresh worker: if it crashes alone it is the culprit;
otherwise the tasks the dead worker ran before it are bisected for the
shortest sequence that still crashes (state left behind by an earlier case).
A task past its limit is a ``hang``: the worker is killed and replaced.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from .backends import ROOT

HISTORY = 48


class Worker:
    """One worker process."""

    def __init__(self, cache_dir: str, nice: int = 0):
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env["KDSL_CACHE_DIR"] = cache_dir
        env.setdefault("PYTHONFAULTHANDLER", "1")
        pre = (lambda: os.nice(nice)) if nice else None
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.fuzz.worker import main; main()"], cwd=ROOT,
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
            preexec_fn=pre)
        self.buf = b""
        self.history = []

    def _line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return "timeout"
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if not r:
                return "timeout"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return "eof"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def run(self, task: dict, timeout: float):
        """The result dict, or ("crash", returncode) / ("hang", None)."""
        try:
            self.proc.stdin.write((json.dumps(task) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return ("crash", self.proc.wait())
        self.history.append(task)
        deadline = time.time() + timeout
        for _ in range(2):   # the start event, then the result
            got = self._line(deadline)
            if got == "timeout":
                self.kill()
                return ("hang", None)
            if got == "eof":
                return ("crash", self.proc.wait())
            if got.get("event") != "start":
                return got
        return ("crash", self.proc.wait())

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._close_pipes()

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.kill()
        self._close_pipes()

    def _close_pipes(self):
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass


def _signame(rc):
    if rc is not None and rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            pass
    return f"exit code {rc}"


class Supervisor:
    """Runs tasks one at a time per worker; ``jobs`` workers side by side."""

    def __init__(self, timeout: float = 90.0, nice: int = 0, recheck_hangs: bool = True):
        self.timeout, self.nice, self.recheck_hangs = timeout, nice, recheck_hangs
        self.cache_dir = tempfile.mkdtemp(prefix="kdsl-fuzz-cache-")
        self.worker = None

    def _fresh(self):
        if self.worker is not None:
            self.worker.kill()
        self.worker = Worker(self.cache_dir, self.nice)
        return self.worker

    def run(self, task: dict) -> dict:
        w = self.worker or self._fresh()
        got = w.run(task, self.timeout)
        if isinstance(got, dict):
            return got
        what, rc = got
        history = w.history[:-1][-HISTORY:]
        self.worker = None
        res = dict(task, outcome="bug", kind=what, family=None)
        w.kill()
        res["detail"] = (f"no result within {self.timeout:.0f} s" if what == "hang"
                         else f"the worker died ({_signame(rc)})")
        if what == "hang" and not self.recheck_hangs:
            res["detail"] += " (not rechecked)"
        elif self._fails([task], what):
            res["detail"] += "; also when run alone"
        else:
            culprit = self._bisect(history, task, what)
            res["detail"] += ("; not alone: only after " + culprit) if culprit else \
                "; not reproducible (flaky)"
        return res

    def _fails(self, tasks, what) -> bool:
        """Whether running ``tasks`` in a fresh worker ends in ``what`` (crash/hang) on the last."""
        w = Worker(self.cache_dir, self.nice)
        try:
            for t in tasks:
                got = w.run(t, self.timeout)
                if not isinstance(got, dict):
                    return got[0] == what and t is tasks[-1]
            return False
        finally:
            w.kill()

    def _bisect(self, history, task, what):
        """The shortest suffix of ``history`` after which ``task`` fails (as text)."""
        if not history or not self._fails(history + [task], what):
            return None
        lo, hi = 0, len(history) - 1     # history[lo:] + [task] fails; history[hi+1:] does not
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._fails(history[mid:] + [task], what):
                lo = mid
            else:
                hi = mid - 1
        first = history[lo]
        return f"task {first['seed']}:{first['index']} on {first['backend']} ({len(history) - lo} task(s) before)"

    def close(self):
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        shutil.rmtree(self.cache_dir, ignore_errors=True)
