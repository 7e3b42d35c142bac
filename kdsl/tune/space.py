"""Tuning spaces: the candidate schedules ``kernel.tune`` tries, as declarative hints.

A candidate is a list of hint dicts in ``kd.schedule``'s vocabulary (a dict without
``stage`` adjusts the kernel's main stage: its first output, or the reduction it casts);
``[]`` is the backend's default schedule, always tried first.  A candidate only adjusts
the default (hints never replace it), so every candidate is a schedule the backend could
have been asked for by a user, and each one's results are checked before it may win.

Where they come from, first that applies: ``tune(space=...)`` (a list, or ``f(sched)``),
the backend's ``BackendSpec.tuning_space(sched, hints)``, else the defaults below for the
backend's schedule target:

* ``cpu``: vector width, unroll factor, 2-D tiles of the two innermost spatial axes,
  partial reductions (``rfactor``) for reductions, thread counts; then tiles x widths and
  widths x unroll factors;
* ``cuda`` (and ``interp-cuda``): block shapes (``threads``), elements per thread
  (``vectorize``), partial reductions across blocks (``rfactor``); matrix products: block
  tiles with their k step and multi-buffering (``stages``);
* anything else (``interp``): tiles, vector widths and unroll factors.

The generator's own (mr, nr, kc) register tiles (kdsl/schedule/generator.py) are not hints
(a hint falls back from its recipe to the generic plan), so they are not searched here;
the cpu default already takes its analytical best.
"""
from __future__ import annotations

import json

from .. import config


def _main_stage(sched):
    """The stage hints without ``stage=`` adjust (kdsl.schedule.hints' rule)."""
    from ..schedule.hints import Hint, _stage_of
    return _stage_of(sched, Hint(None, {})).stage


def _names(st):
    from ..schedule.plan import reduce_names, spatial_names
    return spatial_names(st), reduce_names(st)


def cpu_space(sched, hints=()) -> list:
    """The cpu backend's default space (see the module docstring)."""
    st = _main_stage(sched)
    sp, rd = _names(st)
    one = [[{"vectorize": w}] for w in (4, 8, 16)] + [[{"unroll": u}] for u in (2, 4)]
    tiles = []
    if len(sp) >= 2:
        tiles = [{sp[-2]: a, sp[-1]: b} for a in (4, 16, 64) for b in (16, 64)]
        one += [[{"tile": t}] for t in tiles]
    if rd:
        one += [[{"rfactor": r}] for r in (2, 4, 8)]
    cores = config.usable_cores()
    if cores > 1:
        one += [[{"threads": t}] for t in sorted({1, max(1, cores // 2)}) if t != cores]
    two = [[{"tile": t, "vectorize": w}] for t in tiles for w in (8, 16)]
    two += [[{"vectorize": w, "unroll": u}] for w in (8, 16) for u in (2, 4)]
    return one + two


def cuda_space(sched, hints=()) -> list:
    """The cuda backend's default space (see the module docstring)."""
    st = _main_stage(sched)
    sp, rd = _names(st)
    if rd and len(sp) >= 2 and len(st.reads()) >= 2:      # a contraction: block tiles
        out = []
        for a, b in ((64, 64), (128, 64), (64, 128), (128, 128), (32, 32)):
            for k in (16, 32):
                out.append([{"tile": {sp[-2]: a, sp[-1]: b, rd[0]: k}}])
        out += [[{"stages": s}] for s in (2, 3)]
        out += [[{"tile": {sp[-2]: 128, sp[-1]: 128, rd[0]: 32}, "stages": s}] for s in (2, 3)]
        return out
    if rd:                                                # reductions: rows per block, cuts
        out = [[{"threads": (t,)}] for t in (64, 128, 256, 512)]
        out += [[{"rfactor": r}] for r in (1, 8, 32)]
        out += [[{"vectorize": v}] for v in (1, 2, 4)]
        out += [[{"threads": (t,), "vectorize": v}] for t in (128, 256) for v in (2, 4)]
        return out
    out = [[{"threads": (t,)}] for t in (64, 128, 256, 512, 1024)]
    out += [[{"vectorize": v}] for v in (1, 2, 4, 8)]
    out += [[{"threads": (t,), "vectorize": v}] for t in (128, 256) for v in (2, 4)]
    return out


def generic_space(sched, hints=()) -> list:
    """Tiles, vector widths and unroll factors (targets without a space of their own)."""
    st = _main_stage(sched)
    sp, _ = _names(st)
    out = [[{"unroll": u}] for u in (2, 4)] + [[{"vectorize": w}] for w in (4, 8)]
    if sp:
        out += [[{"tile": {sp[-1]: t}}] for t in (4, 16)]
    return out


#: schedule target -> its default space
DEFAULTS = {"cpu": cpu_space, "cuda": cuda_space}


def candidates(backend, sched, hints, space=None) -> list:
    """The candidates to try, in order: the default schedule first, no duplicates; each a list
    of hint dicts.  ``space``: the caller's list (a candidate may be one dict) or ``f(sched)``."""
    if space is None:
        make = backend.spec.tuning_space
        if make is None:
            make = DEFAULTS.get(backend.spec.schedule_target, generic_space)
        raw = make(sched, hints)
    else:
        raw = space(sched) if callable(space) else space
    out, seen = [[]], {"[]"}
    for c in raw:
        c = [c] if isinstance(c, dict) else list(c)
        if not all(isinstance(d, dict) for d in c):
            from ..errors import KdslUserError
            raise KdslUserError(f"kernel.tune: a candidate must be a dict of schedule hints or a "
                                f"list of them, got {c!r}",
                                hint="e.g. space=[{'vectorize': 8}, {'tile': {'i0': 16}}]")
        k = json.dumps(c, sort_keys=True, default=repr)
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out
