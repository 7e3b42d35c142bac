"""The loop that runs a kd.scan's scan axis through a stage's splits (shared by the primitives'
checks in ``schedule.stage`` and the ``scan_legality`` pass, ``kdsl.passes.scan_check``)."""
from __future__ import annotations

from .records import Fuse, Split


def scan_leaf(h, t):
    """The leaf loop that runs the scan axis ``t``, and the loops of extent 1 split off it
    (``split(t, nparts=1)``: a GPU scan with no other axis binds that one to a block) or, in
    a segmented scan (``ScanInfo.segment``), the loop over its segments (``split(t,
    factor=segment)``: each segment restarts the recurrence, so that loop may run in
    parallel); None when ``t`` was fused or split into parts that both iterate otherwise."""
    units = set()
    segment = getattr(getattr(h.stage, "scan", None), "segment", 0)
    for rel in h.relations:
        if isinstance(rel, Split) and rel.parent is t:
            if segment and rel.factor == segment and not units:
                units.add(rel.outer)
                t = rel.inner
            elif rel.nparts == 1:
                units.add(rel.outer)
                t = rel.inner
            elif rel.factor == 1:
                units.add(rel.inner)
                t = rel.outer
            else:
                return None, units
        elif isinstance(rel, Fuse) and t in (rel.outer, rel.inner):
            return None, units
    return t, units
