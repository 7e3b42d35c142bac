"""How one specialisation's call binds its shape variables: derived once, read by every launcher.

A call of a compiled kernel binds each symbolic size of the graph's parameters from the first
argument dim (or scalar argument) that carries it, checks every other dim against what it
must be, checks the graph's constraints and computes the outputs' shapes.  ``bindings(graph,
param_pos)`` derives that once per specialisation as data; the generated Python launcher
(``dispatch.build_launcher``, the reference emitter) and the native fast launchers' plan
(``fastpath.make_plan``) are both written from it, so that they cannot disagree.
"""
from __future__ import annotations

from typing import NamedTuple

from ..ir import nodes as n


class Bindings(NamedTuple):
    """The shape contract of one specialisation (argument positions are the call's).

    - ``scalars``: ``(Var, pos)`` per scalar parameter, in the kernel's order;
    - ``arrays``: ``(Tensor, pos)`` per array parameter, in the kernel's order;
    - ``sources``: ``(Var, ("scalar", pos) | ("shape", pos, dim))``: where each variable is
      bound, in binding order (scalars first, then array dims in order);
    - ``checks``: ``(pos, dim, Expr)``: dim ``dim`` of argument ``pos`` must equal the
      expression (a repeated name or a computed size), each after the sources it uses;
    - ``constraints``: the graph's Constraint records; ``outputs``: its output tensors.
    """

    scalars: tuple
    arrays: tuple
    sources: tuple
    checks: tuple
    constraints: tuple
    outputs: tuple


def bindings(graph, param_pos) -> Bindings:
    """The Bindings of ``graph`` whose ``graph.params[i]`` is argument ``param_pos[i]``."""
    scalars, arrays, sources, checks, bound = [], [], [], [], set()
    for p, pos in zip(graph.params, param_pos):
        if isinstance(p, n.Var):
            scalars.append((p, pos))
            sources.append((p, ("scalar", pos)))
            bound.add(p)
        else:
            arrays.append((p, pos))
    for p, pos in arrays:
        for d, e in enumerate(p.shape):
            if type(e) is n.Var and e not in bound:
                sources.append((e, ("shape", pos, d)))
                bound.add(e)
            elif type(e) is not n.Const:
                checks.append((pos, d, e))
    return Bindings(tuple(scalars), tuple(arrays), tuple(sources), tuple(checks),
                    tuple(graph.constraints), tuple(graph.outputs))
