"""Scoped-noalias metadata: every buffer of a kernel is its own alias scope.

Loads and stores of buffer X carry ``!alias.scope !{X}`` and
``!noalias !{every other buffer}``, so LLVM may keep an accumulator in a
register across a reduction loop and vectorize loops that read one array and
write another.  This is sound because the buffers of one call never overlap
where it matters: inputs are only read, temporaries are fresh memory, and
dispatch runs a call whose ``out=`` array overlaps an argument into a fresh
array first (kdsl.runtime.dispatch).
"""
from __future__ import annotations

from llvmlite import ir

from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect


class _SelfRef(ir.values.MDValue):
    """A metadata node whose first operand is itself (what makes scopes and domains unique)."""

    __eq__ = object.__eq__
    __hash__ = object.__hash__


def _self_ref(module: ir.Module, *rest) -> _SelfRef:
    md = _SelfRef(module, [], name=str(len(module.metadata)))
    md.operands = (md, *rest)   # the constructor already registered it with the module
    return md


class AliasScopes:
    """The scope lists of one module's buffers (``func.buffers`` and every allocation)."""

    def __init__(self, module: ir.Module, func: n.LoweredFunc):
        bufs = list(func.buffers)
        for s in collect(func.body, lambda s: isinstance(s, n.Allocate)):
            if s.buffer not in bufs:
                bufs.append(s.buffer)
        self._tags: dict = {}
        if len(bufs) < 2:
            return
        domain = _self_ref(module, ir.MetaDataString(module, f"kdsl.{func.name}"))
        scopes = [_self_ref(module, domain, ir.MetaDataString(module, b.name)) for b in bufs]
        for k, buf in enumerate(bufs):
            own = module.add_metadata([scopes[k]])
            others = module.add_metadata([s for j, s in enumerate(scopes) if j != k])
            self._tags[buf] = (own, others)

    def tag(self, instr, buf: n.Buffer) -> None:
        """Attach ``buf``'s scope and noalias lists to a load or store."""
        t = self._tags.get(buf)
        if t is not None:
            instr.set_metadata("alias.scope", t[0])
            instr.set_metadata("noalias", t[1])
