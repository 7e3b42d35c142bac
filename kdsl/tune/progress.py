"""The progress display of a search: tqdm where installed, else rich, else a plain line.

``make(total, desc, enabled)`` returns an object with ``update(text)`` (one candidate done;
``text``: the best time so far) and ``close()``.  The plain display rewrites one line on a
terminal and prints one line per candidate elsewhere (logs, CI); all of them write to stderr.
"""
from __future__ import annotations

import importlib.util
import sys


class _Off:
    def update(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class _Tqdm:
    def __init__(self, total, desc):
        from tqdm.auto import tqdm
        self.bar = tqdm(total=total, desc=desc, unit="cand", leave=False, file=sys.stderr)

    def update(self, text):
        self.bar.set_postfix_str(text, refresh=False)
        self.bar.update(1)

    def close(self):
        self.bar.close()


class _Rich:
    def __init__(self, total, desc):
        from rich.console import Console
        from rich.progress import Progress
        self.p = Progress(console=Console(file=sys.stderr), transient=True)
        self.p.start()
        self.desc = desc
        self.task = self.p.add_task(desc, total=total)

    def update(self, text):
        self.p.update(self.task, advance=1, description=f"{self.desc} ({text})")

    def close(self):
        self.p.stop()


class _Plain:
    def __init__(self, total, desc):
        self.total, self.desc, self.done = total, desc, 0
        self.tty = getattr(sys.stderr, "isatty", lambda: False)()

    def update(self, text):
        self.done += 1
        line = f"{self.desc}: {self.done}/{self.total} candidates, {text}"
        if self.tty:
            sys.stderr.write("\r" + line + "\033[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self):
        if self.tty and self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()


def make(total: int, desc: str, enabled: bool = True):
    """A progress display for ``total`` candidates (``enabled`` False: none)."""
    if not enabled:
        return _Off()
    for mod, cls in (("tqdm", _Tqdm), ("rich", _Rich)):
        if importlib.util.find_spec(mod) is not None:
            try:
                return cls(total, desc)
            except Exception:     # a broken install: the plain line still works
                pass
    return _Plain(total, desc)
