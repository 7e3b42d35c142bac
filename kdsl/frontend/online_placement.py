"""Where the fused attention chains of ``kdsl.frontend.online_softmax`` run: the default
placement of a host backend's schedule, and the helpers the blocked cpu schedule places
its chains with.

Placement (``place_rows``, called by dispatch after a host backend's default schedule; GPU
targets keep their own): the output's (batch, head, query-row) loops become one parallel
loop and the chain (scores, online stages, finishing stages) is computed inside it, one
row at a time: O(N + D) workspace per row, never N x N.  There the contraction's online
stage weights by the *final* max of ``p.sum()``'s online stage, computed first in the same
row (``_final_max``: no rescaling, one ``exp`` per key instead of one per key and value),
and loops over keys outside its value axis.  The graph keeps the one-pass form, which a GPU
schedule maps with K/V tiles streamed once.

Blocked placement (the cpu backend's default, kdsl_cpu/schedules/attention.py) reads the
chains with ``chains`` and attaches them with ``attach_chain`` at a loop over blocks of query
rows; on the schedule's copies of the stages (never the traced graph) it makes the weights
``exp(x - m)`` a stage of their own and the contraction a plain ``P @ v``
(``online_weights.materialize_weights``), and ``p.sum()`` a max stage and a plain sum of
the weights (``online_weights.max_then_sum``); ``unmasked`` drops a causal mask where a key range already ends at it.
"""
from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..graph import Stage
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import substitute, uses_var
from .online_softmax import FUSED, NEG_INF, _reads


def _positions(reader: Stage, tensor, axes_pos: list) -> list | None:
    """The positions of ``reader``'s axes the indices at ``axes_pos`` of its read of
    ``tensor`` use (None: no read, or an index that uses none of them)."""
    read = next(iter(_reads(reader.body, tensor)), None)
    if read is None:
        return None
    out = []
    for k in axes_pos:
        hit = [j for j, ax in enumerate(reader.axes) if uses_var(read.indices[k], ax.var)]
        if not hit:
            return None
        out += hit
    return out


def _row_axis(F: Stage, fin: Stage, online: Stage) -> int | None:
    """The innermost axis of ``F`` that carries the query rows of ``online`` (through the
    finishing stage ``fin``, or F itself), or None (also for a stage a schedule rewrote)."""
    if not online.is_reduction:
        return None
    x = online.body.sources[0]
    pos = [k for k, ax in enumerate(online.axes) if uses_var(x, ax.var)]
    pos = _positions(fin, online.output, pos)
    if pos is not None and fin is not F:
        pos = _positions(F, fin.output, pos)
    return max(pos) if pos else None


@dataclasses.dataclass
class Chain:
    """One fused chain of a schedule: the output stage ``F``, the position ``k`` of its
    innermost query-row axis, the online stages (``online``), every stage of the chain
    that ``F`` reads through (``group``: online and finishing stages) and the stages the
    online stages read (``producers``: the scores ``q @ k.T``)."""

    F: Stage
    k: int
    online: list
    group: list
    producers: list


def chains(sched) -> list:
    """The fused chains of ``sched`` (a ``kdsl.schedule.Schedule``) whose output has a
    query-row axis (``Chain``), in stage order."""
    stages = [h.stage for h in sched.stages]
    by_tensor = {}
    for st in stages:
        for t in st.values:
            by_tensor[id(t)] = st
    outs = {id(t) for t in sched.output_tensors()}
    found = []
    for F in stages:
        if F.is_reduction or id(F.output) not in outs:
            continue
        group, todo = [], [F]
        while todo:     # finishing stages and online stages F depends on
            s = todo.pop()
            for t in s.reads():
                p = by_tensor.get(id(t))
                if p is not None and p.origin is FUSED and p not in group:
                    group.append(p)
                    todo.append(p)
        onl = [s for s in group if s.is_reduction]
        # the row loop of the finishing stages F reads (or F itself)
        ks = []
        for fin in [F] + [s for s in group if not s.is_reduction]:
            if fin is not F and not _reads(F.body, fin.output):
                continue
            for o in onl:
                if _reads(fin.body, o.output):
                    ks.append(_row_axis(F, fin, o))
        if not ks or None in ks:
            continue
        producers = []
        for o in onl:
            for t in o.reads():
                p = by_tensor.get(id(t))
                if p is not None and p.origin is not FUSED and p not in producers:
                    producers.append(p)
        found.append(Chain(F, max(ks), onl, group, producers))
    return found


def place_rows(sched) -> None:
    """Move the fused chains of ``sched`` (a ``kdsl.schedule.Schedule``) into their query-row loop.

    For each output stage made by the rewrite, the online stages and finishing stages it reads
    and the stages their row values read (the scores ``q @ k.T``) are computed inside the
    output's row loop: the workspace is one row of scores and the row's state (O(N + D) per
    row), never N x N.  The leading (batch, head, row) loops become one parallel loop when
    nothing split them.  A stage also read outside the chain (a logsumexp output) stays where
    it is, and an output whose row loop a schedule split is left alone (the cpu backend's
    blocked schedule, kdsl_cpu/schedules/attention.py, places its chains itself).  Dispatch
    calls it after a host backend's default schedule (not after explicit schedule functions).
    """
    stages = [h.stage for h in sched.stages]
    for c in chains(sched):
        F, k = c.F, c.k
        h = sched[F.name]
        row = F.axes[k]
        if h.attach.value != "root" or list(h.leaf[:k + 1]) != list(F.axes[:k + 1]):
            continue        # a schedule moved or split the rows: its placement stands
        if _FINAL:
            _final_max(c.online, stages)
        lead = list(h.leaf[:k + 1])
        marks = [h.attrs.get(a) for a in lead]
        if k > 0 and all(m is None or m.kind is n.ForKind.PARALLEL for m in marks):
            # batch, heads and rows: one parallel loop (the default's parallel batch loop
            # alone would give B threads); the mark moves to the fused loop
            for a in lead:
                h.attrs.pop(a, None)
            row = h.fuse(*lead)
            h.parallel(row)
        attach_chain(sched, c, h, row)


def attach_chain(sched, c: Chain, h, row, extra=(), nested=()) -> list:
    """``compute_at`` the chain's stages (online, finishing, producers, and the stages of
    ``extra``: ones a schedule made between them) at loop ``row`` of the output's schedule
    ``h``, last first; a stage also read outside the chain stays where it is (the stages of
    ``nested``, which the caller attaches inside the chain's loops, count as inside).
    Returns the schedules of the stages attached."""
    stages = [g.stage for g in sched.stages]
    inside, done = {id(c.F)} | {id(s) for s in nested}, []
    for s in sorted(c.group + c.producers + list(extra), key=stages.index, reverse=True):
        readers = [r for r in stages if any(t in s.values for t in r.reads())]
        g = sched[s.name]
        if g.attach.value == "inline" or not all(id(r) in inside for r in readers):
            continue
        g.compute_at(h, row)
        inside.add(id(s))
        done.append(g)
        if s in c.online:
            _keys_outside(g, s)
    return done


def _keys_outside(g, online: Stage) -> None:
    """The key loop of an online stage outside its value loops (``e`` of ``p @ v``): each
    key updates the row's D accumulators, independent lanes, instead of a chain of D*N
    dependent steps (exp and select per step) per accumulator."""
    if not online.is_reduction:
        return      # (a schedule cached its result: the cache's loops are the schedule's)
    x = online.body.sources[0]
    inner = [ax for ax in online.axes if not uses_var(x, ax.var)]
    if not inner or list(g.leaf) != list(online.axes) + list(online.reduce_axes):
        return
    g.reorder(*online.reduce_axes, *inner)


_TWO_PASS = {}
#: sequential hosts weight contractions by the final max (False: the one-pass form there
#: too; single-thread cpu, N=512 D=64: 2.5x slower, measured while the machine was loaded)
_FINAL = True


def _two_pass_combiner(d: dt.DType) -> n.Combiner:
    """(max, sum): the running max kept for the NaN rule, the sum plain (weights final)."""
    if d not in _TWO_PASS:
        xs = (n.var("x0", d), n.var("x1", d))
        ys = (n.var("y0", d), n.var("y1", d))
        _TWO_PASS[d] = n.Combiner("online_softmax_final", xs, ys,
                                  (mk.max_(xs[0], ys[0]), mk.add(xs[1], ys[1])),
                                  (mk.as_expr(NEG_INF, d), mk.as_expr(0.0, d)))
    return _TWO_PASS[d]


def _final_max(onl: list, stages: list) -> None:
    """On a sequential host, a contraction's online stage uses the final max of a plain
    online sum over the same rows (``p.sum()``'s, computed first inside the same row loop):
    ``sum_j exp(x_j - m) * h_j`` with ``m`` the row's max needs no rescaling, and its
    ``exp`` does not depend on the value axis (one per key, not one per key and value).
    Mutates the schedule's copies of the stages (the traced graph is shared)."""
    plain = [o for o in onl if o.is_reduction and len(o.body.sources) == 2
             and mk.is_const(o.body.sources[1], 1.0)]
    for o in onl:
        if o in plain or not plain or o.body.combiner is _TWO_PASS.get(o.dtype):
            continue        # (already weighted by the final max: a second call changes nothing)
        for L in plain:
            idx = _same_row_read(L, o)
            if idx is not None and stages.index(L) > stages.index(o):
                idx = None      # (computed after o: its max is not final there)
            if idx is None:
                continue
            x, hsrc = o.body.sources
            m = n.TensorRead(L.values[0].dtype, L.values[0], idx)
            w = mk.mul(mk.unary(n.UnOp.EXP, mk.sub(x, m)), hsrc)
            o.body = dataclasses.replace(o.body, combiner=_two_pass_combiner(o.dtype),
                                         sources=(x, w))
            break


def _same_row_read(L: Stage, o: Stage):
    """The indices at which ``o`` reads ``L``'s running max for its own rows: ``L`` sums the
    same row values (its axes map onto ``o``'s, its other axes have extent 1), else None."""
    if len(L.axes) != len(o.axes) or L.dtype is not o.dtype:
        return None
    xl, xo = L.body.sources[0], o.body.sources[0]
    mapping = {L.reduce_axes[0].var: o.reduce_axes[0].var}
    idx = []
    for la, oa in zip(L.axes, o.axes):
        if uses_var(xl, la.var):
            if la.dom.extent != oa.dom.extent or la.dom.min != oa.dom.min:
                return None
            mapping[la.var] = oa.var
            idx.append(oa.var)
        elif mk.is_const(la.dom.extent, 1):
            idx.append(mk.add(mk.as_expr(0), la.dom.min))
        else:
            return None
    if substitute(xl, mapping) != xo:
        return None
    return tuple(idx)
