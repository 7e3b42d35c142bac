"""``TileScan``: how the GPU's tile scan runs one scan stage (issue 25), the record the GPU
default schedule (kdsl.backends.scan_schedules) leaves in ``ScanInfo.tile`` and the
``scan_tiles`` pass (kdsl.gpu.scan_tiles) reads."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as n


@dataclass(frozen=True)
class TileScan:
    """How ``scan_tiles`` runs one scan stage's tiles (stage-level expressions, in the
    stage's axis variables): ``combiner`` (the scan's ``(+)``), ``threads`` per block (a
    multiple or a divisor of 32 gives CUDA's fastest cross-thread scan), ``g`` the element at the stage's own position, and for a segmented scan
    ``first`` (true on the first tile) and ``carry`` (the combine of every tile before it,
    read only where ``first`` is false); both None for a scan of one tile.  ``most``: see
    the field."""

    combiner: n.Combiner
    threads: int
    g: n.Expr
    first: n.Expr | None = None
    carry: n.Expr | None = None
    #: an upper bound of a tile's length (0: unknown): a tile that short is staged in
    #: shared memory first
    most: int = 0


#: the largest tile (bytes) staged in shared memory before its scan (a kernel's static
#: shared memory is at most 48 KiB)
STAGE_BYTES = 40 * 1024


def itemsize(dtype) -> int:
    """Bytes of one element of ``dtype`` in memory."""
    return max(dtype.bits, 8) // 8


