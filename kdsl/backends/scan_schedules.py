"""Default schedules of ``kd.scan`` stages (kdsl.frontend.scan) for the cpu and GPU backends.

A scan stage keeps its scan axis ``t`` one serial loop (kdsl.passes.scan_check).  When
the update reads the state at its own position along the other axes (``pointwise``):

- GPU: the other axes are fused, split by ``threads`` and bound to ``blockIdx.x`` /
  ``threadIdx.x``; ``t`` is the innermost loop, so each thread runs the steps of its
  positions in order (one kernel launch, no synchronisation);
- cpu: the other axes go first and the outermost is parallel; ``t`` runs inside.

An associative scan (cumsum, cummax, the bitwise accumulates: ``ScanInfo.assoc``) whose scan
axis is long while its other axes are few is rewritten into a parallel blocked scan
(kdsl.backends.scan_blocked: block totals, a scan of the totals, a segmented scan):

- GPU: when the scan axis may reach ``GPU_BLOCK_MIN`` steps and the other axes hold at most
  ``GPU_OTHERS_MAX`` positions (``sched.size_hints``).  Along the last axis, the tile scan
  (``gpu_tiled``, kdsl.gpu.scan_tiles): tiles of ``GPU_TILE_THREADS * GPU_TILE_ROWS``
  steps, a block each, the block totals a cross-thread reduction, the totals' scan tiled
  again unless one tile (at most ``GPU_ONE_TILE_BYTES``) holds it.  Along another axis,
  blocks of ``GPU_CHUNK`` steps, one per thread (neighbouring threads read neighbouring
  positions of the other axes); the totals' scan is blocked again until it is at most
  ``GPU_BLOCK_MIN`` long;
- GPU, many short rows: a scan along the last axis whose rows are at least ``GPU_ROW_MIN``
  steps and at most one staged tile long (``_short_rows``) is one tile per row, a block each,
  of ``_row_threads`` threads (about ``GPU_ROW_PER`` elements each by the shortest row of the
  size class): coalesced loads and stores through shared memory, whatever the number of rows
  (before: a thread per row, serial, rows a row apart: 0.31 ms for float32 [65536, 256] on an
  H200, now 0.049; torch.cumsum 0.073).  Shorter rows keep a thread per row;
- cpu: a scan with no other axis, or only axes of size 1 (the pointwise default is parallel
  otherwise); blocks of
  ``CPU_CHUNK`` steps shared among the threads, the totals' scan serial.

Other scans (the update reads neighbouring positions of the previous step, or a scan with
no other axis) stay serial: on the GPU one thread runs the whole nest (one block) (no grid-wide barrier exists), on the cpu one core.
The backends' default schedules call ``take_scans`` to keep their own plans off these
stages and ``gpu_scan``/``cpu_scan`` after realising the rest.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import make as mk
from ..ir.evaluate import eval_expr
from ..ir.visitor import free_vars
from ..schedule.records import AttachKind
from ..schedule.scan_tile import STAGE_BYTES, TileScan, itemsize
from .scan_blocked import blocked_scan, blocked_scan_parts, can_block

GPU_BLOCK_MIN = 256      # steps: a longer associative scan is blocked on the GPU
GPU_OTHERS_MAX = 8192    # positions of the other axes: more fill the GPU with serial scans
GPU_CHUNK = 32           # steps per block (one thread each)
GPU_LEVELS = 4           # at most this many levels of blocks (sizes unknown: 32**4 shorter)
CPU_CHUNK = 1024         # steps per block on the cpu
GPU_TILE_THREADS = 256   # threads of a block scanning one tile together (a multiple of 32)
GPU_TILE_ROWS = 17       # rows of GPU_TILE_THREADS elements per tile (odd: no bank conflicts)
GPU_TILE_LEVELS = 2      # levels of tiles blocked (sizes unknown: 4352**3 steps in 2)
GPU_ONE_TILE_BYTES = 40 * 1024   # a scan this short (and at most a tile long) is one tile
GPU_ROW_MIN = 32         # steps: a row at least this long (and at most a staged tile) is a tile
GPU_ROW_PER = 4          # elements per thread a short row's tile aims at (threads by its length)


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
    """The scan axis and the other axes (a tuple state's member axis is neither: it is put
    innermost by ``_order``); (None, None) when the stage is scheduled already."""
    info = h.stage.scan
    t = h.stage.axes[info.axis]
    if h.relations or h.attrs or list(h.leaf) != list(h.stage.axes):
        return None, None          # scheduled already (by the user): leave it
    mem = h.stage.axes[info.members] if info.members is not None else None
    return t, [a for a in h.stage.axes if a is not t and a is not mem]


def _order(h, *axes) -> None:
    """Reorder ``h``'s loops to ``axes``, then a tuple state's member axis innermost."""
    info = h.stage.scan
    mem = [h.stage.axes[info.members]] if info.members is not None else []
    order = list(axes) + mem
    if list(h.leaf) != order:
        h.reorder(*order)


def _upper(sched, e, end: int = 1):
    """An upper bound of the size expression ``e`` in this specialisation
    (``sched.size_hints``), or None when a size in it is unknown; ``end=0``: a lower bound
    (of a size expression increasing in its sizes)."""
    hints = getattr(sched, "size_hints", None) or {}
    env = {}
    for v in free_vars(e):
        if v not in hints:
            return None
        env[v] = hints[v][end]
    try:
        return int(eval_expr(e, env))
    except Exception:       # noqa: BLE001  (not a plain size expression: unknown)
        return None


def _gpu_blocks(sched, h) -> bool:
    """Whether the GPU default blocks the associative scan ``h`` (module docstring)."""
    if not can_block(h):
        return False
    st = h.stage
    t = st.axes[st.scan.axis]
    steps = _upper(sched, t.dom.extent)
    if steps is not None and steps <= GPU_BLOCK_MIN:
        return False
    others = 1
    for a in st.axes:
        if a is not t:
            hi = _upper(sched, a.dom.extent)
            if hi is None:
                return False
            others *= hi
    return others <= GPU_OTHERS_MAX


def _bind_flat(h, axes, threads: int):
    """Fuse ``axes``, split by ``threads``, bind to blockIdx.x/threadIdx.x; the thread loop."""
    f = h.fuse(*axes) if len(axes) > 1 else axes[0]
    bo, bi = h.split(f, factor=threads)
    h.bind(bo, "blockIdx.x")
    h.bind(bi, "threadIdx.x")
    return bi


def gpu_blocked(sched, h, threads: int = 256, chunk: int | None = None, level: int = 1) -> None:
    """The blocked GPU form of the associative scan ``h`` (kdsl.backends.scan_blocked): block
    totals and the segmented scan one thread per block, the totals' scan blocked again while
    it may be longer than ``GPU_BLOCK_MIN`` (else, or past ``GPU_LEVELS``, the serial
    default)."""
    chunk = chunk or GPU_CHUNK
    hp, hc, hs = blocked_scan(sched, h, chunk)
    # each block's total accumulated in a register (a local cache), its loop unrolled
    local = sched.cache_write(hp, "local")
    local.compute_at(hp, _bind_flat(hp, list(hp.stage.axes), threads))
    local.unroll(local.stage.reduce_axes[0])
    t = hs.stage.axes[hs.stage.scan.axis]
    jo, ki = hs.split(t, factor=chunk)
    # threads over the blocks and the other axes in the array's order: neighbouring threads
    # read neighbouring elements where the scan axis is not the last one
    order = [jo if a is t else a for a in hs.stage.axes]
    if len(order) > 1:
        hs.reorder(*order, ki)
    _bind_flat(hs, order, threads)
    hs.unroll(ki)       # the step before stays in a register: no reload of what was stored
    if level < GPU_LEVELS and _gpu_blocks(sched, hc):
        gpu_blocked(sched, hc, threads, chunk, level + 1)
    else:
        gpu_scan(sched, hc, threads, block=False)


def _tileable(h) -> bool:
    """Whether the tile scan suits ``h``: its scan axis is the last one, so a row of a tile
    is contiguous in memory (a column scan keeps ``gpu_blocked``, whose neighbouring threads
    read neighbouring columns)."""
    st = h.stage
    return st.scan.axis == len(st.axes) - 1


def _fits(st) -> int:
    """The longest tile of ``st`` that is one tile, staged in shared memory (``gpu_tiled``)."""
    chunk = GPU_TILE_THREADS * GPU_TILE_ROWS
    return max(chunk, min(GPU_ONE_TILE_BYTES, STAGE_BYTES) // itemsize(st.output.dtype))


def _short_rows(sched, h) -> bool:
    """Whether ``h`` scans rows along its last axis that are each one staged tile: an
    associative scan whose rows are at least ``GPU_ROW_MIN`` and at most a staged tile long
    in this specialisation (any number of rows: a block per row).  Shorter rows keep a
    thread per row (a warp's rows are then a few contiguous sectors)."""
    if not (can_block(h) and _tileable(h)):
        return False
    st = h.stage
    ext = st.axes[st.scan.axis].dom.extent
    lo, hi = _upper(sched, ext, 0), _upper(sched, ext)
    return lo is not None and hi is not None and GPU_ROW_MIN <= lo and hi <= _fits(st)


def _row_threads(sched, st) -> int:
    """Threads of a block scanning one tile of ``st`` (kdsl.gpu.scan_tiles): about
    ``GPU_ROW_PER`` of the shortest row's elements each (a power of two, at least a warp),
    at most ``GPU_TILE_THREADS``: a 256-step row gets 64 threads, not 256 mostly idle."""
    lo = _upper(sched, st.axes[st.scan.axis].dom.extent, 0)
    if lo is None:
        return GPU_TILE_THREADS
    t = 32
    while t * 2 * GPU_ROW_PER <= lo:
        t *= 2
    return min(GPU_TILE_THREADS, t)


def _one_block_per(h, outer, inner) -> None:
    """The other axes and ``outer`` fused, bound to blockIdx.x; ``inner`` (a tile) innermost."""
    others = [a for a in h.stage.axes if a is not h.stage.axes[h.stage.scan.axis]]
    order = others + [outer, inner]
    if list(h.leaf) != order:
        h.reorder(*order)
    f = h.fuse(*others, outer) if others else outer
    h.bind(f, "blockIdx.x")


def gpu_tiled(sched, h, level: int = 1) -> None:
    """The GPU tile scan of the associative scan ``h`` (kdsl.gpu.scan_tiles): tiles of
    ``GPU_TILE_THREADS * GPU_TILE_ROWS`` steps, one block each, scanned by the block's
    threads together through shared memory.  A scan longer than one tile is blocked (kdsl.backends.scan_blocked):
    its block totals a cross-thread reduction per tile (coalesced rows), their scan tiled
    again, the segmented scan tiled with the carries; a scan of at most one tile (or past
    ``GPU_TILE_LEVELS`` levels) is one tile per position of the other axes."""
    T = GPU_TILE_THREADS
    chunk = T * GPU_TILE_ROWS
    st = h.stage
    t = st.axes[st.scan.axis]
    steps = _upper(sched, t.dom.extent)
    # one tile where it fits in shared memory (a longer tile would be scanned row by row)
    fits = _fits(st)
    if level <= min(GPU_LEVELS, GPU_TILE_LEVELS) and (steps is None or steps > fits):
        hp, hc, hs, (comb, g, first, carry) = blocked_scan_parts(sched, h, chunk)
        # block totals: a block per tile, its threads along each row, the rows serial
        p = hs.stage.scan.axis
        j, k = hp.stage.axes[p], hp.stage.reduce_axes[0]
        others = [a for a in hp.stage.axes if a is not j]
        ko, kt = hp.split(k, factor=T)
        hp.reorder(*others, j, kt, ko)
        f = hp.fuse(*others, j) if others else j
        hp.bind(f, "blockIdx.x")
        hp.bind(kt, "threadIdx.x")
        hp.unroll(ko)           # a thread's loads of the tile's rows all in flight
        jo, ki = hs.split(hs.stage.axes[p], factor=chunk)
        _one_block_per(hs, jo, ki)
        hs.stage.scan = replace(hs.stage.scan, tile=TileScan(comb, T, g, first, carry, chunk))
        gpu_tiled(sched, hc, level + 1)
        return
    one, ki = h.split(t, nparts=1)
    _one_block_per(h, one, ki)
    most = steps if steps is not None and steps <= fits else 0
    T = _row_threads(sched, st) if most else T
    st.scan = replace(st.scan, tile=TileScan(st.scan.assoc, T, st.body.t, most=most))


def cpu_blocked(sched, h, chunk: int | None = None) -> None:
    """The blocked cpu form of the associative scan ``h`` with no other axis: block totals
    and the segmented scan parallel over blocks, the totals' scan serial."""
    chunk = chunk or CPU_CHUNK
    p = h.stage.scan.axis
    hp, _, hs = blocked_scan(sched, h, chunk)
    j = hp.stage.axes[p]
    if len(hp.stage.axes) > 1:      # other axes of size 1: the blocks outermost
        hp.reorder(j, *[a for a in hp.stage.axes if a is not j])
    hp.parallel(j)
    t = hs.stage.axes[p]
    others = [a for a in hs.stage.axes if a is not t]
    jo, ki = hs.split(t, factor=chunk)
    if others:
        hs.reorder(jo, *others, ki)
    hs.parallel(jo)


def gpu_scan(sched, h, threads: int = 256, block: bool = True) -> None:
    """The GPU default of one scan stage (module docstring)."""
    t, others = _split_axes(h)
    if t is None:
        return
    if block and _gpu_blocks(sched, h):
        if _tileable(h):
            gpu_tiled(sched, h)
        else:
            gpu_blocked(sched, h, threads)
        return
    if block and others and _short_rows(sched, h):
        gpu_tiled(sched, h, GPU_TILE_LEVELS + 1)      # many short rows: one tile (a block) each
        return
    if not others or not h.stage.scan.pointwise:
        # one thread runs the whole nest: a kernel of one block (its scan loop split in 1 part)
        _order(h, t, *others)
        one, _ = h.split(t, nparts=1)
        h.bind(one, "blockIdx.x")
        return
    _order(h, *others, t)
    f = h.fuse(*others) if len(others) > 1 else others[0]
    bo, bi = h.split(f, factor=threads)
    h.bind(bo, "blockIdx.x")
    h.bind(bi, "threadIdx.x")


def cpu_scan(sched, h) -> None:
    """The cpu default of one scan stage (module docstring)."""
    t, others = _split_axes(h)
    if t is not None and can_block(h) and all(mk.is_const(a.dom.extent, 1) for a in others):
        cpu_blocked(sched, h)       # no other axis (or only axes of size 1): one long scan
        return
    if t is None or not others or not h.stage.scan.pointwise:
        return
    _order(h, *others, t)
    h.parallel(others[0])
