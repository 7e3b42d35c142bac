"""Default CPU schedules: what a kernel gets when its author writes no schedule.

``default_plans(sched, threads)`` gives each stage that will be computed the
plan (kdsl/schedule/plan.py) of its kind:

* reductions with few outputs split the reduction across threads (rfactor);
* contractions the schedule generator tiles (kdsl/schedule/generator.py: conv2d,
  1x1 conv; matmuls keep the packed recipe) get its cheapest candidate for this
  host's Target (target.py); ``reduction_plan`` is the one place that decides;
* matrix products get the blocked GEMM recipe (gemm.py);
* reductions with a small constant window (a 2-D stencil) unroll it;
* reductions over rows keep the reduction innermost, over columns move it
  out of the innermost loop;
* everything else is parallel over its outermost axis;
* fused attention chains (kdsl/frontend/online_softmax.py) get the blocked schedule of
  attention.py (``prepare`` before the plans, ``place`` after them), unless hints are given.

``schedule(sched, hints, threads)`` lets the user's hints override fields of
those plans (kdsl/schedule/hints.py), then computes intermediate stages that
are read row by row by one consumer inside that consumer's row loop
(softmax, layernorm: one pass over each row while it is in cache), and
realises everything.  A hint adjusts a default; it never drops the rest of it.
"""
from __future__ import annotations

from kdsl.backends.scan_schedules import cpu_scan, take_scans
from kdsl.schedule import generator
from kdsl.schedule.hints import merge_hints
from kdsl.schedule.plan import (StagePlan, realize, reduce_names, spatial_names,
                                vector_axis_name)
from kdsl.schedule.records import AttachKind
from kdsl.schedule.patterns import sole_root

from . import analysis as A
from . import attention, rules
from .gemm import is_matmul, packed_wins, recipe
from .target import cpu_target

#: default plans from the generator (False: the rules alone, as before it; benchmarks compare)
GENERATOR = True


def schedule(sched, hints, threads: int) -> None:
    """Default plans, adjusted by ``hints`` (a list of declarative Hints), realised on ``sched``."""
    chains, owned = attention.prepare(sched, cpu_target(threads)) if not hints else ((), set())
    plans = default_plans(sched, threads, owned=owned)
    scans = take_scans(sched, plans)        # kd.scan stages: their own default (below)
    merge_hints(sched, plans, hints, threads)
    attach = attach_rows(sched, plans)
    if attach:   # attached stages get the plan of a stage inside a row loop (hints still apply)
        plans = default_plans(sched, threads, attached=set(attach), owned=owned)
        take_scans(sched, plans)
        merge_hints(sched, plans, hints, threads)
    realize(sched, plans, attach)
    attention.place(sched, chains)   # fused attention chains: blocked (attention.py)
    for h in scans:
        if threads > 1:
            cpu_scan(sched, h)


def default_plans(sched, threads: int, attached=frozenset(), owned=frozenset()) -> dict:
    """Stage name -> the default StagePlan of every stage that is computed (but those of
    ``owned``: a fused attention chain's, scheduled by attention.py)."""
    plans = {}
    for h in sched.stages:
        if h.attach is AttachKind.INLINE or h.name in owned:
            continue
        st = h.stage
        if h.name in attached:
            plans[h.name] = rules.attached(st, A.small_reduction(st))
        elif not st.is_reduction:
            plans[h.name] = rules.elementwise(st)
        else:
            plans[h.name] = reduction_plan(st, threads)
    return plans


def reduction_plan(stage, threads: int) -> StagePlan:
    """The one place that decides a root reduction's default: split-K when the outputs are too
    few for the threads; else the generator's cheapest tiled sketch (kdsl.schedule.generator)
    when the stage is a contraction it tiles, unless the packed GEMM recipe measured faster
    for it (``gemm.packed_wins``: every matmul, measured); else the rule of its kind."""
    st = stage
    target = cpu_target(threads)
    parts = generator.split_parts(st, target)
    if parts:
        return rules.split_reduction(st, parts)
    if GENERATOR:
        best = generator.best(st, target)
        if best is not None and not (is_matmul(st) and packed_wins(st)):
            return best.plan(spatial_names(st)[0])
    if is_matmul(st):
        return StagePlan(recipe=recipe(), parallel=spatial_names(st)[0])
    if A.small_reduction(st):
        return rules.stencil(st)
    if A.column_reduction(st):
        return rules.column_reduction(st)
    return rules.row_reduction(st)


def _makes_stages(stage, plan) -> bool:
    """Does realising ``plan`` move the stage's reads into new stages (rfactor, lanes)?"""
    if plan.recipe is not None or (plan.rfactor or 1) > 1:
        return True
    return vector_axis_name(stage, plan) in reduce_names(stage)


def _keeps_first_loop(stage, plan) -> bool:
    """The consumer's first axis stays one whole loop (producers attach there)."""
    first = spatial_names(stage)[0]
    if first in plan.tile or first in plan.unroll_axes or _makes_stages(stage, plan):
        return False
    return vector_axis_name(stage, plan) != first


def attach_rows(sched, plans) -> dict:
    """Producer name -> consumer name, for each intermediate stage whose readers all iterate
    over the same rows.

    A stage P is attached at the outermost loop of a root stage R when every
    reader of P is R or a stage already attached at R, each reads P with its
    own first axis as the first index, and P's first extent is R's.  Stages whose
    plan makes new stages or asks for a parallel loop of their own stay at the root.
    """
    attach = {}
    for h in reversed(sched.stages):
        plan = plans.get(h.name)
        if plan is None or A.is_output(sched, h) or not h.stage.axes:
            continue
        if "parallel" in plan.explicit or _makes_stages(h.stage, plan):
            continue
        found = sole_root(sched, h, attach)
        if found is None:
            continue
        readers, root = found
        rplan = plans.get(root.name)
        if (root.name in attach or rplan is None or len(root.stage.axes) < 2
                or is_matmul(root.stage) or not _keeps_first_loop(root.stage, rplan)
                or root.stage.axes[0].dom.extent != h.stage.axes[0].dom.extent):
            continue
        if not all(_reads_by_row(r, h) for r in readers):
            continue
        attach[h.name] = root.name
    return attach


def _reads_by_row(reader, producer) -> bool:
    first = reader.stage.axes[0].var if reader.stage.axes else None
    ok = False
    for r in A.reads_of(reader.stage):
        if r.tensor in producer.stage.values:
            if first is None or not r.indices or r.indices[0] is not first:
                return False
            ok = True
    return ok
