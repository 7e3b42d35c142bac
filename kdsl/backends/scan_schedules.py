"""Default schedules of ``kd.scan`` stages (kdsl.frontend.scan) for the cpu and GPU backends.

A scan stage keeps its scan axis ``t`` one serial loop (kdsl.passes.scan_check).  When
the update reads the state at its own position along the other axes (``pointwise``):

- GPU: the other axes are fused, split by ``threads`` and bound to ``blockIdx.x`` /
  ``threadIdx.x``; ``t`` is the innermost loop, so each thread runs the steps of its
  positions in order (one kernel launch, no synchronisation);
- cpu: the other axes go first and the outermost is parallel; ``t`` runs inside.

Other scans (the update reads neighbouring positions of the previous step, or a scan with
no other axis) stay serial: on the GPU one thread runs the whole nest (one block) (no grid-wide barrier exists), on the cpu one core.
The backends' default schedules call ``take_scans`` to keep their own plans off these
stages and ``gpu_scan``/``cpu_scan`` after realising the rest.
"""
from __future__ import annotations

from ..schedule.records import AttachKind


def take_scans(sched, plans: dict) -> list:
    """Remove the plans of scan stages from ``plans``; return those stages' handles."""
    out = []
    for h in sched.stages:
        info = getattr(h.stage, "scan", None)
        if info is not None and h.attach is not AttachKind.INLINE:
            plans.pop(h.name, None)          # per-step stages (StepOf) too: kdsl attaches them
            if hasattr(info, "init_steps"):
                out.append(h)
    return out


def _split_axes(h):
    info = h.stage.scan
    t = h.stage.axes[info.axis]
    if h.relations or h.attrs or list(h.leaf) != list(h.stage.axes):
        return None, None          # scheduled already (by the user): leave it
    return t, [a for a in h.stage.axes if a is not t]


def gpu_scan(sched, h, threads: int = 256) -> None:
    """The GPU default of one scan stage (module docstring)."""
    t, others = _split_axes(h)
    if t is None:
        return
    if not others or not h.stage.scan.pointwise:
        # one thread runs the whole nest: a kernel of one block (its scan loop split in 1 part)
        if h.leaf[0] is not t:
            h.reorder(t, *others)
        one, _ = h.split(t, nparts=1)
        h.bind(one, "blockIdx.x")
        return
    h.reorder(*others, t)
    f = h.fuse(*others) if len(others) > 1 else others[0]
    bo, bi = h.split(f, factor=threads)
    h.bind(bo, "blockIdx.x")
    h.bind(bi, "threadIdx.x")


def cpu_scan(sched, h) -> None:
    """The cpu default of one scan stage (module docstring)."""
    t, others = _split_axes(h)
    if t is None or not others or not h.stage.scan.pointwise:
        return
    h.reorder(*others, t)
    h.parallel(others[0])
