"""Default CPU schedules: what a kernel gets when its author writes no schedule.

``default_schedule(sched, threads)`` walks the stages that will be computed
(inlined ones are skipped) and gives each the rule of its kind:

* intermediate stages read row by row by one consumer are computed inside
  that consumer's row loop (softmax, layernorm: one pass over each row while
  it is in cache);
* matrix products get the blocked GEMM recipe (gemm.py);
* reductions with a small constant window (a 3x3 convolution) unroll it;
* reductions with few outputs split the reduction across threads (rfactor);
* reductions over rows keep the reduction innermost, over columns move it
  out of the innermost loop;
* everything else is parallel over its outermost axis.

Stages a user hinted keep only the hints.
"""
from __future__ import annotations

from kdsl.schedule.records import AttachKind

from . import analysis as A
from . import rules
from .gemm import gemm, is_matmul


def default_schedule(sched, threads: int, hinted=()) -> None:
    """Schedule every stage of ``sched`` not named in ``hinted`` (see the module docstring)."""
    hinted = set(hinted)
    _attach_rows(sched, hinted)
    for h in sched.stages:
        if h.name in hinted or h.attach is AttachKind.INLINE or h.relations:
            continue
        st = h.stage
        if h.attach is AttachKind.AT:
            if A.small_reduction(st):
                for a in st.reduce_axes:
                    h.unroll(a)
            continue
        if not st.is_reduction:
            rules.elementwise(h)
        elif is_matmul(st):
            gemm(sched, h, threads)
        elif A.small_reduction(st):
            rules.stencil(h)
        elif threads > 1 and _few_outputs(st, threads):
            rules.split_reduction(sched, h, threads)
        elif A.column_reduction(st):
            rules.column_reduction(h)
        else:
            rules.row_reduction(h)


def _few_outputs(stage, threads: int) -> bool:
    work = A.spatial_work(stage)
    return work is not None and work < 2 * threads


def _attach_rows(sched, hinted) -> None:
    """compute_at each intermediate stage whose readers all iterate over the same rows.

    A stage P is attached at the outermost loop of a root stage R when every
    reader of P is R or a stage already attached at R, each reads P with its
    own first axis as the first index, and P's first extent is R's.
    """
    for h in reversed(sched.stages):
        if h.name in hinted or h.attach is not AttachKind.ROOT or A.is_output(sched, h):
            continue
        st = h.stage
        if not st.axes:
            continue
        readers = A.consumers(sched, h)
        if not readers:
            continue
        roots = {r.attach_stage if r.attach is AttachKind.AT else r for r in readers}
        if len(roots) != 1:
            continue
        root = roots.pop()
        if (root.attach is not AttachKind.ROOT or len(root.stage.axes) < 2 or root.relations
                or root.name in hinted or is_matmul(root.stage)
                or root.stage.axes[0].dom.extent != st.axes[0].dom.extent):
            continue
        if any(r.attach is AttachKind.AT and r.attach_axis is not root.leaf[0] for r in readers):
            continue
        if not all(_reads_by_row(r, h) for r in readers):
            continue
        h.compute_at(root, root.leaf[0])


def _reads_by_row(reader, producer) -> bool:
    first = reader.stage.axes[0].var if reader.stage.axes else None
    ok = False
    for r in A.reads_of(reader.stage):
        if r.tensor in producer.stage.values:
            if first is None or not r.indices or r.indices[0] is not first:
                return False
            ok = True
    return ok
