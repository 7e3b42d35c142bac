"""Scoped-noalias metadata: every buffer of a kernel is its own alias scope.

Loads and stores of buffer X are in X's scope and in no other buffer's, so
LLVM may keep an accumulator in a register across a reduction loop and
vectorize loops that read one array and write another.

Encoding: buffer k's scope is its binary number.  Bit d of k picks one of two
scopes in domain d; an access of buffer k carries those scopes as
``!alias.scope`` and the other scope of each domain as ``!noalias``.  Two
buffers differ in some bit, so in that domain one's scope is in the other's
noalias list: LLVM's rule ("for some domain, the alias scopes are a subset of
the noalias scopes") proves them apart, and an access never excludes its own
buffer.  That is 2*log2(B) metadata operands per access instead of B (one list
of every other buffer): a kernel of hundreds of buffers (hundreds of stages)
no longer costs LLVM time quadratic in them.  This is sound because the buffers of one call never overlap
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
        for s in collect(func.body, lambda s: isinstance(s, n.CarryLoop)):
            # kd.fori_loop's carries: accessed only inside a step's own function, where a
            # step's cur and nxt never overlap (kdsl_cpu/codegen/carry_loop.py)
            bufs += [x for x in s.cur + s.nxt if x not in bufs]
        self._tags: dict = {}
        if len(bufs) < 2:
            return
        bits = max(1, (len(bufs) - 1).bit_length())
        scopes = []     # per bit d: (scope of buffers whose bit d is 0, ... is 1)
        for d in range(bits):
            domain = _self_ref(module, ir.MetaDataString(module, f"kdsl.{func.name}.bit{d}"))
            scopes.append(tuple(_self_ref(module, domain, ir.MetaDataString(module, f"bit{d}={v}"))
                                for v in (0, 1)))
        for k, buf in enumerate(bufs):
            mine = [scopes[d][(k >> d) & 1] for d in range(bits)]
            other = [scopes[d][1 - ((k >> d) & 1)] for d in range(bits)]
            self._tags[buf] = (module.add_metadata(mine), module.add_metadata(other))

    def tag(self, instr, buf: n.Buffer) -> None:
        """Attach ``buf``'s scope and noalias lists to a load or store."""
        t = self._tags.get(buf)
        if t is not None:
            instr.set_metadata("alias.scope", t[0])
            instr.set_metadata("noalias", t[1])
