"""The state of one LLVM function being generated: builder, variables, buffers, memory access.

A kernel module holds the entry function and one outlined function per
parallel loop; each gets its own ``FnCtx``.  Loads and stores turn logical
indices into an element offset with the buffer's strides (explicit stride
expressions, or compact row-major strides computed from the shape), so any
numpy view (transposed, negative strides, zero-size) is read in place.
"""
from __future__ import annotations

from llvmlite import ir

from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n

from . import empty_reads
from . import types as T


class FnCtx:
    """One LLVM function under construction.

    ``env``: Var -> LLVM value; ``bufs``: Buffer -> base pointer; ``status``:
    pointer to the call's i32 status word (set to 1 when an allocation fails);
    ``rt``: the runtime table pointer (parallel launcher, thread count), None
    inside outlined bodies; ``par_depth``: > 0 inside a parallel body, where
    nested parallel loops run serially.
    """

    def __init__(self, fn: ir.Function, par_depth: int = 0):
        self.fn = fn
        # allocas go into "entry" (jumping to "start" once the function is finished), so
        # they stay at the top of the function whatever block code is being emitted into
        self._entry = fn.append_basic_block("entry")
        self._start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(self._start)
        self.env: dict = {}
        self.bufs: dict = {}
        self.param_bufs: set = set()
        #: temporaries allocated by this function itself (private to its thread: vector.py may
        #: read and write back lanes of them an edge tile does not own)
        self.private: set = set()
        self.status = None
        self.rt = None
        self.par_depth = par_depth
        self.alias = None     # the module's AliasScopes (shared by the entry and its chunks)
        self.expr = None      # the ExprGen bound to this context (set by the statement generator)
        #: Buffer.empty_reads buffers known non-empty here, and those an enclosing loop was
        #: already versioned on (kdsl_cpu.codegen.empty_reads)
        self.known_nonempty: set = set()
        self.versioned: set = set()
        self.cold = 0         # > 0 in the copy for empty arrays: loops get no unrolling etc.
        self.compact = 0      # > 0 in an unswitched loop's guarded copy: no LLVM unrolling

    def entry_alloca(self, t: ir.Type, count: int = 1, align: int = 16, name: str = ""):
        """An alloca in the entry block: one stack slot per call, whatever loop we are in."""
        eb = ir.IRBuilder(self._entry)
        a = eb.alloca(t, size=ir.Constant(T.I64, count) if count != 1 else None, name=name)
        a.align = align
        a.type = T.PTR   # llvmlite types allocas as typed pointers; LLVM 17+ has only `ptr`
        return a

    def finish(self):
        """Close the alloca block (call once, after the body is complete)."""
        ir.IRBuilder(self._entry).branch(self._start)

    # ------------------------------------------------------------- memory
    def _strides(self, buf: n.Buffer) -> list:
        if buf.strides is not None:
            return [self.expr(s) for s in buf.strides]
        out, acc = [], None
        for s in reversed(buf.shape[1:]):
            v = self.expr(s)
            acc = v if acc is None else self.b.mul(acc, v)
            out.append(acc)
        return list(reversed(out)) + [ir.Constant(T.I64, 1)]

    def address(self, buf: n.Buffer, idx: list):
        """Pointer to element ``idx`` (i64 values) of ``buf``."""
        base = self.bufs.get(buf)
        if base is None:
            raise InternalCompilerError(f"buffer {buf.name!r} is used where it is not allocated")
        if len(idx) != len(buf.shape):
            raise InternalCompilerError(f"buffer {buf.name!r} has {len(buf.shape)} dimensions, "
                                        f"accessed with {len(idx)} indices")
        if not idx:
            return base
        b = self.b
        strides = self._strides(buf)
        if buf.empty_reads and buf not in self.known_nonempty:
            base, strides = empty_reads.safe_address(self, buf, base, strides)
        off = None
        for i, s in zip(idx, strides):
            if isinstance(s, ir.Constant) and s.constant == 1:
                term = i
            else:
                term = b.mul(i, s)
            off = term if off is None else b.add(off, term)
        return b.gep(base, [off], source_etype=T.storage_type(buf.dtype))

    def _align(self, buf: n.Buffer) -> int:
        # arguments may be unaligned numpy views: promise nothing (free on x86);
        # temporaries are ours and naturally aligned
        return 1 if buf in self.param_bufs else buf.dtype.itemsize

    def load(self, buf: n.Buffer, idx: list):
        p = self.address(buf, idx)
        v = self.b.load(p, typ=T.storage_type(buf.dtype), align=self._align(buf))
        if self.alias is not None:
            self.alias.tag(v, buf)
        return T.from_storage(self.b, buf.dtype, v)

    def store(self, buf: n.Buffer, idx: list, value):
        p = self.address(buf, idx)
        st = self.b.store(T.to_storage(self.b, buf.dtype, value), p, align=self._align(buf))
        if self.alias is not None:
            self.alias.tag(st, buf)
