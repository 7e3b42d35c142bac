"""LowerState: what the schedule-level passes of the pipeline hand each other.

The pipeline (``kdsl.passes.pipeline``) starts from ``LowerState(sched)`` and
each schedule-level pass returns a new state with one more field filled in
(``dataclasses.replace``): ``placement``, ``handles`` (inline), ``domains``
(bound inference), ``storage``, then ``func`` (loop nests).  IR-level passes
transform ``func``.  A pass reads the analyses it needs from the state it is
handed (``state.need("domains", "storage")``), never from globals, so a backend
can replace one pass by name and every later pass sees its result.

The dict fields are owned by the pass that made them: later passes read them
and never modify them in place.  ``str(state)`` is what ``KDSL_DUMP=passes``
prints after a schedule-level pass (and what the golden tests compare).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InternalCompilerError
from ..ir import nodes as n


@dataclass(frozen=True, eq=False)
class Storage:
    """Buffers of one lowering (the ``storage`` pass).

    ``buffers``: Tensor -> (Buffer, offsets): the buffer holding each computed or
    parameter tensor and the index of its element 0 in the tensor (a region's min).
    ``allocs``: allocation site -> ((Buffer, stages), ...) in order, outermost first:
    site None is the function root, ``(handle, leaf IterVar)`` the body of that loop.
    """

    inputs: tuple
    outputs: tuple
    scalars: tuple
    bindings: tuple          # tuple[n.Binding, ...], one per scalar
    buffers: dict
    allocs: dict


@dataclass(frozen=True, eq=False)
class LowerState:
    """The lowering of one schedule, as far as the passes run so far got."""

    sched: Any                      # kdsl.schedule.Schedule
    out_contiguous: tuple = ()
    placement: Any = None           # kdsl.schedule.legality.Placement
    handles: tuple | None = None    # stage handles to lower (inlined ones removed), topological
    domains: dict | None = None     # handle -> kdsl.passes.bound.Domain
    storage: Storage | None = None
    func: n.LoweredFunc | None = None

    def need(self, *fields: str, by: str = "a pass"):
        """The values of ``fields``; an InternalCompilerError naming ``by`` if one was not made."""
        out = []
        for f in fields:
            v = getattr(self, f)
            if v is None:
                raise InternalCompilerError(f"lowering pass {by!r} needs the state's {f!r}, which no earlier "
                                            "pass of the pipeline made (a pass was removed or moved)")
            out.append(v)
        return out[0] if len(out) == 1 else tuple(out)

    def __str__(self) -> str:
        return format_state(self)


def _attach(h) -> str:
    a = h.attach.name.lower()
    if h.attach_stage is not None and h.attach_axis is not None:
        return f"at {h.attach_stage.name}.{h.attach_axis.name}"
    return a


def format_state(s: LowerState) -> str:
    """The analyses of ``s`` in text, one section per filled field (the IR when ``func`` is set)."""
    if s.func is not None:
        return str(s.func)
    from ..ir.printer import Namer, format_expr     # (debugging output: imported when asked)
    namer = Namer()
    ex = lambda e: format_expr(e, namer)       # noqa: E731
    out = [f"# lowering {s.sched.graph.name}"]
    if s.placement is not None:
        p = s.placement
        out.append("placement: " + ", ".join(f"{h.name} ({_attach(h)}"
                                               + (f", {p.kind[h]}" if h in p.kind else "")
                                               + (", whole buffer" if h in p.full_buffer else "") + ")"
                                               for h in s.sched.stages))
    if s.handles is not None:
        out.append("stages: " + ", ".join(h.name for h in s.handles))
    if s.domains is not None:
        out.append("domains:")
        for h in s.handles or s.domains:
            d = s.domains[h]
            region = ", ".join(f"{a.name}: [{ex(d.mins[a])}, +{ex(d.extents[a])})" for a in h.stage.axes)
            loops = ", ".join(f"{iv.name} < {ex(d.leaf_extent[iv])}" for iv in h.leaf)
            guards = "; ".join(ex(g) for g, _ in d.guards)
            out.append(f"  {h.name}: region {{{region}}} loops [{loops}]" + (f" guards [{guards}]" if guards else ""))
    if s.storage is not None:
        st = s.storage
        out.append("bindings: " + ", ".join(f"{ex(v)}={b.kind.value}({b.index}"
                                              + (f", {b.dim})" if b.dim is not None else ")")
                                              for v, b in zip(st.scalars, st.bindings)))
        out.append("allocations:")
        for site, bufs in st.allocs.items():
            where = "root" if site is None else f"{site[0].name}.{site[1].name}"
            for b, stages in bufs:
                shape = ", ".join(ex(e) for e in b.shape)
                extra = f" x{stages}" if stages != 1 else ""
                out.append(f"  {where}: {b.name} {b.dtype.name}[{shape}] {b.scope.name.lower()}{extra}")
    return "\n".join(out)
