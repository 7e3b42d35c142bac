"""One ``DeviceKernel`` -> one ``extern "C" __global__`` CUDA function.

BOUND loops become the hardware indices (``const int64_t i = blockIdx.x + min;``); every loop
of a kernel bound to one tag is the same index, so nested same-tag loops just name it again.
A thread loop shorter than the launch's block size is guarded (``if (threadIdx.x < extent)``).
Shared allocations are declared once at the top of the kernel (``__shared__``, 16-byte
aligned), local ones where they are allocated.  ``CrossThreadReduce`` publishes each thread's
values in a shared scratch array, and after a barrier every thread folds its group serially
(in thread-index order) into its own results; a second barrier lets the scratch be reused.
Warp shuffles are issue 10's next step.  Async copies are plain (predicated) copies and
commit/wait print nothing (exact: a wait and a barrier precede every read); WMMA statements
are not generated yet.
"""
from __future__ import annotations

from dataclasses import dataclass

from kdsl.errors import BackendCompileError, InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect

from .expr import ExprPrinter
from .names import Namer
from .types import ctype, literal

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
    """A printed kernel: its name, parameters in order, launch and CUDA text."""

    name: str
    params: tuple
    launch: n.Launch
    text: str


def _tag_axis(tag: n.ThreadTag) -> tuple[str, int]:
    reg, ax = tag.value.split(".")
    return reg, _AXIS[ax]


def _const_int(e) -> int | None:
    return e.value if type(e) is n.Const and e.dtype.is_int else None


class KernelPrinter:
    """Prints one device kernel of ``func`` (see the module docstring)."""

    def __init__(self, func: n.LoweredFunc, kernel: n.DeviceKernel):
        self.func, self.kernel = func, kernel
        self.block = tuple(int(b) for b in kernel.launch.block) + (1,) * (3 - len(kernel.launch.block))
        self.nthreads = self.block[0] * self.block[1] * self.block[2]
        self.names = Namer({"kd_tid"})
        self.expr = ExprPrinter(self._var, self._load)
        self.lines: list[str] = []
        self.shared_decls: list[str] = []
        self._shared_seen: set = set()
        self._bound: set = set()       # ids of Vars in scope
        self._scalars = {id(v): v for v in func.scalars}
        self._ctr_count = 0

    # ------------------------------------------------------------- names and memory
    def _var(self, v: n.Var) -> str:
        if id(v) not in self._bound and id(v) not in self._scalars:
            raise InternalCompilerError(f"cuda codegen: variable {v.name} used outside its scope "
                                        f"in kernel {self.kernel.name}")
        return self.names(v, v.name)

    def _buf(self, b: n.Buffer) -> str:
        return self.names(b, b.name)

    def flat_index(self, b: n.Buffer, indices) -> str:
        """Element offset of ``b[indices]``: explicit strides, else row-major (Horner form)."""
        if len(indices) != len(b.shape):
            raise InternalCompilerError(f"cuda codegen: {b.name} indexed with {len(indices)} of "
                                        f"{len(b.shape)} indices")
        if not indices:
            return "0"
        if b.strides is not None:
            terms = [f"{self.expr(i)} * {self.expr(s)}" for i, s in zip(indices, b.strides)
                     if _const_int(i) != 0]
            return " + ".join(terms) or "0"
        text = None                   # Horner form, zero terms dropped
        for i, ext in zip(indices, b.shape):
            if text is not None:
                text = f"({text}) * {self.expr(ext)}"
            if _const_int(i) != 0:
                text = self.expr(i) if text is None else f"{text} + {self.expr(i)}"
        return text or "0"

    def _load(self, e: n.Load) -> str:
        return f"{self._buf(e.buffer)}[{self.flat_index(e.buffer, e.indices)}]"

    # ------------------------------------------------------------- output
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def print(self, params: tuple) -> KernelSource:
        body_depth = 1
        self.emit(body_depth, "const int kd_tid = (int)threadIdx.x + "
                  f"{self.block[0]} * ((int)threadIdx.y + {self.block[1]} * (int)threadIdx.z);")
        self.emit(body_depth, "(void)kd_tid;")
        self.stmt(self.kernel.body, body_depth)
        plist = ",\n    ".join(
            f"{p.ctype} {p.name}" for p in params) or "void"
        head = (f'extern "C" __global__ void __launch_bounds__({self.nthreads})\n'
                f"{self.kernel.name}(\n    {plist})")
        text = "\n".join([head + " {", *["  " + d for d in self.shared_decls], *self.lines, "}"])
        return KernelSource(self.kernel.name, params, self.kernel.launch, text)

    # ------------------------------------------------------------- statements
    def stmt(self, s, d: int) -> None:
        fn = getattr(self, "_" + type(s).__name__, None)
        if fn is None:
            if type(s) in n.WMMA_STMTS or type(s) is n.Intrinsic:
                raise BackendCompileError(
                    f"kernel {self.kernel.name}: the cuda backend does not generate tensor-core "
                    f"(WMMA) code yet ({type(s).__name__}); run the tensorize schedule on "
                    "backend=\"interp-cuda\" for now")
            raise InternalCompilerError(f"cuda codegen: {type(s).__name__} inside a device kernel")
        fn(s, d)

    def _Seq(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def _scoped(self, v, d, decl: str, body, guard: str | None = None):
        """``{ decl; [if (guard)] body }`` with ``v`` in scope for the body."""
        self.emit(d, "{")
        self.emit(d + 1, decl)
        self._bound.add(id(v))
        if guard:
            self.emit(d + 1, f"if ({guard}) {{")
            self.stmt(body, d + 2)
            self.emit(d + 1, "}")
        else:
            self.stmt(body, d + 1)
        self._bound.discard(id(v))
        self.emit(d, "}")

    def _For(self, s: n.For, d):
        t = ctype(s.var.dtype)
        if s.kind is n.ForKind.BOUND and not s.thread.is_vthread:
            reg, axis = _tag_axis(s.thread)
            hw = f"{reg}.{'xyz'[axis]}"
            name = self.names(s.var, s.var.name)
            self._bound.add(id(s.var))
            offset = "" if _const_int(s.min) == 0 else f" + {self.expr(s.min)}"
            decl = f"const {t} {name} = ({t}){hw}{offset};"
            guard = None
            if s.thread.is_thread:
                ext = _const_int(s.extent)
                if ext is None:
                    raise InternalCompilerError(f"cuda codegen: thread loop {s.var.name} of "
                                                "non-constant extent")
                if ext < self.block[axis]:
                    guard = f"{hw} < {ext}"
            else:
                grid = self.kernel.launch.grid
                if axis >= len(grid) or self.expr(grid[axis]) != self.expr(s.extent):
                    guard = f"({t}){hw} < {self.expr(s.extent)}"
            self._scoped(s.var, d, decl, s.body, guard)
            return
        # serial, unrolled, vectorized (plain loops for now), parallel, vthread (run in turn)
        name = self.names(s.var, s.var.name)
        end = self.names.fresh(name + "_end")
        lo = self.expr(s.min)
        hi = f"{lo} + {self.expr(s.extent)}" if _const_int(s.min) != 0 else self.expr(s.extent)
        self._bound.add(id(s.var))
        if s.kind is n.ForKind.UNROLLED:
            self.emit(d, "#pragma unroll")
        self.emit(d, f"for ({t} {name} = {lo}, {end} = {hi}; {name} < {end}; ++{name}) {{")
        self.stmt(s.body, d + 1)
        self._bound.discard(id(s.var))
        self.emit(d, "}")

    def _IfThenElse(self, s, d):
        self.emit(d, f"if ({self.expr(s.cond)}) {{")
        self.stmt(s.then, d + 1)
        if s.otherwise is not None:
            self.emit(d, "} else {")
            self.stmt(s.otherwise, d + 1)
        self.emit(d, "}")

    def _LetStmt(self, s, d):
        name = self.names(s.var, s.var.name)
        t = ctype(s.var.dtype)
        self._scoped(s.var, d, f"const {t} {name} = {self.expr(s.value)};", s.body)

    def _Store(self, s, d):
        self.emit(d, f"{self._buf(s.buffer)}[{self.flat_index(s.buffer, s.indices)}] = "
                     f"{self.expr(s.value)};")

    def _AsyncCopy(self, s, d):
        dst = f"{self._buf(s.buffer)}[{self.flat_index(s.buffer, s.indices)}]"
        if s.predicate is None:
            self.emit(d, f"{dst} = {self.expr(s.value)};")
            return
        zero = literal(0, s.buffer.dtype)
        self.emit(d, f"if ({self.expr(s.predicate)}) {dst} = {self.expr(s.value)}; else {dst} = {zero};")

    def _CommitGroup(self, s, d):
        self.emit(d, "// commit_group: copies are synchronous for now")

    def _WaitGroup(self, s, d):
        self.emit(d, f"// wait_group({s.pending}): copies are synchronous for now")

    def _Barrier(self, s, d):
        self.emit(d, "__syncthreads();")

    def _Evaluate(self, s, d):
        self.emit(d, f"(void)({self.expr(s.value)});")

    def _Allocate(self, s, d):
        b = s.buffer
        t = ctype(b.dtype)
        size = 1
        for e in b.shape:
            c = _const_int(e)
            if c is None:
                raise InternalCompilerError(f"cuda codegen: {b.scope.value} buffer {b.name} of "
                                            "non-constant shape")
            size *= c
        name = self._buf(b)
        if b.scope is n.Scope.SHARED:
            if id(b) not in self._shared_seen:
                self._shared_seen.add(id(b))
                self.shared_decls.append(f"__shared__ __align__(16) {t} {name}[{max(size, 1)}];")
            self.stmt(s.body, d)
        elif b.scope is n.Scope.LOCAL:
            self.emit(d, "{")
            self.emit(d + 1, f"{t} {name}[{max(size, 1)}];")
            self.stmt(s.body, d + 1)
            self.emit(d, "}")
        elif b.scope.is_fragment:
            raise BackendCompileError(
                f"kernel {self.kernel.name}: the cuda backend does not generate tensor-core (WMMA) "
                f"fragments yet ({b.name}); run the tensorize schedule on backend=\"interp-cuda\"")
        else:
            raise InternalCompilerError(f"cuda codegen: global buffer {b.name} allocated inside "
                                        f"kernel {self.kernel.name} (workspaces are root allocations)")

    def _CrossThreadReduce(self, s: n.CrossThreadReduce, d):
        """Publish / barrier / serial fold per thread (see the module docstring)."""
        comb = s.combiner
        k = self._ctr_count
        self._ctr_count += 1
        reduced = {_tag_axis(t)[1] for t in s.threads}
        scratch, vals = [], []
        for j, (val, res) in enumerate(zip(s.values, s.results)):
            t = ctype(res.dtype)
            sname = self.names.fresh(f"kd_red{k}_{j}")
            self.shared_decls.append(f"__shared__ __align__(16) {t} {sname}[{self.nthreads}];")
            scratch.append((sname, t, res))
            vals.append(val)
        self.emit(d, "{")
        for (sname, t, _), val in zip(scratch, vals):
            self.emit(d + 1, f"{sname}[kd_tid] = {self.expr(val)};")
        self.emit(d + 1, "__syncthreads();")
        accs = []
        for (sname, t, res), ident in zip(scratch, comb.identity):
            acc = self.names.fresh(f"kd_acc{k}")
            accs.append(acc)
            self.emit(d + 1, f"{t} {acc} = {self.expr(ident)};")
        # loops over the reduced axes; the other axes keep this thread's index
        coords, depth = [], d + 1
        for axis in range(3):
            if axis in reduced:
                r = self.names.fresh(f"kd_r{'xyz'[axis]}")
                self.emit(depth, f"for (int {r} = 0; {r} < {self.block[axis]}; ++{r}) {{")
                depth += 1
                coords.append(r)
            else:
                coords.append(f"(int)threadIdx.{'xyz'[axis]}")
        src = self.names.fresh("kd_src")
        self.emit(depth, f"const int {src} = {coords[0]} + {self.block[0]} * ({coords[1]} + "
                         f"{self.block[1]} * {coords[2]});")
        for lhs, rhs, acc, (sname, t, _) in zip(comb.lhs, comb.rhs, accs, scratch):
            ln, rn = self.names(lhs, lhs.name), self.names(rhs, rhs.name)
            self._bound.update((id(lhs), id(rhs)))
            self.emit(depth, f"const {t} {ln} = {acc};")
            self.emit(depth, f"const {t} {rn} = {sname}[{src}];")
        news = []
        for res, (_, t, _) in zip(comb.result, scratch):
            nv = self.names.fresh(f"kd_new{k}")
            news.append(nv)
            self.emit(depth, f"const {t} {nv} = {self.expr(res)};")
        for acc, nv in zip(accs, news):
            self.emit(depth, f"{acc} = {nv};")
        for lhs, rhs in zip(comb.lhs, comb.rhs):
            self._bound.discard(id(lhs))
            self._bound.discard(id(rhs))
        while depth > d + 1:
            depth -= 1
            self.emit(depth, "}")
        for acc, (_, _, res) in zip(accs, scratch):
            self.emit(d + 1, f"{self._buf(res)}[0] = {acc};")
        self.emit(d + 1, "__syncthreads();   // the scratch may be reused")
        self.emit(d, "}")


def kernel_params(func: n.LoweredFunc, kernel: n.DeviceKernel, namer) -> tuple:
    """The parameters of ``kernel``: the global buffers it reads or writes (inputs as
    ``const T* __restrict__``), in ``func.buffers`` then workspace order, then the scalars it
    uses (shapes, strides, scalar arguments) in ``func.scalars`` order."""
    used = set()
    for x in collect(kernel.body, lambda x: type(x) in (n.Load, n.Store, n.AsyncCopy)):
        used.add(id(x.buffer))
    bufs = [b for b in func.buffers + func.workspaces if id(b) in used]
    free = {id(v) for v in collect(kernel.body, lambda x: type(x) is n.Var)}
    for b in bufs:
        for e in (b.strides or ()) + tuple(b.shape):
            free.update(id(v) for v in collect(e, lambda x: type(x) is n.Var))
    inputs = {id(b) for b in func.inputs}
    params = []
    for b in bufs:
        t = ctype(b.dtype)
        decl = f"const {t}* __restrict__" if id(b) in inputs else f"{t}*"
        params.append(Param(namer(b, b.name), decl, buffer=b))
    for v in func.scalars:
        if id(v) in free:
            params.append(Param(namer(v, v.name), ctype(v.dtype), var=v))
    return tuple(params)
