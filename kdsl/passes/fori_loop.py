"""The ``fori_loop`` pass: a ``kd.fori_loop``'s lowered body -> one function running every step.

kdsl.runtime.fori_program compiles the body of a loop as a kernel of its own (its *loop
graph*: the body graph with the loop's bounds as two more scalars).  A backend that runs
loops inside its kernels (``Backend.fori_loops``: cpu, interp) lowers that graph as usual
and then calls ``wrap_loop(request, func)``, which turns the body into the whole loop.

Assumes: ``func`` lowers a graph whose first ``spec.carries`` inputs are the carries a step
reads and whose first ``spec.carries`` outputs are the next carries, all compact (the
placeholders are contiguous, the body is compiled with contiguous outputs); graph scalar
number ``spec.index`` is the step index ``i`` and numbers ``spec.lower``/``spec.upper``
are the bounds (``LoweredFunc.bindings`` name them: SCALAR bindings).

Guarantees: the same parameters (inputs ``k < carries`` now hold the initial carries,
outputs ``k < carries`` receive the last ones); the body is the step's root allocations
whose sizes do not use ``i`` (allocated once, not per step) around one ``CarryLoop`` over
``[lower, upper)`` whose ``cur``/``nxt`` buffers are the step's old parameter buffers made
loop-bound, one buffer (``nxt[k] is cur[k]``: updated in place) where ``_in_place`` proves
the step reads each element of the carry only before overwriting it; ``i`` is the loop's
variable, no longer a scalar of the function.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import config
from ..errors import InternalCompilerError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, allocate_chain, collect, collect_stmts, free_vars, rewrap

#: the key of ``CompileRequest.options`` that asks for the loop form
OPTION = "fori_loop"


@dataclass(frozen=True)
class LoopSpec:
    """Which parameters of a loop graph are what (positions; plain data: it is part of the
    request's disk-cache key)."""

    carries: int      # the first ``carries`` inputs and outputs are the carries
    index: int        # graph.scalars[index] is the step index i
    lower: int        # graph.scalars[lower] / [upper]: the loop's bounds
    upper: int


class _Rebind(Mutator):
    """Loads and Stores of the buffers in ``bmap`` use their replacements."""

    def __init__(self, bmap: dict):
        super().__init__()
        self.bmap = bmap

    def visit_Load(self, e):
        e = self.generic(e)
        b = self.bmap.get(e.buffer)
        return e if b is None else dataclasses.replace(e, buffer=b)

    def visit_Store(self, s):
        s = self.generic(s)
        b = self.bmap.get(s.buffer)
        return s if b is None else dataclasses.replace(s, buffer=b)


def _scalar(func, position: int):
    """The Var of ``func.scalars`` bound to graph scalar number ``position`` (None if unused)."""
    for v, b in zip(func.scalars, func.bindings):
        if b.kind is n.BindingKind.SCALAR and b.index == position:
            return v
    return None


def _roots(s) -> tuple:
    """The statements a step runs one after the other (its root Seq, inside allocations)."""
    while type(s) in (n.Allocate, n.LetStmt):
        s = s.body
    return s.stmts if type(s) is n.Seq else (s,)


def _loads(node, buf) -> list:
    return collect(node, lambda x: type(x) is n.Load and x.buffer is buf)


def _in_place(inner, cur: n.Buffer, nxt: n.Buffer) -> bool:
    """Whether the step ``inner`` may write carry ``nxt`` over ``cur`` (provably the same
    values): the stores to ``nxt`` all sit in one root statement, read ``cur`` only at the
    very element they write (in their value, at their own indices), never ``nxt``; that
    statement reads ``cur`` nowhere else, and no later one reads it at all.  Each element is
    then read, then overwritten, by one store (a root stage writes each element of its
    output once: its reductions, the only repeated stores, read their accumulator, which
    is ``nxt``, and are refused); earlier statements read the old values, later ones the
    new ones, as with two buffers."""
    roots = _roots(inner)
    where = [j for j, r in enumerate(roots)
             if collect_stmts(r, lambda x: type(x) is n.Store and x.buffer is nxt)]
    if len(where) != 1:
        return False
    k = where[0]
    stores = collect_stmts(roots[k], lambda x: type(x) is n.Store and x.buffer is nxt)
    inside = 0
    for w in stores:
        if _loads(w.value, nxt) or any(_loads(i, cur) or _loads(i, nxt) for i in w.indices):
            return False
        mine = _loads(w.value, cur)
        if any(ld.indices != w.indices for ld in mine):
            return False
        inside += len(mine)
    if len(_loads(roots[k], cur)) != inside:
        return False
    if any(_loads(r, nxt) for r in roots[:k]):
        return False
    return not any(_loads(r, cur) for r in roots[k + 1:])


def wrap_loop(request, func: n.LoweredFunc) -> n.LoweredFunc:
    """``func`` made the whole loop when ``request.options`` asks for it (else ``func``)."""
    spec = getattr(request, "options", {}).get(OPTION)
    return func if spec is None else fori_loop(func, spec)


def fori_loop(func: n.LoweredFunc, spec: LoopSpec) -> n.LoweredFunc:
    """The pass (module docstring)."""
    k = spec.carries
    if len(func.inputs) < k or len(func.outputs) < k:
        raise InternalCompilerError(f"{func.name}: a loop of {k} carries lowered with "
                                    f"{len(func.inputs)} inputs and {len(func.outputs)} outputs")
    index, lo, hi = (_scalar(func, p) for p in (spec.index, spec.lower, spec.upper))
    if lo is None or hi is None:
        raise InternalCompilerError(f"{func.name}: the loop's bounds are not scalars of its body")
    cur, nxt, bmap = [], [], {}
    for b in func.inputs[:k] + func.outputs[:k]:
        if b.strides is not None:
            raise InternalCompilerError(f"{func.name}: carry buffer {b.name!r} is not compact")
        nb = dataclasses.replace(b, param=False)
        bmap[b] = nb
        (cur if len(cur) < k else nxt).append(nb)
    body = _Rebind(bmap).visit(func.body)
    step = index if index is not None else n.Var(mk.as_expr(0).dtype, "i")
    # the step's root allocations are made once (their sizes do not change from step to step)
    chain, inner = allocate_chain(body)
    keep = [a for a in chain if index is None or not any(
        index in free_vars(x) for x in a.buffer.shape)]
    ids = {id(a) for a in keep}
    inner = rewrap([a for a in chain if id(a) not in ids], inner)
    # carries whose step reads them only where it is about to overwrite them: in place
    same = {x: c for c, x in zip(cur, nxt) if _in_place(inner, c, x)}
    if same:
        inner = _Rebind(same).visit(inner)
        nxt = [same.get(x, x) for x in nxt]
    loop = n.CarryLoop(step, lo, mk.sub(hi, lo), func.inputs[:k], tuple(cur), tuple(nxt),
                       func.outputs[:k], inner)
    body = rewrap(keep, loop)
    scalars, binds = [], []
    for v, b in zip(func.scalars, func.bindings):
        if v is not index:
            scalars.append(v)
            binds.append(b)
    out = dataclasses.replace(func, body=body, scalars=tuple(scalars), bindings=tuple(binds))
    if config.verify():
        from ..ir.verifier import verify
        verify(out)
    return out
