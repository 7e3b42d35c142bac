"""A parallel, work-efficient scan: an associative ``kd.scan`` rewritten into blocked stages.

A scan ``s[t] = s[t - 1] (+) g(t)``, ``s[t0] = g(t0)`` whose combine ``(+)`` is associative
(``ScanInfo.assoc``: cumsum, cumprod, cummax, cummin, the bitwise and/or/xor accumulates)
runs serially along its scan axis.  ``blocked_scan`` rewrites it, on a schedule, into three
stages of kdsl's own (reduce-then-scan, as CUB and the GPU Gems 3 scan do):

1. ``<S>.part[.., j, ..]``: the combine of block ``j``'s ``chunk`` elements (a reduction,
   every block in parallel);
2. ``<S>.carry[.., j, ..]``: the inclusive scan of those block totals, itself an associative
   scan (``chunk`` times shorter), so ``blocked_scan`` applies to it again where it is long;
3. ``S`` itself becomes a *segmented* scan (``ScanInfo.segment``): its recurrence restarts
   at each block, from ``carry[j - 1] (+) g(t)``, so its scan loop is split by ``chunk`` and
   the blocks run in parallel, each in order inside one thread.

Work: about 2 reads of ``g`` and one write per element (the serial loop: one and one), plus
the carries.  Float sums and products are *reassociated* (blocks are combined in another
order than the serial loop), as numpy's pairwise ``sum`` is; integer results are exact.
Every backend that lowers the schedule runs the same stages (the SIMT interpreter checks
the GPU form for races); the ``numpy`` reference evaluates the unrewritten scan.  The cpu
and GPU default schedules call it (kdsl.backends.scan_schedules); an explicit schedule may
too (``blocked_scan(s, "cumsum", 64)``, then schedule the three stages it returns).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import ScheduleError
from ..graph import Stage
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import substitute


def can_block(h) -> bool:
    """Whether ``h`` (a stage handle) is an associative scan that ``blocked_scan`` can rewrite:
    untouched by other primitives, computed at the root, its body still ``select(t < t0 + 1,
    g, s[t - 1] (+) g)``."""
    from ..schedule.records import AttachKind
    info = getattr(h.stage, "scan", None)
    return (info is not None and getattr(info, "assoc", None) is not None and not info.segment
            and info.members is None and not info.steps and info.init_steps == 1
            and type(h.stage.body) is n.Select and not h.relations and not h.attrs
            and h.attach is AttachKind.ROOT)


def _combine(comb: n.Combiner, a: n.Expr, b: n.Expr) -> n.Expr:
    return substitute(comb.result[0], {comb.lhs[0]: a, comb.rhs[0]: b})


def _axis_like(iv: n.IterVar, name: str, extent) -> n.IterVar:
    return n.IterVar(n.var(name), n.Range(mk.as_expr(0), mk.as_expr(extent)), iv.kind)


def blocked_scan(sched, stage, chunk: int):
    """Rewrite the associative scan ``stage`` of ``sched`` (module docstring) with blocks of
    ``chunk`` steps; returns the handles ``(part, carry, stage)``: ``part`` a reduction over
    its last axis, ``carry`` an associative scan of the block totals (block it again for a
    long scan), ``stage`` the segmented scan (split its scan axis by ``chunk``)."""
    return blocked_scan_parts(sched, stage, chunk)[:3]


def blocked_scan_parts(sched, stage, chunk: int):
    """``blocked_scan``, plus what the segmented scan's tiles read: ``(combiner, g, first,
    carry)`` (stage-level expressions in its axes: ``g`` its element, ``first`` true in the
    first block, ``carry`` the combine of the blocks before, read where ``first`` is false)."""
    h = sched[stage]
    if not can_block(h):
        raise ScheduleError(f"blocked_scan: stage {h.name} is not an associative scan left "
                            "unscheduled (a cumsum, cummax, accumulate, or a kd.scan whose update "
                            "is s[t - 1] op init's value)",
                            hint=f"call blocked_scan on {h.name} before any other primitive on "
                            "it; other scans run in order")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 2:
        raise ScheduleError(f"blocked_scan: the block size must be an int >= 2, got {chunk!r}",
                            hint="blocked_scan(s, stage, 32)")
    st, info = h.stage, h.stage.scan
    p, comb = info.axis, info.assoc
    t = st.axes[p]
    lo, size = t.dom.min, t.dom.extent
    g = st.body.t
    nblocks = mk.ceildiv(size, chunk)

    # 1. block totals: part[.., j, ..] = (+) over k < chunk of g(lo + j * chunk + k)
    j = _axis_like(t, f"{t.name}.block", nblocks)
    k = n.IterVar(n.var(f"{t.name}.elem"), n.Range(mk.as_expr(0), mk.as_expr(chunk)),
                  n.IterKind.REDUCE)
    pos = mk.add(lo, mk.add(mk.mul(j.var, chunk), k.var))
    pax = tuple(_axis_like(a, a.name, a.dom.extent) if a is not t else j for a in st.axes)
    ren = {a.var: b.var for a, b in zip(st.axes, pax) if a is not t}
    ren[t.var] = pos
    body = n.Reduce(g.dtype, comb, (substitute(g, ren),), (k,),
                    mk.lt(pos, mk.add(lo, size)), 0)
    part = Stage(sched._unique(f"{st.name}.part"), pax, (k,), body, g.dtype, st.loc,
                 origin="blocked_scan")
    hp = sched._insert_before(part, st)

    # 2. carry[.., j, ..] = part[.., 0, ..] (+) ... (+) part[.., j, ..]: an associative scan
    cax = tuple(_axis_like(a, a.name, a.dom.extent) if a is not t else
                _axis_like(t, f"{t.name}.block", nblocks) for a in st.axes)
    own = tuple(a.var for a in cax)
    carry_name = sched._unique(f"{st.name}.carry")
    carry = Stage(carry_name, cax, (), n.const(0, g.dtype), g.dtype, st.loc, origin="blocked_scan")
    prev = list(own)
    prev[p] = mk.max_(mk.sub(own[p], 1), 0)      # clamped: read only where j >= 1
    here = n.TensorRead(g.dtype, part.output, own)
    carry.body = mk.select(mk.lt(own[p], 1), here,
                           _combine(comb, n.TensorRead(g.dtype, carry.output, tuple(prev)), here))
    carry.scan = replace(info, axis=p, steps=(), segment=0)
    hc = sched._insert_before(carry, st)

    # 3. the scan itself, restarted at every block from the carry of the blocks before it
    sv = [a.var for a in st.axes]
    off = mk.sub(t.var, lo)
    blk = mk.floordiv(off, chunk)
    before = list(sv)
    before[p] = mk.max_(mk.sub(blk, 1), 0)      # clamped: read only where blk >= 1
    start = mk.select(mk.lt(blk, 1), g,
                      _combine(comb, n.TensorRead(g.dtype, carry.output, tuple(before)), g))
    # the previous step, clamped into the block: a block's first step never loads the
    # element another thread writes (the select would discard it, but the load would race)
    last = list(sv)
    last[p] = mk.max_(mk.sub(t.var, 1), mk.add(lo, mk.mul(blk, chunk)))
    update = _combine(comb, n.TensorRead(g.dtype, st.output, tuple(last)), g)
    st.body = mk.select(mk.eq(mk.mod(off, chunk), 0), start, update)
    st.scan = replace(info, assoc=None, segment=chunk)
    # what a GPU tile scan of the segments reads (kdsl.gpu.scan_tiles.TileScan)
    return hp, hc, h, (comb, g, mk.lt(blk, 1), n.TensorRead(g.dtype, carry.output, tuple(before)))
