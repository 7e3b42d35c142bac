"""Shrink a GPU-schedule fuzz case: drop schedule lines while the same bug persists.

``python -m tests.fuzz.gpu_minimize SEED INDEX`` prints the shortest schedule
(greedy, one line at a time, repeated until nothing more can go) whose run still
gives the same outcome kind and error type (a NameError from a dropped definition
simply keeps that line).  Inputs stay the case's own.
"""
from __future__ import annotations

import sys
import warnings

from .gpu_runner import _judge_lines, generate, setup


def minimize(seed: int, index: int, verbose=False):
    setup()
    case = generate(seed, index)
    want = _judge_lines(case, case.lines)
    lines = list(case.lines)
    changed = True
    while changed:
        changed = False
        for k in range(len(lines) - 1, -1, -1):
            if k >= len(lines):
                continue
            trial = lines[:k] + lines[k + 1:]
            if _judge_lines(case, trial) == want:
                if verbose:
                    print(f"# dropped: {lines[k]}", file=sys.stderr)
                lines = trial
                changed = True
    return case, lines, want


def main(argv=None):
    warnings.simplefilter("ignore")
    argv = argv or sys.argv[1:]
    seed, index = int(argv[0]), int(argv[1])
    case, lines, want = minimize(seed, index)
    case.lines = lines
    print(f"# {seed}:{index} minimised ({want}); inputs: shapes {[a.shape for a in case.args]}, "
          f"dtypes {[a.dtype.name for a in case.args]}")
    print(case.source())
    return 0


if __name__ == "__main__":
    sys.exit(main())
