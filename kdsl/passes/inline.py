"""compute_inline: substitute elementwise stages into their readers (graph level)."""
from __future__ import annotations

from ..ir import nodes as n
from ..ir.visitor import Mutator, substitute
from ..schedule.records import AttachKind


class _Inline(Mutator):
    def __init__(self, stage):
        super().__init__()
        self.stage = stage

    def visit_TensorRead(self, r):
        r = self.generic(r)
        if r.tensor is not self.stage.output:
            return r
        return substitute(self.stage.body, {a.var: i for a, i in zip(self.stage.axes, r.indices)})


def inline_stages(sched) -> list:
    """Rewrite readers of inlined stages in place; return the handles still to lower (topological)."""
    keep = []
    for h in sched.stages:
        if h.attach is AttachKind.INLINE:
            m = _Inline(h.stage)
            for other in sched.stages:
                if other is not h:
                    other.stage.body = m.visit(other.stage.body)
        else:
            keep.append(h)
    return keep


def reads_tensor(expr, tensor) -> bool:
    from ..ir.visitor import collect
    return bool(collect(expr, lambda x: isinstance(x, n.TensorRead) and x.tensor is tensor))
