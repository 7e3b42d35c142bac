"""A ``LoweredFunc`` -> one LLVM module (pure: nothing is compiled or run here).

The calling convention of the entry function is

    i32 kdsl_<name>(ptr buffers, ptr scalars, ptr runtime)

``buffers``: one pointer per ``func.buffers`` (inputs then outputs), each
pointing at element [0, ..., 0]; ``scalars``: one 8-byte slot per
``func.scalars`` Var, holding the value in the Var's storage type (see
types.py) at the start of the slot; ``runtime``: ``{ptr launch, i64 nthreads}``
(see parallel.py).  The result is 0, or 1 when a temporary could not be
allocated.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir

from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.bindings import scalar_slots
from kdsl.ir.visitor import collect

from . import types as T
from .alias import AliasScopes
from .function import FnCtx
from .intrinsics import Intrinsics
from .stmt import StmtGen

ENTRY_TYPE = ir.FunctionType(T.I32, [T.PTR, T.PTR, T.PTR])


@dataclass(frozen=True)
class Generated:
    """The generated module of one kernel: ``ir`` (LLVM IR text) and the entry symbol."""

    ir: str
    entry: str
    scalar_dtypes: tuple


def symbol_name(func: n.LoweredFunc) -> str:
    """The entry symbol of ``func``: ``kdsl_`` plus its name in C identifier characters."""
    return "kdsl_" + (re.sub(r"\W", "_", func.name) or "kernel")


def generate(func: n.LoweredFunc, triple: str = "", data_layout: str = "") -> Generated:
    """The LLVM IR of ``func`` (see the module docstring for the calling convention)."""
    if not isinstance(func, n.LoweredFunc):
        raise InternalCompilerError(f"generate() needs a LoweredFunc, got {type(func).__name__}")
    scalar_slots(func)      # the bindings must decode (one per scalar, known kinds)
    module = ir.Module(name=func.name)
    if triple:
        module.triple = triple
    if data_layout:
        module.data_layout = data_layout
    name = symbol_name(func)
    entry = ir.Function(module, ENTRY_TYPE, name)
    entry.attributes.add("nounwind")
    bufs_arg, scalars_arg, rt_arg = entry.args
    bufs_arg.name, scalars_arg.name, rt_arg.name = "buffers", "scalars", "runtime"
    gen = StmtGen(module, Intrinsics(module), name)
    gen.empty_reads = any(b.empty_reads for b in func.buffers) or bool(
        collect(func.body, lambda x: type(x) is n.Allocate and x.buffer.empty_reads))
    ctx = FnCtx(entry)
    ctx.alias = AliasScopes(module, func)
    gen.bind(ctx)
    b = ctx.b
    ctx.rt = rt_arg
    ctx.status = ctx.entry_alloca(T.I32, 1, align=4, name="status")
    b.store(ir.Constant(T.I32, 0), ctx.status)
    for k, buf in enumerate(func.buffers):
        p = b.gep(bufs_arg, [ir.Constant(T.I64, k)], source_etype=T.PTR)
        ctx.bufs[buf] = b.load(p, typ=T.PTR, name=buf.name)
        ctx.param_bufs.add(buf)
    for k, v in enumerate(func.scalars):
        p = b.gep(scalars_arg, [ir.Constant(T.I64, k)], source_etype=T.I64)
        raw = b.load(p, typ=T.storage_type(v.dtype), align=8, name=v.name)
        ctx.env[v] = T.from_storage(b, v.dtype, raw)
    gen.stmt(func.body)
    b.ret(b.load(ctx.status, typ=T.I32))
    ctx.finish()
    return Generated(str(module), name, tuple(v.dtype for v in func.scalars))
