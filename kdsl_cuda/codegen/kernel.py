"""One ``DeviceKernel`` -> one ``extern "C" __global__`` CUDA function.

BOUND loops become the hardware indices (``const int64_t i = blockIdx.x + min;``); every loop
of a kernel bound to one tag is the same index, so nested same-tag loops just name it again.
A thread loop shorter than the launch's block size is guarded (``if (threadIdx.x < extent)``).
Shared allocations are declared once at the top of the kernel (``__shared__``, 16-byte
aligned; those whose shape is known only at launch as slices of ``extern __shared__``
``kd_dyn_smem``, the launch's ``dynamic_shared`` bytes), local ones where they are allocated.
``CrossThreadReduce`` becomes warp shuffles plus shared memory across warps (``cross_thread``).  ``AsyncCopy`` of 4- and 8-byte elements
is ``cp.async`` with zero fill (others copy synchronously), ``CommitGroup``/``WaitGroup`` are
``cp.async.commit_group``/``wait_group``.  16-bit floats are stored as raw bits and computed
in float (``types``).  WMMA statements and fragments are tensor-core PTX (``wmma``).

Index arithmetic is ``int`` where ``index32.IndexWidths`` proves it fits (the specialisation's
size hints bound the shapes): loop variables declared ``int``, shape parameters copied once into
``const int`` locals (the parameters stay ``int64_t``), flat offsets, guards and hoisted
divisions printed in 32 bits; everything else (strides, data, unbounded shapes) stays int64.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.shared_memory import element_count, shared_layout
from kdsl.ir.visitor import any_statement, collect
from kdsl.gpu.coalesced_fallbacks import is_copy_alternative

from .expr import ExprPrinter
from .index32 import IndexWidths
from .vector import try_vectorize
from .names import Namer
from .offsets import const_int, flat_offset
from .cross_thread import CrossThreadEmitter
from .types import ctype, literal, load, store, stype

_AXIS = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class Param:
    """A kernel parameter: a buffer (``buffer`` set) or a scalar Var (``var`` set)."""

    name: str
    ctype: str
    buffer: n.Buffer | None = None
    var: n.Var | None = None


@dataclass(frozen=True)
class KernelSource:
    """A printed kernel: its ``extern "C"`` name (the IR's, made a C identifier), parameters
    in order, launch and CUDA text."""

    name: str
    params: tuple
    launch: n.Launch
    text: str
    #: device functions the text calls that the prelude lacks (name -> text; wgmma shapes)
    helpers: tuple = ()
    #: whether it needs the sm_90a target (Hopper's wgmma)
    sm90a: bool = False


#: the warp-level statements printed by codegen/wmma.py and codegen/wgmma.py
_WARP_STMTS = frozenset(n.WMMA_STMTS) | {n.WgmmaCommit, n.WgmmaWait}


def _tag_axis(tag: n.ThreadTag) -> tuple[str, int]:
    reg, ax = tag.value.split(".")
    return reg, _AXIS[ax]


class KernelPrinter:
    """Prints one device kernel of ``func`` (see the module docstring)."""

    def __init__(self, func: n.LoweredFunc, kernel: n.DeviceKernel):
        self.func, self.kernel = func, kernel
        self.block = tuple(int(b) for b in kernel.launch.block) + (1,) * (3 - len(kernel.launch.block))
        self.nthreads = self.block[0] * self.block[1] * self.block[2]
        self.names = Namer({"kd_tid"})
        # the extern "C" symbol (a lambda's kernel is "<lambda>_kernel0"): what a loader looks up
        self.c_name = re.sub(r"[^0-9A-Za-z_]", "_", kernel.name)
        if not self.c_name or self.c_name[0].isdigit():
            self.c_name = "k_" + self.c_name
        self.widths = IndexWidths(func, kernel, self.block)
        self.expr = ExprPrinter(self._var, self._load, self.widths)
        self._locals32: dict = {}        # id(shape Var) -> its const int local's name
        self.lines: list[str] = []
        #: in the fast branch of an ``alternatives`` if: the alignment tests it assumes
        self.assumed: list | None = None
        #: printing the else branch of an ``alternatives`` if (only the first copy assumes)
        self.in_general = False
        self.shared_decls: list[str] = []
        self._shared_seen: set = set()
        self._bound: set = set()       # ids of Vars in scope
        self._scalars = {id(v): v for v in func.scalars}
        self._ctr_count = 0
        self._invariants = _thread_invariant_divisions(kernel.body, self._scalars)
        #: Hopper tensor cores (codegen/wgmma.py): the kernel has shared-operand products; the
        #: device functions printed for them; inside a fenced run of wgmma statements
        self.has_wgmma = any_statement(kernel.body, lambda x: type(x) is n.WgmmaMma)   # (uses_wgmma)
        self.async_wgmma = self.has_wgmma and any_statement(kernel.body, lambda x: type(x) is n.WgmmaCommit)
        self.helpers: dict = {}
        self.wgmma_batch = False
        #: the fragments allocated around the statement being printed
        self.fragments: list = []

    # ------------------------------------------------------------- names and memory
    def _var(self, v: n.Var, narrow: bool = False) -> str:
        """``v``'s C name; ``narrow``: as an ``int`` value (its range fits: index32)."""
        if id(v) not in self._bound and id(v) not in self._scalars:
            raise InternalCompilerError(f"cuda codegen: variable {v.name} used outside its scope "
                                        f"in kernel {self.kernel.name}")
        name = self.names(v, v.name)
        if not narrow or self.widths.declared32(v):
            return name
        if id(v) in self._scalars and self.widths.scalar32(v):
            local = self._locals32.get(id(v))
            if local is None:
                local = self._locals32[id(v)] = self.names.fresh(name + "_i")
            return local
        return f"((int){name})"

    def var_ctype(self, v: n.Var) -> str:
        """The C type of loop or let variable ``v``: ``int`` where every value fits."""
        return "int" if self.widths.declared32(v) else ctype(v.dtype)

    def _buf(self, b: n.Buffer) -> str:
        return self.names(b, b.name)

    buf = _buf

    def bind(self, v: n.Var) -> str:
        """``v``'s C name, in scope until ``unbind``."""
        self._bound.add(id(v))
        return self.names(v, v.name)

    def unbind(self, v: n.Var) -> None:
        self._bound.discard(id(v))

    def flat_index(self, b: n.Buffer, indices) -> str:
        """Element offset of ``b[indices]``: explicit strides, else row-major (Horner form),
        printed as index arithmetic (32-bit where the whole offset provably fits)."""
        if len(indices) != len(b.shape):
            raise InternalCompilerError(f"cuda codegen: {b.name} indexed with {len(indices)} of "
                                        f"{len(b.shape)} indices")
        if b.swizzle:
            from . import wgmma
            return wgmma.offset(self, b, indices)
        e = flat_offset(b, indices)
        return "0" if e is None else self.expr.index(e)

    def _load(self, e: n.Load) -> str:
        b = e.buffer
        text = f"{self._buf(b)}[{self.flat_index(b, e.indices)}]"
        ne = self.nonempty(b) if b.empty_reads else None
        if ne:      # a dead read of an empty array (Buffer.empty_reads) touches no memory
            text = f"({ne} ? {text} : ({stype(b.dtype)})0)"
        return load(b.dtype, text)

    def nonempty(self, b: n.Buffer) -> str | None:
        """C text of ``b`` having elements (its symbolic dims > 0), or None if it always has."""
        dims = [s for s in b.shape if not (type(s) is n.Const and s.value > 0)]
        if not dims:
            return None
        return "(" + " && ".join(f"({self.expr(s)} > 0)" for s in dims) + ")"

    # ------------------------------------------------------------- output
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def print(self, params: tuple) -> KernelSource:
        body_depth = 1
        self.emit(body_depth, "const int kd_tid = (int)threadIdx.x + "
                  f"{self.block[0]} * ((int)threadIdx.y + {self.block[1]} * (int)threadIdx.z);")
        self.emit(body_depth, "(void)kd_tid;")
        self._dynamic_shared()
        self.stmt(self.kernel.body, body_depth)
        # shape parameters used as int (their hinted range fits): copied once, at the top,
        # before the shared declarations (a dynamic buffer's offset may use them: issue 24)
        locals32 = [f"const int {name} = (int){self.names(v, v.name)};"
                    for v in self.func.scalars for name in [self._locals32.get(id(v))] if name]
        plist = ",\n    ".join(
            f"{p.ctype} {p.name}" for p in params) or "void"
        head = (f'extern "C" __global__ void __launch_bounds__({self.nthreads})\n'
                f"{self.c_name}(\n    {plist})")
        text = "\n".join([head + " {", *["  " + d for d in locals32 + self.shared_decls],
                          *self.lines, "}"])
        return KernelSource(self.c_name, params, self.kernel.launch, text, tuple(self.helpers.items()),
                            self.has_wgmma)

    # ------------------------------------------------------------- statements
    def stmt(self, s, d: int) -> None:
        if type(s) in _WARP_STMTS:      # tensor cores: their code generators, imported when used
            from . import wgmma, wmma
            if type(s) is n.WgmmaMma:       # Hopper shared-operand products (codegen/wgmma.py)
                wgmma.mma(self, s, d)
                return
            if type(s) is n.WgmmaCommit:
                wgmma.commit(self, s, d)
                return
            if type(s) is n.WgmmaWait:
                wgmma.wait(self, s, d)
                return
            if type(s) in wmma.EMIT:         # tensor-core warp statements (codegen/wmma.py)
                wmma.emit(self, s, d)
                return
        fn = getattr(self, "_" + type(s).__name__, None)
        if fn is None:
            raise InternalCompilerError(f"cuda codegen: {type(s).__name__} inside a device kernel")
        fn(s, d)

    def _Seq(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def _scoped(self, v, d, decl: str, body, guard: str | None = None, hoist: bool = False):
        """``{ decl; [if (guard)] body }`` with ``v`` in scope for the body.  ``hoist``: ``v``
        is a block/thread index; integer divisions that now have all their variables in scope
        are computed here, once (index arithmetic of fused axes), and named."""
        self.emit(d, "{")
        self.emit(d + 1, decl)
        self._bound.add(id(v))
        made = self._hoist(d + 1) if hoist else ()
        if guard:
            self.emit(d + 1, f"if ({guard}) {{")
            self.stmt(body, d + 2)
            self.emit(d + 1, "}")
        else:
            self.stmt(body, d + 1)
        self._bound.discard(id(v))
        for text in made:
            del self.expr.hoisted[text]
        self.emit(d, "}")

    def _hoist(self, d) -> list:
        """Declare the thread-invariant divisions whose variables are all in scope (see
        ``_thread_invariant_divisions``); returns their texts (forgotten when the scope ends)."""
        made = []
        for e, vars_ in self._invariants:
            if not all(x in self._bound or x in self._scalars for x in vars_):
                continue
            text = self.expr.index(e)
            if text in self.expr.hoisted or text in self.expr.hoisted.values():
                continue    # the same division (or one already named) in an outer scope
            name = self.names.fresh("kd_ix")
            t = "int" if self.widths.narrow(e) else ctype(e.dtype)
            self.emit(d, f"const {t} {name} = {text};")
            self.expr.hoisted[text] = name
            made.append(text)
        return made

    def _For(self, s: n.For, d):
        t = self.var_ctype(s.var)
        if s.kind is n.ForKind.BOUND and not s.thread.is_vthread:
            reg, axis = _tag_axis(s.thread)
            hw = f"{reg}.{'xyz'[axis]}"
            name = self.names(s.var, s.var.name)
            self._bound.add(id(s.var))
            offset = "" if const_int(s.min) == 0 else f" + {self.expr.index(s.min)}"
            decl = f"const {t} {name} = ({t}){hw}{offset};"
            guard = None
            if s.thread.is_thread:
                ext = const_int(s.extent)
                if ext is None:
                    raise InternalCompilerError(f"cuda codegen: thread loop {s.var.name} of "
                                                "non-constant extent")
                if ext < self.block[axis]:
                    guard = f"{hw} < {ext}"
            else:
                grid = self.kernel.launch.grid
                if axis >= len(grid) or self.expr(grid[axis]) != self.expr(s.extent):
                    guard = f"({t}){hw} < {self.expr.index(s.extent)}"
            self._scoped(s.var, d, decl, s.body, guard, hoist=True)
            return
        if s.kind is n.ForKind.VECTORIZED and try_vectorize(self, s, d):
            return        # 16-byte loads/stores where aligned, else the loop (codegen/vector.py)
        if self.has_wgmma and not self.wgmma_batch:
            from . import wgmma
            run = wgmma.batch(s)
            if run:
                wgmma.batched_loop(self, s, run, d)      # one fenced asynchronous run
                return
        self.plain_loop(s, d)

    def plain_loop(self, s: n.For, d, rolled: bool = False):
        """A C loop: serial, unrolled, vectorized (no vector accesses), parallel, vthread (run in
        turn); ``rolled``: ``#pragma unroll 1`` (a vectorized loop's scalar fallback where
        ``vector.ROLLED_FALLBACK``)."""
        t = self.var_ctype(s.var)
        name = self.names(s.var, s.var.name)
        end = self.names.fresh(name + "_end")
        lo = self.expr.index(s.min)
        hi = self.expr.index(s.extent if const_int(s.min) == 0
                             else n.Binary(s.min.dtype, n.BinOp.ADD, s.min, s.extent))
        self._bound.add(id(s.var))
        if rolled:
            self.emit(d, "#pragma unroll 1")
        elif s.kind is n.ForKind.UNROLLED and not _divides_by_runtime_values(
                s.body, {id(e) for e, _ in self._invariants}):
            # (not over Python-style divisions by run-time sizes: unrolling their branches
            # made NVRTC take minutes, fuzz F33; NVRTC still unrolls what it finds worth it)
            self.emit(d, "#pragma unroll")
        self.emit(d, f"for ({t} {name} = {lo}, {end} = {hi}; {name} < {end}; ++{name}) {{")
        self.stmt(s.body, d + 1)
        self._bound.discard(id(s.var))
        self.emit(d, "}")

    def _IfThenElse(self, s, d):
        if is_copy_alternative(s):
            return self._copy_alternatives(s, d)
        if s.alternatives and s.otherwise is not None and not self.in_general:
            return self._alternatives(s, d)
        self.emit(d, f"if ({self.expr.index(s.cond)}) {{")
        self.stmt(s.then, d + 1)
        if s.otherwise is not None:
            self.emit(d, "} else {")
            self.stmt(s.otherwise, d + 1)
        self.emit(d, "}")

    def _alternatives(self, s, d):
        """An ``alternatives`` if (its else branch is the general code): the fast branch is
        printed with every kernel-uniform alignment test of its vector accesses assumed, and
        those tests join the condition (``vector._alignment``): interior blocks whose arrays
        are aligned run straight-line copies, the rest the general code (where a nested
        ``alternatives`` if, a middle copy, keeps its tests: unaligned arrays run it)."""
        lines, outer = self.lines, self.assumed
        self.lines, self.assumed = [], []
        try:
            self.stmt(s.then, d + 1)
            fast, assumed = self.lines, self.assumed
        finally:
            self.lines, self.assumed = lines, outer
        cond = " && ".join([f"({self.expr.index(s.cond)})"] + assumed)
        self.emit(d, f"if ({cond}) {{")
        self.lines.extend(fast)
        self.emit(d, "} else {")
        self.in_general = True      # nested alternatives (a middle copy) keep their tests
        try:
            self.stmt(s.otherwise, d + 1)
        finally:
            self.in_general = False
        self.emit(d, "}")

    def _copy_alternatives(self, s, d):
        """A vector copy and its element-by-element dealing (``coalesced_fallbacks``): the
        vector copy where the kernel-uniform alignment tests of its accesses hold, the
        dealing elsewhere (a condition uniform over the block: every thread takes the same
        branch, as the dealing needs).  Inside the fast copy of an ``alternatives`` if, the
        tests join that if's condition instead (its general copy has this if too)."""
        if self.assumed is not None:
            self.stmt(s.then, d)
            return
        lines = self.lines
        self.lines, self.assumed = [], []
        try:
            self.stmt(s.then, d + 1)
            fast, assumed = self.lines, self.assumed
        finally:
            self.lines, self.assumed = lines, None
        if not assumed:      # always aligned, or tested per thread (then the copy falls back itself)
            self.lines.extend(line[2:] for line in fast)
            return
        self.emit(d, f"if ({' && '.join(assumed)}) {{")
        self.lines.extend(fast)
        self.emit(d, "} else {")
        self.stmt(s.otherwise, d + 1)
        self.emit(d, "}")

    def _LetStmt(self, s, d):
        name = self.names(s.var, s.var.name)
        t = self.var_ctype(s.var)
        value = self.expr.index(s.value) if t == "int" else self.expr(s.value)
        self._scoped(s.var, d, f"const {t} {name} = {value};", s.body)

    def _Store(self, s, d):
        self.emit(d, f"{self._buf(s.buffer)}[{self.flat_index(s.buffer, s.indices)}] = "
                     f"{store(s.buffer.dtype, self.expr(s.value))};")

    def _AsyncCopy(self, s, d):
        """``cp.async`` (4- and 8-byte elements: ``.ca`` with the src-size operand, 0 where the
        predicate is false: cp.async's zero fill); other element sizes copy synchronously,
        which is exact (a wait and a barrier precede every read of the destination)."""
        dst = f"{self._buf(s.buffer)}[{self.flat_index(s.buffer, s.indices)}]"
        v = s.value
        size = s.buffer.dtype.itemsize
        same = type(v) is n.Load and v.buffer.dtype == s.buffer.dtype
        src = f"{self._buf(v.buffer)}[{self.flat_index(v.buffer, v.indices)}]" if same else None
        if (same and v.buffer.scope is n.Scope.GLOBAL and s.buffer.scope is n.Scope.SHARED
                and size in (4, 8)):
            self.emit(d, "{")
            self.cp_async(d + 1, size, f"&{dst}", f"&{src}", predicate=s.predicate)
            self.emit(d, "}")
            return
        value = src if same else store(s.buffer.dtype, self.expr(v))   # same type: the bits
        if s.predicate is None:
            self.emit(d, f"{dst} = {value};")
            return
        zero = store(s.buffer.dtype, literal(0, s.buffer.dtype))
        self.emit(d, f"if ({self.expr.index(s.predicate)}) {dst} = {value}; else {dst} = {zero};")

    def cp_async(self, d, size: int, dst: str, src: str, predicate=None,
                 nbytes: str | None = None) -> None:
        """One ``size``-byte ``cp.async`` from address text ``src`` to ``dst``: all of it where
        ``predicate`` (an Expr, or None: always) holds, none elsewhere, or only the first
        ``nbytes`` (a C int name, 0 to ``size``); the rest is zero-filled.  Where it copies
        nothing, ``src`` may point outside its buffer: cp.async reads only the source size's
        bytes (PTX ISA, cp.async: "src-size ... bytes are copied", the rest zero-filled), so
        no safe address is selected (that select cost 9% of an 8192^3 HGEMM)."""
        if nbytes is not None:
            self.emit(d, f"kd_cp_async_n<{size}>({dst}, {src}, {nbytes});")
        elif predicate is None:
            self.emit(d, f"kd_cp_async<{size}>({dst}, {src}, true);")
        else:
            p = self.names.fresh("kd_p")
            self.emit(d, f"const bool {p} = {self.expr.index(predicate)};")
            self.emit(d, f"kd_cp_async<{size}>({dst}, {src}, {p});")

    def _CommitGroup(self, s, d):
        self.emit(d, 'asm volatile("cp.async.commit_group;\\n" ::: "memory");')

    def _WaitGroup(self, s, d):
        self.emit(d, f'asm volatile("cp.async.wait_group %0;\\n" :: "n"({int(s.pending)}) : "memory");')

    def _Barrier(self, s, d):
        if self.has_wgmma:      # make shared stores visible to the tensor cores' async proxy
            self.emit(d, "kd_fence_proxy_async();")
        self.emit(d, "__syncthreads();")

    def _Evaluate(self, s, d):
        self.emit(d, f"(void)({self.expr(s.value)});")

    def _dynamic_shared(self) -> None:
        """Shared buffers sized at launch: slices of one ``extern __shared__`` array at the
        16-byte aligned offsets of ``kdsl.ir.shared_memory`` (the launch passes their total),
        declared at the top of the kernel (before any index arithmetic is hoisted)."""
        layout = shared_layout(self.kernel.body)
        if not layout.dynamic:
            return
        if any(b.swizzle for b, _ in layout.dynamic):
            # swizzled tiles start on 1024-byte boundaries of the shared window: the block is
            # rounded up (the launch asks for SWIZZLE_ALIGN bytes more)
            self.shared_decls.append("extern __shared__ __align__(1024) unsigned char kd_dyn_smem_raw[];")
            self.shared_decls.append(
                "unsigned char* const kd_dyn_smem = kd_dyn_smem_raw + ((1024u - ((unsigned)"
                "__cvta_generic_to_shared(kd_dyn_smem_raw) & 1023u)) & 1023u);")
        else:
            self.shared_decls.append("extern __shared__ __align__(16) unsigned char kd_dyn_smem[];")
        for b, off in layout.dynamic:
            self._shared_seen.add(id(b))
            t = stype(b.dtype)
            at = "" if const_int(off) == 0 else f" + {self.expr(off)}"
            self.shared_decls.append(f"{t}* const {self._buf(b)} = reinterpret_cast<{t}*>(kd_dyn_smem{at});")

    def _Allocate(self, s, d):
        b = s.buffer
        t = stype(b.dtype)
        if id(b) in self._shared_seen and b.scope is n.Scope.SHARED:
            self.stmt(s.body, d)       # declared at the top of the kernel
            return
        if any(const_int(e) is None for e in b.shape):
            raise InternalCompilerError(f"cuda codegen: {b.scope.value} buffer {b.name} of "
                                        "non-constant shape")
        size = element_count(b)         # padded rows included (kdsl.gpu.shared_layout)
        name = self._buf(b)
        if b.scope is n.Scope.SHARED:
            if id(b) not in self._shared_seen:
                self._shared_seen.add(id(b))
                self.shared_decls.append(f"__shared__ __align__(16) {t} {name}[{size}];")
            self.stmt(s.body, d)
        elif b.scope is n.Scope.LOCAL:
            self.emit(d, "{")
            self.emit(d + 1, f"{t} {name}[{size}];")
            self.stmt(s.body, d + 1)
            self.emit(d, "}")
        elif b.scope.is_fragment:       # per-thread registers of a warp's fragment
            self.fragments.append(b)
            from . import wmma
            try:
                wmma.allocate(self, s, d)
            finally:
                self.fragments.pop()
        else:
            raise InternalCompilerError(f"cuda codegen: global buffer {b.name} allocated inside "
                                        f"kernel {self.kernel.name} (workspaces are root allocations)")

    def _Intrinsic(self, s, d):
        """A backend block routine (``kdsl.schedule.intrin.BlockIntrinsic``: flash attention)
        prints itself (``op.cuda(printer, stmt, depth)``)."""
        from kdsl.schedule.intrin import BlockIntrinsic
        op = s.args[0] if s.args else None
        if not isinstance(op, BlockIntrinsic):
            raise InternalCompilerError(f"cuda codegen: intrinsic {s.name!r} has no CUDA form")
        op.cuda(self, s, d)

    def _CrossThreadReduce(self, s: n.CrossThreadReduce, d):
        """Warp shuffles plus shared memory (``cross_thread``)."""
        k = self._ctr_count
        self._ctr_count += 1
        CrossThreadEmitter(self, s, k).emit(d)


#: the nodes whose buffers and variables make a kernel's parameters
_PARAM_NODES = frozenset({n.Load, n.Store, n.AsyncCopy, n.WmmaLoad, n.WmmaStore, n.Intrinsic, n.Var})


def kernel_params(func: n.LoweredFunc, kernel: n.DeviceKernel, namer) -> tuple:
    """The parameters of ``kernel``: the global buffers it reads or writes (inputs as
    ``const T* __restrict__``, outputs and workspaces ``T* __restrict__``), in ``func.buffers`` then workspace order, then the scalars it
    uses (shapes, strides, scalar arguments) in ``func.scalars`` order."""
    used, free = set(), set()
    for x in collect(kernel.body, lambda x: type(x) in _PARAM_NODES):   # (one walk for all)
        t = type(x)
        if t is n.Var:
            free.add(id(x))
        elif t is n.WmmaLoad:                       # tensor-core tiles
            used.add(id(x.src))
        elif t is n.WmmaStore:
            used.add(id(x.dst))
        elif t is n.Intrinsic:                      # block routines' operands
            used.update(id(a) for a in x.args if type(a) is n.Buffer)
        else:
            used.add(id(x.buffer))
    bufs = [b for b in func.buffers + func.workspaces if id(b) in used]
    for b in bufs:
        for e in (b.strides or ()) + tuple(b.shape):
            free.update(id(v) for v in collect(e, lambda x: type(x) is n.Var))
    for b, _ in shared_layout(kernel.body).dynamic:    # the slices' offsets use their shapes
        for e in b.shape:
            free.update(id(v) for v in collect(e, lambda x: type(x) is n.Var))
    inputs = {id(b) for b in func.inputs}
    params = []
    for b in bufs:          # the dispatch never lets an output or workspace alias anything
        t = stype(b.dtype)
        decl = f"const {t}* __restrict__" if id(b) in inputs else f"{t}* __restrict__"
        params.append(Param(namer(b, b.name), decl, buffer=b))
    for v in func.scalars:
        if id(v) in free:
            params.append(Param(namer(v, v.name), ctype(v.dtype), var=v))
    return tuple(params)


def _thread_invariant_divisions(body, scalars: dict) -> list:
    """Integer ``//`` and ``%`` nodes of ``body`` that read no memory and whose variables are
    all block/thread indices or kernel parameters, innermost first (their texts nest), each with the ids of its
    variables.  Splitting fused axes puts such divisions (64-bit, often by a run-time size)
    into every index; computed once per thread they cost nothing in the loops."""
    # one walk: the block/thread loops and the integer divisions (each kind in pre-order)
    bound, divisions = set(), []
    for x in collect(body, lambda x: (type(x) is n.For and x.kind is n.ForKind.BOUND
                                      and not x.thread.is_vthread)
                     or (type(x) is n.Binary and x.op in (n.BinOp.FLOORDIV, n.BinOp.MOD)
                         and x.dtype.is_int)):
        if type(x) is n.For:
            bound.add(id(x.var))
        else:
            divisions.append(x)
    out, seen = [], set()
    for e in divisions:
        parts = collect(e, lambda x: type(x) is n.Load or type(x) is n.Var)
        if any(type(x) is n.Load for x in parts):
            continue        # data, not index arithmetic: it may sit behind a bounds guard
        vars_ = {id(v) for v in parts}
        if not vars_ or not all(v in bound or v in scalars for v in vars_):
            continue
        if type(e.b) is n.Const and type(e.a) is n.Var:
            continue        # bx // 4: cheaper to recompute than to keep in a register
        key = id(e)
        if key not in seen:
            seen.add(key)
            out.append((e, vars_))
    out.sort(key=lambda ev: _depth(ev[0]))
    return out


def _depth(e) -> int:
    kids = [getattr(e, f) for f in ("a", "b") if hasattr(e, f)]
    return 1 + max((_depth(k) for k in kids if isinstance(k, n.Expr)), default=0)


def _divides_by_runtime_values(body, hoisted: set) -> bool:
    """Whether ``body`` has an integer ``//`` or ``%`` by a non-constant that is not computed
    once per thread (``hoisted``: ids of the thread-invariant ones)."""
    return bool(collect(
        body, lambda x: type(x) is n.Binary and x.op in (n.BinOp.FLOORDIV, n.BinOp.MOD)
        and x.dtype.is_int and type(x.b) is not n.Const and id(x) not in hoisted))
