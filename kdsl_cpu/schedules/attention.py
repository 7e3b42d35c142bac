"""The cpu default of a fused attention chain (kdsl/frontend/online_softmax.py): blocked.

One parallel work item is a block of ``BQ`` query rows of one (batch, head): the chain's
stages are computed inside it (``online_placement.attach_chain``), so K and V are streamed
once per block, not once per row, and the workspace is ``BQ`` rows of scores and weights
(O(N) per thread, never N x N), plus K packed once (the size of K).  Inside the block, with
the whole key row of the block's scores at hand (exact, no rescaling):

* scores ``S = Q_blk K^T``: K's rows packed into panels of ``SCORE_VECTORS`` SIMD registers
  of keys side by side (``Schedule.pack(..., lanes_last=True)``, once, before the blocks,
  panels in parallel), and a ``SCORE_ROWS`` x panel register tile (``cache_write``; rows
  unrolled, keys vectorised) accumulating over ``d``: one broadcast and one FMA per row,
  register and ``d``; the panels outside the row groups (a panel stays in L1 while the
  block's rows use it: 10% faster than the other order, one thread, N = 1024 and 2048);
* the row max (``online_weights.max_then_sum``: a plain max reduction), the weights
  ``P = exp(s - max)`` once per score (``online_weights.materialize_weights``; keys as
  explicit SIMD vectors: vecmath's exp at the register width), the row sum of ``P``;
* ``O = P V``: a plain contraction now, on a register tile of rows x 4 vectors of value
  columns (``cache_write``), keys innermost around it.
* ``O / sum`` and the NaN rule of fully masked rows: the finishing stages, per block.

Under a causal tail (a row's keys end at its diagonal: ``where(i >= j + c, s, -inf)``) a
block's scores and weights loop over the keys of its last row only
(``StageSchedule.loops_per_iteration``: the key panels past the block's diagonal are never
computed), the weights keep the mask as zeros (``materialize_weights(masked=True)``), and
P V runs all the block's rows over those keys on the full register tile (``_block_range``:
the key bound of the block's last row; the zeros add nothing), so only the diagonal block
computes masked scores.  The row max and sum keep each row's own keys.  A mask whose key
bound does not grow with the row keeps a P V tile of one row over its own keys.

The stage rewrites are made on the schedule's copies of the stages (the traced graph, which
GPU schedules read, keeps the one-pass online form).  A chain read outside itself (a
logsumexp output reading the row max) or given hints keeps ``online_placement.place_rows``
(one row per work item).  Semantics come from the stage objects (which read uses which
axis), never from names.

Measured (2-core AVX-512 box, one thread, N = 1024, D = 64, loaded machine, min of 15):
row placement ~20 GFLOP/s, this schedule ~80, torch SDPA ~116 (non-causal).  Causal
(N = 2048, D = 64, B*H = 2, one thread, loaded box): 25.8 ms when every block computed the
scores and weights of all keys and P V one row at a time, 15.3 ms now (torch SDPA ~12-16).
"""
from __future__ import annotations

import dataclasses

from kdsl.frontend import online_placement as osm
from kdsl.frontend import online_weights as ow
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import linear
from kdsl.ir.visitor import Mutator, collect, substitute, uses_var
from kdsl.schedule.records import Fuse, Split

#: the blocked schedule (False: one query row per work item, online_placement.place_rows;
#: benchmarks/attention.py --compare measures both)
BLOCKED = True
#: K is packed once, before the blocks (O(size of K) workspace), in parallel; False: by each
#: block, for itself (a gather per element, once per BQ rows: 10% of the time, N=2048)
PACK_ONCE = True
#: the weights' keys as explicit SIMD vectors (vecmath's exp at the register width)
VECTOR_WEIGHTS = True
#: P V's register tile (rows, SIMD registers of value columns); None: 6 x 4 (3 x 4 with 16
#: registers).  32-core host, N=2048 D=64 f32 (.devrun/cpuattn2/results1): 6 rows with
#: BQ = 96 and 6-row scores 19.2 ms, 4 rows with BQ = 64 22.6 ms (torch SDPA 21.2)
PV_TILE = None
#: the scores' key panels outside their row groups
PANEL_OUTER = True
#: under a causal tail, the block's scores and weights loop to the block's last key only
#: (``StageSchedule.loops_per_iteration``); False: over the hull of every block's keys
LOOPS_PER_BLOCK = True
#: under a causal tail, P V runs each block's rows over the keys of the block's last row on
#: the full register tile (the weights are zero past each row's keys); False: each row over
#: its own keys on a tile of one row
BLOCK_KEYS = True
#: SIMD registers of keys per step of the weights' loop (one lane mask per step)
WEIGHT_VECTORS = 1
#: the scores' scale applied where their register tile is stored, not by each reader
FOLD_SCALE = True
#: query rows per work item (a multiple of the tiles' rows: no edge tiles inside a block)
BQ = 96
#: rows of the scores' register tile (x ``SCORE_VECTORS`` SIMD registers of keys)
SCORE_ROWS, SCORE_VECTORS = 6, 4


def _reads(stage):
    return collect(stage.body, lambda x: isinstance(x, n.TensorRead))


def prepare(sched, target) -> tuple:
    """Before the default plans: the chains to block, and the names of every stage they own
    (their stages, the pack and cache they make), which the default plans leave alone.
    ``target``: the host (kdsl.schedule.target.Target: SIMD width, registers)."""
    stages = [h.stage for h in sched.stages]
    todo, owned = [], set()
    if not BLOCKED:
        return todo, owned
    taken = set()
    for c in osm.chains(sched):
        h = sched[c.F.name]
        if h.relations or h.attrs or h.attach.value != "root" or not _closed(c, stages, taken):
            continue        # (the row placement, online_placement.place_rows, takes it)
        taken |= {id(s) for s in [c.F] + c.group + c.producers}
        osm._final_max(c.online, stages)
        lanes = target.lanes(c.F.dtype.itemsize)
        # P V's register tile: 4 vectors of value columns x the rows the registers leave
        tile = (6 if target.vector_registers >= 32 else 3, 4 * lanes)
        if PV_TILE is not None:
            tile = (PV_TILE[0], PV_TILE[1] * lanes)
        # the scores' tile: SCORE_ROWS x SCORE_VECTORS registers (half the vectors with 16)
        sv = SCORE_VECTORS if target.vector_registers >= 32 else max(1, SCORE_VECTORS // 2)
        made = [_prepare_scores(sched, sched[s.name], sv * lanes) for s in c.producers]
        # (the weights keep a causal mask as zeros: P V may then run a block's rows over
        # the keys of its last row)
        weights = ow.materialize_weights(sched, c, masked=BLOCK_KEYS)
        ragged = {id(o) for _, o in weights if _ragged(o)}
        maxes = ow.max_then_sum(sched, c, weights)
        if FOLD_SCALE:
            for p in c.producers:
                _fold_scale(sched, p)
        for _, o in weights:
            # under a causal tail: every row of a block over the keys of the block's last row
            # (the weights past a row's own keys are zeros), else each row over its own keys
            # (a tile of one row)
            block = BLOCK_KEYS and id(o) in ragged and _block_keys_ok(o, c.F.axes[c.k])
            m = _prepare_pv(sched, sched[o.name], tile if block or id(o) not in ragged
                            else (1, tile[1]))
            if m is not None and block:
                m = m[:-1] + (_tile_pv_block,)
            made.append(m)
        if VECTOR_WEIGHTS:
            # (under a causal tail only with loops per block: else the weights' region is the
            # hull of every block's keys, clipped by a guard that keeps the loop from vector code)
            made += [(w, lanes * WEIGHT_VECTORS, _vector_weights) for w, o in weights
                     if id(o) not in ragged or LOOPS_PER_BLOCK]
        made = [m for m in made if m is not None]
        if ragged and LOOPS_PER_BLOCK:
            # a causal tail: the block's scores and weights end at its last row's last key
            # (the key panels past the block's diagonal are never computed)
            for g in [sched[s.name] for s in c.producers] + [w for w, _ in weights]:
                g.loops_per_iteration = True
        weights = [w for w, _ in weights]
        todo.append((c, made, [w.stage for w in weights + maxes]))
        owned |= {w.name for w in weights + maxes}
        owned |= {s.name for s in [c.F] + c.group + c.producers}
        owned |= {x.name for m in made for x in m[1:-1] if hasattr(x, "stage")}
    return todo, owned


class _Unscale(Mutator):
    """Reads ``S[idx] * c`` of the scores become ``S[idx]`` (``_fold_scale``); counts them."""

    def __init__(self, S, c):
        super().__init__()
        self.S, self.c, self.hits = S, c, 0

    def visit_Binary(self, e):
        if e.op is n.BinOp.MUL:
            for a, b in ((e.a, e.b), (e.b, e.a)):
                if isinstance(a, n.TensorRead) and a.tensor is self.S and b == self.c:
                    self.hits += 1
                    return a
        return self.generic(e)


def _scale_of(e, S):
    """The factors ``c`` of the products ``S[idx] * c`` in ``e`` (``c`` reads no tensor and
    uses no loop: a scale like ``d ** -0.5``)."""
    out = []
    for m in collect(e, lambda x: isinstance(x, n.Binary) and x.op is n.BinOp.MUL):
        for a, b in ((m.a, m.b), (m.b, m.a)):
            if isinstance(a, n.TensorRead) and a.tensor is S and b.dtype is a.dtype \
                    and not collect(b, lambda x: isinstance(x, (n.TensorRead, n.Load))):
                out.append(b)
    return out


def _fold_scale(sched, S) -> None:
    """The scale of the scores (``q @ k.T * d ** -0.5``) applied once, where the scores'
    register tile is stored, instead of in every reader (the row max, the weights): when
    every read of ``S`` is a product ``S[idx] * c`` with one ``c`` free of loops and
    tensors.  The product is the same float operation on the same values (numpy's)."""
    readers = [h.stage for h in sched.stages if S.output in h.stage.reads()]
    if S.is_reduction or not readers or len(S.values) != 1:
        return
    shape = set(sched.graph.shape_vars()) | set(sched.graph.scalars)
    cs = [c for r in readers for c in _scale_of(r.body, S.output)]
    if not cs or any(c != cs[0] for c in cs):
        return
    c = cs[0]
    if not all(v in shape for v in collect(c, lambda x: isinstance(x, n.Var))):
        return
    new = {}
    for r in readers:
        u = _Unscale(S.output, c)
        body = u.visit(r.body)
        if u.hits != len(collect(r.body, lambda x: isinstance(x, n.TensorRead)
                                 and x.tensor is S.output)):
            return      # (a read of S without the scale: the fold would change it)
        new[id(r)] = body
    for r in readers:
        r.body = new[id(r)]
    S.body = mk.mul(S.body, c)


def _ragged(st) -> bool:
    """Do the stage's reduce bounds use its own axes (a causal tail)?"""
    own = [a.var for a in st.axes]
    return any(uses_var(r.dom.extent, v) or uses_var(r.dom.min, v)
               for r in st.reduce_axes for v in own)


def _closed(c, stages, taken) -> bool:
    """Is the chain a closed unit: none of its stages read outside it (a logsumexp output
    reading the row max), none shared with a chain already taken?"""
    mine = {id(s) for s in [c.F] + c.group + c.producers}
    if mine & taken:
        return False
    for s in stages:
        if id(s) not in mine and any(t.stage is not None and id(t.stage) in mine - {id(c.F)}
                                     for t in s.reads()):
            return False
    return True


def place(sched, todo) -> None:
    """After the other stages' plans are realised: the blocked loops of each chain."""
    for c, made, weights in todo:
        h = sched[c.F.name]
        lead = list(h.leaf[:c.k + 1])
        ro, _ = h.split(lead[-1], factor=BQ)
        blk = h.fuse(*lead[:-1], ro)
        h.parallel(blk)
        extra = weights
        nested = [m[1].stage for m in made if m[-1] in (_tile_pv, _tile_pv_block)]
        done = osm.attach_chain(sched, c, h, blk, extra, nested)
        for m in made:
            if m is not None and m[0] in done:
                m[-1](*m[:-1], h, blk)


def _prepare_scores(sched, g, lanes):
    """``S[.., i, j] = sum_d A[.., i, d] * B[.., j, d]``: B packed in panels of ``lanes`` keys
    (lanes last) and S computed through a local cache (the register tile); returns (the
    pack, the cache), or None when ``g`` is not such a product."""
    st = g.stage
    if len(st.reduce_axes) != 1 or len(st.axes) < 2 or g.relations:
        return None
    i, j = st.axes[-2], st.axes[-1]
    keyed = [x for x in _reads(st) if not any(uses_var(e, i.var) for e in x.indices)
             and any(uses_var(e, j.var) for e in x.indices)]
    if len(keyed) != 1 or keyed[0].tensor.stage is not None:
        return None
    pos = [p for p, e in enumerate(keyed[0].indices) if uses_var(e, j.var)]
    if len(pos) != 1 or keyed[0].indices[pos[0]] is not j.var:
        return None
    loc = sched.cache_write(g, "local")
    p = sched.pack(keyed[0].tensor, readers=[loc], axis=pos[0], factor=lanes, lanes_last=True)
    return g, p, loc, _tile_scores


def _tile_scores(g, p, loc, h, blk) -> None:
    """The pack once per block; S's rows cut by ``SCORE_ROWS`` and keys by the panel width,
    the cache (rows x panel) attached at each (row group, key panel): reduce loop
    outermost, rows unrolled, keys vectorised."""
    if PACK_ONCE:
        p.parallel(p.stage.axes[0])     # all of K, before the blocks, panels in parallel
    else:
        p.compute_at(h, blk)
    lanes = p.stage.axes[-1].dom.extent.value
    io, ii = g.split(g.stage.axes[-2], factor=SCORE_ROWS)
    jo, ji = g.split(g.stage.axes[-1], factor=lanes)
    if PANEL_OUTER:     # a panel of K stays in L1 while the block's row groups use it
        g.reorder(jo, io, ii, ji)
        loc.compute_at(g, io)
    else:
        g.reorder(io, jo, ii, ji)
        loc.compute_at(g, jo)
    li, lj = loc.stage.axes[-2], loc.stage.axes[-1]
    loc.reorder(loc.stage.reduce_axes[0], li, lj)
    loc.unroll(li)
    loc.vectorize(lj)


def _prepare_pv(sched, g, tile):
    """``O[.., i, d] = sum_j P[.., i, j] * V[.., j, d]`` (the weights made by
    ``materialize_weights``) computed through a local cache: a register tile of
    ``tile = (rows, columns)``."""
    if g.relations or g.attrs or len(g.stage.axes) < 2:
        return None
    return g, sched.cache_write(g, "local"), tile, _tile_pv


def _tile_pv(g, loc, tile, h, blk) -> None:
    """Rows x value columns of O per tile, the keys innermost around it: one load of V's
    row segment serves ``mr`` rows (vector code, the tile kept in registers)."""
    mr, nr = tile
    i, d = g.stage.axes[-2], g.stage.axes[-1]
    io, ii = g.split(i, factor=mr)
    do, di = g.split(d, factor=nr)
    g.reorder(io, do, ii, di)
    loc.compute_at(g, do)
    li, ld = loc.stage.axes[-2], loc.stage.axes[-1]
    r = loc.stage.reduce_axes[0]
    if uses_var(r.dom.extent, li.var) or uses_var(r.dom.min, li.var):
        # keys that end with the row (a causal tail): the row's keys inside its row loop
        # (prepare gives such a stage a tile of one row)
        loc.reorder(li, r, ld)
    else:
        loc.reorder(r, li, ld)
        loc.unroll(li)
    loc.vectorize(ld)


def _block_keys_ok(o, frow) -> bool:
    """Can ``o``'s rows of one block share the key range of the block's last row?  Its
    ragged key bound must grow with its row (a causal tail does: ``min(M, max(i + 1 - c -
    lo, 0))``), use no other own axis, and its rows be numbered as the output's (``frow``)."""
    i = o.axes[-2]
    if len(o.reduce_axes) != 1 or not (mk.is_const(i.dom.min, 0) and mk.is_const(frow.dom.min, 0)
                                       and i.dom.extent == frow.dom.extent):
        return False
    r = o.reduce_axes[0]
    others = [a.var for a in o.axes if a is not i]
    if any(uses_var(r.dom.extent, v) or uses_var(r.dom.min, v) for v in others):
        return False
    return not uses_var(r.dom.min, i.var) and _nondecreasing(r.dom.extent, i.var)


def _nondecreasing(e, v) -> bool:
    """Is the index expression ``e`` nondecreasing in the variable ``v`` (min, max, casts
    and sums of terms linear in ``v`` with a coefficient >= 0)?"""
    if not uses_var(e, v):
        return True
    if isinstance(e, n.Cast):
        return _nondecreasing(e.a, v)
    if isinstance(e, n.Binary) and e.op in (n.BinOp.MIN, n.BinOp.MAX, n.BinOp.ADD):
        return _nondecreasing(e.a, v) and _nondecreasing(e.b, v)
    if isinstance(e, n.Binary) and e.op is n.BinOp.SUB:
        return _nondecreasing(e.a, v) and not uses_var(e.b, v)
    lin = linear(e)
    return all(k >= 0 if t is v else not uses_var(t, v) for t, k in lin.terms.items())


def _tile_pv_block(g, loc, tile, h, blk) -> None:
    """P V under a causal tail, on the full tile: the cache's key bound becomes that of the
    block's last row (``_block_keys_ok``: the bound grows with the row), a function of the
    block loop ``blk`` alone, so the tile's rows share one key loop; the weights past a row's
    own keys are zeros (``materialize_weights(masked=True)``), which add nothing."""
    if not _block_range(loc, h, blk):
        return _tile_pv(g, loc, (1, tile[1]), h, blk)
    _tile_pv(g, loc, tile, h, blk)


def _block_range(g, h, blk) -> bool:
    """The key bound of ``g`` (P V or its cache; rows at ``axes[-2]``, the bound a
    nondecreasing function of the row) becomes that of the last row of the block that the
    loop ``blk`` of the output ``h`` runs (rows ``BQ * (blk % blocks)`` on): a function of
    ``blk`` alone.  False (nothing changed) where ``h``'s loops are not the blocked ones."""
    st = g.stage
    r, i = st.reduce_axes[0], st.axes[-2]
    fuse = [rel for rel in h.relations if isinstance(rel, Fuse) and rel.fused is blk]
    ro = fuse[0].inner if fuse else blk
    split = [rel for rel in h.relations if isinstance(rel, Split) and rel.outer is ro]
    if not split or r not in g.leaf:
        return False
    row_block = mk.mod(blk.var, ro.dom.extent) if fuse else blk.var
    last = mk.min_(mk.sub(i.dom.extent, mk.as_expr(1)),
                   mk.add(mk.mul(row_block, mk.as_expr(BQ)), mk.as_expr(BQ - 1)))
    ext = substitute(r.dom.extent, {i.var: last})
    r2 = n.IterVar(r.var, n.Range(r.dom.min, ext), r.kind)
    st.reduce_axes = (r2,)
    st.body = dataclasses.replace(st.body, axes=(r2,))
    g.leaf[g.leaf.index(r)] = r2
    return True


def _vector_weights(w, lanes, h, blk) -> None:
    """The weights ``exp(s - m)`` of a row: keys cut into SIMD vectors (vector code, the
    exp at the full width: vecmath's on vectors, kdsl_cpu/codegen/vector.py)."""
    _, ki = w.split(w.stage.axes[-1], factor=lanes)
    w.vectorize(ki)
