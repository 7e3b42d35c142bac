"""A plain-text description of a stage graph, used until ``kdsl.ir.printer`` exists."""
from __future__ import annotations

from ..ir import nodes as n


def _e(x) -> str:
    t = type(x)
    if t is n.Var:
        return x.name
    if t is n.Const:
        return repr(x.value)
    if t is n.Binary:
        if x.op in (n.BinOp.MIN, n.BinOp.MAX):
            return f"{x.op.value}({_e(x.a)}, {_e(x.b)})"
        return f"({_e(x.a)} {x.op.value} {_e(x.b)})"
    if t is n.Compare:
        return f"({_e(x.a)} {x.op.value} {_e(x.b)})"
    if t is n.Unary:
        return f"{x.op.value}({_e(x.a)})"
    if t is n.Select:
        return f"select({_e(x.cond)}, {_e(x.t)}, {_e(x.f)})"
    if t is n.Cast:
        return f"{x.dtype.name}({_e(x.a)})"
    if t is n.TensorRead:
        return f"{x.tensor.name}[{', '.join(_e(i) for i in x.indices)}]"
    if t is n.Reduce:
        axes = ", ".join(a.name for a in x.axes)
        src = ", ".join(_e(s) for s in x.sources)
        cond = f", where={_e(x.condition)}" if x.condition is not None else ""
        idx = f"[{x.value_index}]" if len(x.sources) > 1 else ""
        return f"{x.combiner.name}({src}, axis=({axes}){cond}){idx}"
    return type(x).__name__


def describe_graph(graph) -> str:
    """One line per parameter and stage: ``B[i, j] = expr  # float32, extents``."""
    lines = [f"graph {graph.name}("]
    for p in graph.params:
        if isinstance(p, n.Var):
            lines.append(f"    {p.name}: {p.dtype.name},")
        else:
            lines.append(f"    {p.name}: {p.dtype.name}[{', '.join(_e(s) for s in p.shape)}],")
    lines.append("):")
    for st in graph.stages:
        idx = ", ".join(a.name for a in st.axes)
        ext = ", ".join(f"{a.name}<{_e(a.dom.extent)}" for a in st.all_axes)
        lines.append(f"    {st.name}[{idx}] = {_e(st.body)}  # {st.dtype.name}; {ext}")
    lines.append(f"    return {', '.join(t.name for t in graph.outputs)}")
    return "\n".join(lines)
