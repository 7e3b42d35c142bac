"""The records that mark ``kd.scan`` stages (kdsl.frontend.scan), importable from anywhere
(schedules, passes, backends) without the tracing machinery."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScanInfo:
    """What makes a stage a scan: its scan axis (position in ``Stage.axes``), the number of
    steps ``init`` gives, and whether every read of the state is at the step's own position
    along the other axes (then those axes may run in parallel around the scan loop)."""

    axis: int
    init_steps: int
    pointwise: bool
    #: names of the stages tracing made for reductions inside ``update`` that read the state
    #: (``kd.sum(L[i, j] * x[j], axis=j)``): each is computed per step, inside the scan loop
    steps: tuple = ()
    #: an associative scan, ``s[t] = s[t - 1] (+) g(t)`` with ``s[t0] = g(t0)`` (cumsum, cummax,
    #: np.bitwise_xor.accumulate...): the Combiner of ``(+)`` (kind None: its ``result``
    #: expression is the combine, NaN rules included); ``g`` is the init branch of the stage's
    #: body.  Such a scan may be rewritten into a parallel blocked scan
    #: (kdsl.backends.scan_blocked); None for other scans
    assoc: object = None
    #: with ``assoc``: which one, "sum", "prod", "max", "min", "and", "or" or "xor" (the numpy
    #: reference evaluates it with the matching ufunc's ``accumulate``)
    assoc_kind: str = ""
    #: a *segmented* scan (made by that rewrite): the recurrence restarts every ``segment``
    #: steps, so the scan loop may be split by exactly ``segment`` with its outer part
    #: parallel (kdsl.passes.scan_check); 0 for a plain scan
    segment: int = 0
    #: a scan with a tuple state (``init``/``update`` return tuples): the position of the
    #: trailing *member* axis (one element per member) or None; its loop stays inside the scan
    #: loop, in one thread, and the update may read any member of earlier steps
    members: int | None = None
    #: run by the GPU's tile scan (issue 25): a ``kdsl.gpu.scan_tiles.TileScan`` saying how,
    #: set by the GPU default schedule (kdsl.backends.scan_schedules); None otherwise
    tile: object = None


@dataclass(frozen=True)
class StepOf:
    """``Stage.scan`` of an auxiliary stage computed once per step of the scan ``owner``
    (a stage name); ``axis`` is its axis that runs along the owner's scan axis."""

    owner: str
    axis: int


def reads_earlier_steps(reader, producer) -> bool:
    """``reader`` is a per-step stage of the scan ``producer``: its reads of the scan are of
    earlier steps, ordered by the scan loop it runs in, not a producer-before-consumer edge."""
    a = getattr(reader, "scan", None)
    return isinstance(a, StepOf) and a.owner == producer.name
