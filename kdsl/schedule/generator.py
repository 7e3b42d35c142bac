"""The schedule generator: rule-built, multi-level tiled schedules of contractions, per Target.

For a sum whose output walks memory along its last axis ``v`` (some read's
last index uses ``v``: the *streamed* operand) and that has a second spatial
axis ``u`` which the streamed reads do not use but another read does (the
*broadcast* operand: conv2d's ``W[k, ..]`` against ``X[.., x + rx]``, a
matmul's ``A[i, k]`` against ``B[k, j]``), the generator builds Ansor-style
sketches from the ordinary primitives (the ``tiled`` recipe below):

* spatial axes: ``u`` and ``v`` are cut into a register micro-tile of ``mr``
  rows x ``nr`` columns (``nr`` a multiple of the SIMD lanes, or half a
  register where registers hold 8 or more: narrow rows waste less in edge
  tiles); every outer
  part is fused into one parallel loop (all work items, so the cores fill);
* reduce axes: the main (long) reduce axis is cut into cache blocks of ``kc``;
  ``rfactor`` makes ``<B>.rf``, the block's partial sums, a local
  ``mr x nr`` tile computed inside the parallel item (codegen keeps it in
  vector registers, vector.py), which ``B`` then adds up; small constant
  reduce axes (a 3x3 window) run inside the block, around the tile (LLVM
  unrolls them in full tiles; an ``unroll`` mark would also copy them around
  the edge tiles' lane loops, past the cpu codegen's unroll budget);
* few outputs and a long reduction: split-K over the cores (``rfactor`` over
  partials, the cpu rules' ``split_reduction``) stays the backend's rule.

``candidates(stage, target)`` lists the sketch's instances (the search
space: ``mr``, ``nr``, ``kc``) with an analytical cost (``cost``: SIMD issue
rate of the micro-kernel, registers, edge tiles, parallel balance,
bytes of a cache block against L1/L2, edge tiles as masked full tiles); ``best`` is the cheapest.  Extents
unknown at compile time are guessed (``GUESS_ROWS``, ``GUESS_COLS``, ``GUESS``).
Stages outside the sketch (row sums, stencils without a reuse axis, strided
inputs, two long reduce axes, non-sums) get None: the backend's rules decide.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir import nodes as n
from ..ir.visitor import collect, uses_var
from .plan import Recipe, StagePlan
from .target import Target

#: reduce axes with a constant extent up to this are a window (unrolled inside the block)
WINDOW = 7
#: largest window (product of window extents) unrolled into the micro-kernel
MAX_WINDOW = 64
#: extents assumed for axes whose size is known only at run time (priors, not knowledge):
#: register-tile rows (channels, matrix rows: usually a multiple of 8), the vector axis (an
#: image row of 56 or 28: rarely a multiple of the tile), anything else
GUESS_ROWS, GUESS_COLS, GUESS = 64, 56, 64
#: a partial (edge) tile costs this many full ones: the cpu codegen runs it as the full tile's
#: vector code under a lane mask (kdsl_cpu/codegen/vector.py: masked loads and stores, rows
#: guarded in the unrolled row loop).  Until session 18 edge tiles were scalar lane loops with the
#: tile in memory, modelled as 30x slower: conv2d 1x64x56^2 -> 64 then took mr x nr = 7 x 8
#: (19.7 GFLOP/s on the 2-core box); with masks 5 x 32 runs at 52.8
EDGE_COST = 1.25


@dataclass(frozen=True)
class Sketch:
    """The root axes a tiled schedule of a stage plays with, and its reads' roles."""

    u: object            # register-tile rows (broadcast operand axis), or None
    v: object            # vector axis (the output's last axis)
    main: object         # the reduce axis cut into cache blocks
    window: tuple        # small constant reduce axes (a convolution's window)
    streamed: int        # reads whose last index walks v
    broadcast: int       # other reads
    itemsize: int


@dataclass(frozen=True)
class Params:
    """One point of the search space."""

    mr: int
    nr: int
    kc: int


@dataclass(frozen=True)
class Candidate:
    """A point of the search space with its estimated cost."""

    params: Params
    cost: float

    def plan(self, parallel: str | None) -> StagePlan:
        """The candidate as a StagePlan (a recipe; hints fall back to the generic plan)."""
        return StagePlan(recipe=tiled_recipe(self.params), parallel=parallel)


def _const(iv) -> int | None:
    e = iv.dom.extent
    return int(e.value) if isinstance(e, n.Const) else None


def _is_sum(stage) -> bool:
    body = stage.body
    return (isinstance(body, n.Reduce) and len(stage.values) == 1 and body.condition is None
            and body.combiner.kind is n.CombinerKind.SUM)


def sketch(stage) -> Sketch | None:
    """The stage's tiling sketch, or None when it is not a contraction the generator tiles."""
    if not _is_sum(stage) or getattr(stage, "scan", None) is not None or len(stage.axes) < 2:
        return None
    if stage.dtype.itemsize not in (4, 8):
        return None
    v = stage.axes[-1]
    reads = [r for r in collect(stage.body, lambda x: isinstance(x, n.TensorRead)) if r.indices]
    if any(getattr(getattr(r.tensor, "op", None), "contiguous", True) is False for r in reads):
        return None   # strided views: no explicit vector tiles, and the unrolled rows around
        # lane loops took LLVM 12 s to compile (1x1 conv); the rules' plan serves them
    streamed = [r for r in reads if uses_var(r.indices[-1], v.var)]
    others = [r for r in reads if r not in streamed]
    if not streamed or not others:
        return None
    u = None
    for a in reversed(stage.axes[:-1]):
        if _const(a) == 1:
            continue
        if (not any(uses_var(i, a.var) for r in streamed for i in r.indices)
                and any(uses_var(i, a.var) for r in others for i in r.indices)):
            u = a
            break
    small = [r for r in stage.reduce_axes if (_const(r) or WINDOW + 1) <= WINDOW]
    long = [r for r in stage.reduce_axes if r not in small]
    if len(long) > 1:
        return None              # two long reduce axes: not this sketch
    if not long and u is None:
        return None              # a stencil: no reuse to tile for (the rules unroll its window)
    main = long[0] if long else stage.reduce_axes[0]
    window = [r for r in small if r is not main]
    if math.prod(_const(w) for w in window) > MAX_WINDOW:
        return None
    return Sketch(u, v, main, tuple(window), len(streamed), len(others), stage.dtype.itemsize)


def _extent(iv, guess: int = GUESS) -> int:
    c = _const(iv)
    return guess if c is None else c


def cost(stage, sk: Sketch, p: Params, target: Target) -> float:
    """Estimated run time (arbitrary units) of the tiled schedule ``p``; inf when illegal."""
    lanes = target.lanes(sk.itemsize)
    if p.nr % lanes == 0:
        vecs, used = p.nr // lanes, lanes
    elif 2 * p.nr == lanes:       # half a register (a ymm of an AVX-512 host): half the lanes
        vecs, used = 1, p.nr
    else:
        return math.inf
    acc = p.mr * vecs
    if acc + vecs + 2 > target.vector_registers:
        return math.inf
    # micro-kernel: per reduction step acc FMAs against streamed vector loads + broadcasts
    fma = acc / target.fma_per_cycle
    loads = (sk.streamed * vecs + sk.broadcast * p.mr) / target.loads_per_cycle
    eff = fma / max(fma, loads, 1.0)       # fraction of FMA issue slots used
    eff *= min(1.0, acc / (target.fma_latency * target.fma_per_cycle))   # latency hidden?
    work = math.prod(_extent(a) for a in stage.axes)
    red = math.prod(_extent(a) for a in stage.reduce_axes)
    # edge tiles: the last, partial tile of each tiled axis costs EDGE_COST full ones
    edge = 1.0
    for ax, t, guess in ((sk.u, p.mr, GUESS_ROWS), (sk.v, p.nr, GUESS_COLS)):
        if ax is None or t == 1:
            continue
        E = _extent(ax, guess)
        rem = E % t if E >= t else E
        if rem:
            edge *= (E - rem + EDGE_COST * t) / E
    # parallel balance over the fused outer loops
    items = 1
    for a in stage.axes:
        t = p.mr if a is sk.u else p.nr if a is sk.v else 1
        items *= math.ceil(_extent(a) / t)
    items = max(1, items)          # an empty axis: nothing to balance
    rounds = math.ceil(items / target.cores)
    balance = items / (rounds * target.cores)
    # a cache block's operands: broadcast rows and streamed columns over kc * window steps
    win = math.prod(_const(w) for w in sk.window) if sk.window else 1
    ws = (p.mr * win + p.nr) * p.kc * sk.itemsize
    cache = 1.0 if ws <= target.l1_bytes else 1.25 if ws <= target.l2_bytes else 2.0
    flush = 1 + 1 / (max(1, min(p.kc, _extent(sk.main))) * win)      # the rf tile added into B
    return work * red / (used * eff * balance * target.cores) * edge * cache * flush


def candidates(stage, target: Target) -> list:
    """Every legal point of the sketch's space with its cost, cheapest first ([] if no sketch)."""
    sk = sketch(stage)
    if sk is None:
        return []
    lanes = target.lanes(sk.itemsize)
    rows = (1,) if sk.u is None else (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)
    main_c = _const(sk.main)
    kcs = sorted({min(k, main_c) for k in (32, 64, 256)} if main_c else {32, 64, 256})
    out = []
    for mr in rows:
        if mr > target.max_unroll or (sk.u is not None and _const(sk.u) is not None
                                       and mr > _const(sk.u)):
            continue
        for nr in sorted({lanes // 2 if lanes >= 8 else lanes, lanes, 2 * lanes, 4 * lanes}):
            for kc in kcs:
                p = Params(mr, nr, kc)
                c = cost(stage, sk, p, target)
                if c < math.inf:
                    out.append(Candidate(p, c))
    out.sort(key=lambda c: (c.cost, -c.params.mr, c.params.nr, c.params.kc))
    return out


def split_parts(stage, target: Target) -> int | None:
    """Split-K: the number of partial reductions (one per core) when the outputs, all of
    constant extent, are too few to fill the cores (fewer than two per core); else None."""
    if not stage.reduce_axes or target.cores <= 1:
        return None
    work = 1
    for a in stage.axes:
        c = _const(a)
        if c is None:
            return None
        work *= c
    return target.cores if work < 2 * target.cores else None


def best(stage, target: Target) -> Candidate | None:
    """The cheapest candidate (None when the generator has no sketch for the stage)."""
    cands = candidates(stage, target)
    return cands[0] if cands else None


# ----------------------------------------------------------------- realisation
def tiled(sched, h, p: Params, parallel: bool = True) -> None:
    """Apply the tiled sketch with parameters ``p`` to stage ``h`` (see the module docstring)."""
    st = h.stage
    sk = sketch(st)
    if sk is None:      # e.g. a convolution with one output channel is a stencil here
        from ..errors import ScheduleError
        raise ScheduleError(
            f"stage {h.name}: the generator's tiled schedule needs a contraction with reuse "
            "(a long reduce axis, or an output axis that only the non-streamed operand reads), "
            "which this specialisation of the stage is not",
            hint="pick the parameters from generator.candidates() of the stage as the call "
                 "specialises it (an empty list: it has no tiled form), or keep the default")
    ko, _ = h.split(sk.main, factor=p.kc)
    rf = sched.rfactor(h, ko)
    (kv,) = h.reduce_axes
    outer, inner = [], []
    for a in st.axes:
        t = p.mr if a is sk.u else p.nr if a is sk.v else None
        if t is None:
            outer.append(a)
        else:
            o, i = h.split(a, factor=t)
            outer.append(o)
            inner.append(i)
    h.reorder(*outer, kv, *inner)
    fused = h.fuse(*outer)
    if parallel:
        h.parallel(fused)
    h.vectorize(inner[-1])
    rf.compute_at(h, kv)
    r_axes = list(rf.stage.axes)[1:]          # [ko, *spatial]: the block index first
    ru = r_axes[list(st.axes).index(sk.u)] if sk.u is not None else None
    rv = r_axes[-1]
    rest = [a for a in r_axes if a is not ru and a is not rv]
    red = list(rf.stage.reduce_axes)      # the block's part of the main axis, then the window
    tile = [a for a in (ru, rv) if a is not None]
    rf.reorder(rf.stage.axes[0], *rest, *red, *tile)
    # the window stays a loop (not ``unroll``): copies of it around the edge tiles' lane loops
    # would exceed the cpu codegen's unroll budget (a ScheduleWarning); LLVM unrolls it in the
    # full tiles' copy, where its body is straight-line vector code
    if ru is not None:
        rf.unroll(ru)
    rf.vectorize(rv)
    rf.set_scope("local")


def _accepts(plan, stage) -> bool:
    """Hints other than ``parallel`` fall back to the generic plan (the backend's rule)."""
    return not (plan.explicit - {"parallel"})


def tiled_recipe(p: Params) -> Recipe:
    """The tiled sketch at ``p`` as a plan recipe."""
    return Recipe("tiled", lambda sched, h, plan: tiled(sched, h, p, plan.parallel is not None),
                  _accepts)
