"""Statements of the loop IR -> LLVM control flow.

Loops are rotated (guard, body, latch) with an i64 induction variable.
SERIAL and BOUND loops (GPU tags: the lowering emits barrier-separated
phases, so running them in order is exact) are plain loops; UNROLLED loops are
unrolled as unroll.py decides (LLVM's full unroll only where it cannot fail,
else by copying the body here, with a cap on the code size); innermost VECTORIZED loops that vector.py does not emit as
vector code are left to LLVM's loop vectorizer (only ``llvm.loop.unroll.disable``:
a forced ``llvm.loop.vectorize.enable`` can be refused, and LLVM then warns on
stderr).  A PARALLEL loop that is not inside another one is outlined into a
chunk function ``void chunk(ptr data, i64 tid, i64 nthreads)`` running a static
block of the iteration range; the caller packs every live variable and buffer
pointer into ``data`` and calls the runtime's parallel launcher (see
parallel.py).  A SERIAL loop whose tile row guards do not change while it runs is
emitted twice, without them where they all hold (unswitch.py).  Allocations of small constant size live on the stack (one
slot per function: per thread inside a chunk); others use malloc/free.
"""
from __future__ import annotations

from llvmlite import ir

from kdsl import dtypes as dt
from kdsl.errors import BackendCompileError, InternalCompilerError
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.visitor import Visitor, allocate_chain, collect, free_vars, substitute
from kdsl.ir.bounds import const_upper

from kdsl.errors import warn_user

from . import types as T
from . import unroll as U
from . import carry_loop
from . import unswitch
from .empty_reads import version_loop
from .expr import ExprGen
from .function import FnCtx
from .vector import VectorEmitter, same_element

#: constant-size temporaries up to this many bytes go on the stack
STACK_LIMIT = 32 * 1024
#: estimated innermost iterations each thread of a parallel loop gets at least: a loop with
#: less work runs on fewer threads (below this, on the calling thread alone), so that small
#: loops do not pay for waking sleeping workers, nor stall when the cores are shared
PARALLEL_MIN_WORK = 1 << 15
#: the guess for a loop extent that cannot be computed before the loop runs
_UNKNOWN_EXTENT = 16


def _work(s: n.Stmt, subst: dict, known: set) -> n.Expr:
    """An estimate of the innermost iterations of ``s`` as an int64 expression of ``known`` vars.

    Inner extents that use the parallel variable see its first value (``subst``);
    extents that depend on other inner loops count as their constant bound, if they show
    one, else as ``_UNKNOWN_EXTENT``.
    """
    t = type(s)
    if t is n.For:
        e = substitute(s.extent, subst)
        if not all(v in known for v in free_vars(e)):
            # a split or blocked loop (``min(K, n - b*K)``) runs at most its constant K times
            hi = const_upper(e)
            e = mk.as_expr(_UNKNOWN_EXTENT if hi is None else max(hi, 0))
        return mk.mul(mk.max_(e, mk.as_expr(1, e.dtype)), _work(s.body, subst, known))
    if t is n.Seq:
        # constants summed apart, the rest as a balanced tree: a body of thousands of
        # statements must not give an expression thousands deep
        const, terms = 0, []
        for x in s.stmts:
            w = _work(x, subst, known)
            if type(w) is n.Const:
                const += w.value
            else:
                terms.append(w)
        while len(terms) > 1:
            terms = [mk.add(terms[k], terms[k + 1]) if k + 1 < len(terms) else terms[k]
                     for k in range(0, len(terms), 2)]
        return mk.add(terms[0], const) if terms else mk.as_expr(const)
    if t is n.IfThenElse:
        return _work(s.then, subst, known)
    if t is n.Allocate:
        return _work(allocate_chain(s)[1], subst, known)
    if t is n.LetStmt:
        return _work(s.body, subst, known)
    return mk.as_expr(1)

class _Uses(Visitor):
    """The Vars and Buffers a statement uses (Vars in the shapes and strides of its buffers too)."""

    def __init__(self):
        super().__init__()
        self.vars, self.bufs = set(), set()

    def visit_Var(self, v):
        self.vars.add(v)

    def _buffer(self, buf):
        if buf not in self.bufs:
            self.bufs.add(buf)
            for e in tuple(buf.shape) + tuple(buf.strides or ()):
                self.visit(e)

    def visit_Load(self, node):
        self._buffer(node.buffer)
        self.generic(node)

    visit_Store = visit_Load

    def visit_Allocate(self, node):
        chain, inner = allocate_chain(node)
        for a in chain:
            self._buffer(a.buffer)
        self.visit(inner)

    def visit_Intrinsic(self, node):
        for a in node.args:
            if isinstance(a, n.Buffer):
                self._buffer(a)
            elif isinstance(a, (n.Expr, n.Stmt)):
                self.visit(a)


def _uses(s: n.Stmt) -> tuple[set, set]:
    u = _Uses()
    u.visit(s)
    return u.vars, u.bufs


_CHUNK_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.I64, T.I64])
_LAUNCH_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR, T.I64])


_UPDATE_OPS = (n.BinOp.ADD, n.BinOp.MUL, n.BinOp.MIN, n.BinOp.MAX)
_REASSOC_DTYPES = (dt.float32, dt.float64)
_REASSOC = ("reassoc", "contract")


class _LoopID(ir.values.MDValue):
    """A self-referential ``llvm.loop`` node (identity-hashed: it contains itself)."""

    __eq__ = object.__eq__
    __hash__ = object.__hash__


class StmtGen:
    """Generates the statements of one kernel into ``module`` (see the module docstring)."""

    def __init__(self, module: ir.Module, intrinsics, kernel_name: str):
        self.module = module
        self.intr = intrinsics
        self.kernel_name = kernel_name
        self.fn: FnCtx | None = None
        self._chunks = 0
        self._table = {n.For: self._for, n.IfThenElse: self._if, n.Store: self._store,
                       n.Allocate: self._allocate, n.LetStmt: self._let, n.Seq: self._seq,
                       n.Barrier: self._barrier, n.Evaluate: self._evaluate,
                       n.Intrinsic: self._intrinsic,
                       # kd.fori_loop inside the kernel (kdsl_cpu/codegen/carry_loop.py)
                       n.CarryLoop: lambda s: carry_loop.emit(self, s, _uses)}
        self._malloc = self._free = None
        self._unroll = U.UnrollPlanner()
        self._warned: set = set()
        #: loops emitted as the guarded copy of an unswitched loop (unswitch.py), by id; the
        #: nodes are kept so that no id is reused
        self._no_unswitch: set = set()
        self._keep: list = []
        #: the kernel loads a Buffer.empty_reads buffer somewhere (set by module.generate):
        #: only then are loops looked at for versioning (codegen/empty_reads.py)
        self.empty_reads = False

    def bind(self, ctx: FnCtx):
        """Make ``ctx`` the function being generated."""
        ctx.expr = ExprGen(ctx, self.intr)
        self.fn = ctx

    def stmt(self, s: n.Stmt):
        f = self._table.get(type(s))
        if f is None:
            raise InternalCompilerError(f"the cpu backend cannot compile a {type(s).__name__} "
                                        "statement")
        f(s)

    def expr(self, e: n.Expr):
        return self.fn.expr(e)

    # ------------------------------------------------------------- simple statements
    def _seq(self, s):
        for x in s.stmts:
            self.stmt(x)

    def _let(self, s):
        if s.var in self.fn.env:
            raise InternalCompilerError(f"variable {s.var.name!r} is bound again in its own scope")
        self.fn.env[s.var] = self.expr(s.value)
        self.stmt(s.body)
        del self.fn.env[s.var]

    def _store(self, s):
        if s.value.dtype is not s.buffer.dtype:
            raise InternalCompilerError(f"store of a {s.value.dtype.name} value into "
                                        f"{s.buffer.dtype.name} buffer {s.buffer.name!r}")
        if self._reduction_update(s):
            return
        value = self.expr(s.value)
        self.fn.store(s.buffer, [self.expr(i) for i in s.indices], value)

    def _reduction_update(self, s) -> bool:
        """``B[i] = B[i] (+ * min max) x`` in float32/64: combine with reassociation allowed.

        Only the lowering writes such accumulator updates, and the order in which a
        reduction combines its terms is not part of its meaning, so LLVM may split the
        accumulator into vector lanes (otherwise a float sum is never vectorized).
        min/max use the NaN-propagating ``llvm.minimum``/``llvm.maximum``.
        """
        v = s.value
        if type(v) is not n.Binary or v.op not in _UPDATE_OPS or v.dtype not in _REASSOC_DTYPES:
            return False
        if same_element(v.a, s):
            other = v.b
        elif same_element(v.b, s):
            other = v.a
        else:
            return False
        idx = [self.expr(i) for i in s.indices]
        if type(other) is n.Binary and other.op is n.BinOp.MUL and v.op is n.BinOp.ADD:
            # acc + a*b may become one fused multiply-add (more exact, twice the throughput)
            x = self.fn.b.fmul(self.expr(other.a), self.expr(other.b), flags=_REASSOC)
        else:
            x = self.expr(other)
        cur = self.fn.load(s.buffer, idx)
        b = self.fn.b
        if v.op is n.BinOp.ADD:
            r = b.fadd(cur, x, flags=_REASSOC)
        elif v.op is n.BinOp.MUL:
            r = b.fmul(cur, x, flags=_REASSOC)
        else:
            name = "maximum" if v.op is n.BinOp.MAX else "minimum"
            r = b.call(self.intr.binary(name, cur.type), [cur, x])
        self.fn.store(s.buffer, idx, r)
        return True

    def _evaluate(self, s):
        self.expr(s.value)

    def _barrier(self, s):
        pass   # phases of a block run one after the other on the CPU: nothing to wait for

    def _intrinsic(self, s):
        raise BackendCompileError(f"the cpu backend cannot compile the intrinsic {s.name!r} of "
                                  f"kernel {self.kernel_name!r}: tensorize targets such as WMMA "
                                  "need the cuda backend (drop tensorize/tensor_cores for 'cpu')")

    def _if(self, s):
        b = self.fn.b
        cond = self.expr(s.cond)
        if s.otherwise is None:
            with b.if_then(cond):
                self.stmt(s.then)
            return
        with b.if_else(cond) as (then, otherwise):
            with then:
                self.stmt(s.then)
            with otherwise:
                self.stmt(s.otherwise)

    # ------------------------------------------------------------- loops
    def loop_md(self, props) -> ir.values.MDValue:
        """A distinct ``!llvm.loop`` node with ``props`` ((name, value-or-None) pairs)."""
        ops = []
        for name, val in props:
            items = [ir.MetaDataString(self.module, name)]
            if val is not None:
                items.append(val)
            ops.append(self.module.add_metadata(items))
        md = _LoopID(self.module, [], name=str(len(self.module.metadata)))
        md.operands = (md, *ops)
        return md

    def _for(self, s: n.For):
        if version_loop(self, s, self._for):    # loads of arrays that may be empty
            return
        if s.kind is n.ForKind.PARALLEL and self.fn.par_depth == 0:
            return self._parallel(s)
        if s.kind is n.ForKind.UNROLLED:
            return self._unrolled(s)
        if s.kind is n.ForKind.VECTORIZED and VectorEmitter(self, s).emit():
            return
        if s.kind is n.ForKind.SERIAL and self._unswitch(s):
            return
        md = None
        if s.kind is n.ForKind.VECTORIZED:
            if self._unroll.stays_loop(s.body):
                # LLVM vectorizes innermost loops only; asking for more prints a warning
                self._warn(s, U.not_innermost_message(self.user_name, s))
            else:
                # no full unroll first: LLVM would unroll the (constant, guarded) lane loop
                # into scalar branches before the loop vectorizer ever sees it.  No
                # llvm.loop.vectorize.enable: LLVM may refuse a forced request (a tiny or
                # guarded trip count...) and then prints a warning on the user's stderr;
                # unforced, its vectorizer takes the loop when its cost model says so
                md = self.loop_md([("llvm.loop.unroll.disable", None)])
        elif not self._unroll.stays_loop(s.body) and U.strided_at_run_time(s):
            # gathers LLVM would emulate lane by lane: see unroll.py (F13)
            md = self.loop_md([("llvm.loop.vectorize.enable", ir.Constant(ir.IntType(1), 0))])
        lo, ext = self.expr(s.min), self.expr(s.extent)
        self.loop(s.var, lo, self.fn.b.add(lo, ext), s.body, md)

    def _unswitch(self, s: n.For) -> bool:
        """Emit ``s`` twice when tile row guards inside it are invariant (unswitch.py): without
        them where they all hold, else as it is (and nothing inside that copy again)."""
        if self.fn.cold or id(s) in self._no_unswitch:
            return False
        guards = unswitch.invariant_guards(s)
        conds = unswitch.instances(guards, s) if guards else None
        if not conds:
            return False
        b = self.fn.b
        ok = self.expr(conds[0])
        for c in conds[1:]:
            ok = b.and_(ok, self.expr(c))
        inner = collect(s, lambda x: type(x) is n.For)
        self._keep.extend(inner)
        self._no_unswitch.update(id(f) for f in inner)
        with b.if_else(ok) as (fast, slow):
            with fast:
                self._for(unswitch.without(s, guards))
            with slow:           # rare (a partial row tile): compact code, no LLVM unrolling
                self.fn.compact += 1
                try:
                    self._for(s)
                finally:
                    self.fn.compact -= 1
        return True

    @property
    def user_name(self) -> str:
        """The kernel's name as its author wrote it (the entry symbol less ``kdsl_``)."""
        k = self.kernel_name
        return k[5:] if k.startswith("kdsl_") else k

    def _warn(self, s: n.For, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warn_user(message)

    def _copy(self, s: n.For, value) -> None:
        """One copy of ``s``'s body with its variable bound to ``value``."""
        env = self.fn.env
        if s.var in env:
            raise InternalCompilerError(f"loop variable {s.var.name!r} is bound again in its scope")
        env[s.var] = value
        self.stmt(s.body)
        del env[s.var]

    def _unrolled(self, s: n.For):
        """An UNROLLED loop, as unroll.py decides: LLVM's full unroll of a small loop-free
        body, every iteration copied, or groups of copies in a loop plus a remainder loop."""
        d = self._unroll.decide(s)
        ext = U.const_extent(s)
        b = self.fn.b
        lo = self.expr(s.min)
        if d.how == "llvm":
            md = self.loop_md([("llvm.loop.unroll.full", None)])
            self.loop(s.var, lo, b.add(lo, self.expr(s.extent)), s.body, md)
            return
        if ext is not None and d.how == "partial":
            self._warn(s, U.capped_message(self.user_name, s, d.factor))
        if d.how == "copies":
            base = int(s.min.value) if isinstance(s.min, n.Const) else None
            for k in range(d.factor):
                if base is not None:
                    self._copy(s, ir.Constant(T.I64, base + k))
                else:
                    self._copy(s, b.add(lo, ir.Constant(T.I64, k)) if k else lo)
            return
        factor = d.factor
        hi = b.add(lo, self.expr(s.extent))
        if factor > 1:
            main = b.add(lo, b.mul(b.sdiv(b.sub(hi, lo), ir.Constant(T.I64, factor)),
                                   ir.Constant(T.I64, factor)))

            def body(t):
                for k in range(factor):
                    self._copy(s, b.add(t, ir.Constant(T.I64, k)) if k else t)
            self.loop_values(lo, main, body, step=factor)
            lo = main
        self.loop(s.var, lo, hi, s.body)

    def loop(self, var: n.Var, lo, hi, body: n.Stmt, md=None):
        """``for var in [lo, hi)`` (i64 values) around ``body``."""
        ctx = self.fn
        if var in ctx.env:
            raise InternalCompilerError(f"loop variable {var.name!r} is bound again in its scope")

        def emit(i):
            ctx.env[var] = i
            self.stmt(body)
            del ctx.env[var]
        self.loop_values(lo, hi, emit, md=md, name=var.name)

    def loop_values(self, lo, hi, emit, step: int = 1, md=None, name: str = "u"):
        """``for i in range(lo, hi, step)`` (i64 values; ``lo + k*step`` never passes ``hi``
        but for the last step) calling ``emit(i)`` for the body."""
        ctx = self.fn
        b = ctx.b
        if ctx.compact and not ctx.cold and md is None:   # an unswitched loop's guarded copy
            md = self.loop_md([("llvm.loop.unroll.disable", None)])
        if ctx.cold and md is None:     # code for empty arrays (codegen/empty_reads.py)
            md = self.loop_md([("llvm.loop.unroll.disable", None),
                               ("llvm.loop.vectorize.enable", ir.Constant(ir.IntType(1), 0)),
                               ("llvm.loop.unswitch.partial.disable", None)])
        pre = b.block
        body_bb = ctx.fn.append_basic_block(f"for.{name}")
        exit_bb = ctx.fn.append_basic_block(f"end.{name}")
        b.cbranch(b.icmp_signed("<", lo, hi), body_bb, exit_bb)
        b.position_at_end(body_bb)
        i = b.phi(T.I64, name=name)
        i.add_incoming(lo, pre)
        emit(i)
        nxt = b.add(i, ir.Constant(T.I64, step), flags=["nsw"])
        i.add_incoming(nxt, b.block)
        br = b.cbranch(b.icmp_signed("<", nxt, hi), body_bb, exit_bb)
        if md is not None:
            br.set_metadata("llvm.loop", md)
        b.position_at_end(exit_bb)

    def _parallel(self, s: n.For):
        """Outline ``s`` into a chunk function and run it through the runtime's launcher."""
        outer = self.fn
        b = outer.b
        lo, ext = self.expr(s.min), self.expr(s.extent)
        # only what the body uses: passing every live pointer made a kernel of K parallel
        # loops O(K^2) instructions (64 outputs: 8 s in LLVM)
        used_vars, used_bufs = _uses(s.body)
        live_vars = [(v, x) for v, x in outer.env.items() if v in used_vars]
        live_bufs = [(bf, p) for bf, p in outer.bufs.items() if bf in used_bufs]
        nslots = 3 + len(live_vars) + len(live_bufs)
        data = outer.entry_alloca(T.I64, nslots, align=16, name="par.data")

        def slot(builder, k):
            return builder.gep(data_ptr, [ir.Constant(T.I64, k)], source_etype=T.I64)

        data_ptr = data
        b.store(lo, slot(b, 0))
        b.store(ext, slot(b, 1))
        b.store(outer.status, slot(b, 2))
        for k, (_, v) in enumerate(live_vars):
            b.store(v, slot(b, 3 + k))
        for k, (_, p) in enumerate(live_bufs):
            b.store(p, slot(b, 3 + len(live_vars) + k))

        self._chunks += 1
        chunk = ir.Function(self.module, _CHUNK_TYPE, f"{self.kernel_name}.par{self._chunks}")
        chunk.linkage = "internal"
        chunk.attributes.add("nounwind")
        # one copy of the loop nest: inlined into the one-thread call below, LLVM would
        # optimise and emit it twice (twice the compile time, for a saving of one call)
        chunk.attributes.add("noinline")
        inner = FnCtx(chunk, par_depth=outer.par_depth + 1)
        inner.param_bufs = outer.param_bufs
        inner.cold = outer.cold
        inner.compact = outer.compact
        if outer.cold:      # the copy for empty arrays: LLVM keeps it small
            for a in ("cold", "minsize", "optsize"):
                chunk.attributes.add(a)
        inner.known_nonempty, inner.versioned = set(outer.known_nonempty), set(outer.versioned)
        inner.alias = outer.alias
        self.bind(inner)
        ib = inner.b
        data_ptr, tid, nth = chunk.args
        c_lo = ib.load(slot(ib, 0), typ=T.I64)
        c_ext = ib.load(slot(ib, 1), typ=T.I64)
        inner.status = ib.load(slot(ib, 2), typ=T.PTR)
        for k, (var, v) in enumerate(live_vars):
            inner.env[var] = ib.load(slot(ib, 3 + k), typ=v.type)
        for k, (buf, _) in enumerate(live_bufs):
            inner.bufs[buf] = ib.load(slot(ib, 3 + len(live_vars) + k), typ=T.PTR)
        # static schedule: thread t runs [t*q, min((t+1)*q, ext)) with q = ceil(ext / nthreads)
        q = ib.sdiv(ib.add(c_ext, ib.sub(nth, ir.Constant(T.I64, 1))), nth)
        start = ib.mul(tid, q)
        stop = ib.add(start, q)
        stop = ib.select(ib.icmp_signed("<", stop, c_ext), stop, c_ext)
        self.loop(s.var, ib.add(c_lo, start), ib.add(c_lo, stop), s.body)
        ib.ret_void()
        inner.finish()
        self.bind(outer)
        data_ptr = data

        # caller: threads = min(rt.nthreads, ext); one thread (or none) calls the chunk directly
        rt_threads = b.load(b.gep(outer.rt, [ir.Constant(T.I64, 1)], source_etype=T.I64), typ=T.I64)
        nt = b.select(b.icmp_signed("<", ext, rt_threads), ext, rt_threads)
        # too little work to pay for waking threads: at most work / PARALLEL_MIN_WORK of them
        work = self.expr(mk.mul(mk.max_(s.extent, mk.as_expr(1, s.extent.dtype)),
                                _work(s.body, {s.var: s.min}, set(outer.env))))
        by_work = b.sdiv(work, ir.Constant(T.I64, PARALLEL_MIN_WORK))
        nt = b.select(b.icmp_signed("<", by_work, nt), by_work, nt)
        nt = b.select(b.icmp_signed("<", nt, ir.Constant(T.I64, 1)), ir.Constant(T.I64, 1), nt)
        with b.if_then(b.icmp_signed(">", ext, ir.Constant(T.I64, 0))):
            with b.if_else(b.icmp_signed(">", nt, ir.Constant(T.I64, 1))) as (many, one):
                with many:
                    launch = b.load(outer.rt, typ=T.PTR)
                    b.call(_FnPtr(launch), [chunk, data, nt])
                with one:
                    b.call(chunk, [data, ir.Constant(T.I64, 0), ir.Constant(T.I64, 1)])

    # ------------------------------------------------------------- memory
    def _allocate(self, s: n.Allocate):
        """A chain of directly nested Allocates at once (a loop: one per stage, thousands deep).

        Small constant-size buffers get a stack slot; the others are malloc'ed together, and
        if any allocation fails the status word is set and the body skipped."""
        ctx = self.fn
        b = ctx.b
        chain, inner = allocate_chain(s)
        mine, heap, failed = [], [], None
        for a in chain:
            buf = a.buffer
            if buf in ctx.bufs or buf in mine:
                raise InternalCompilerError(f"buffer {buf.name!r} is allocated again in its own "
                                            "scope")
            mine.append(buf)
            ctx.private.add(buf)
            st = T.storage_type(buf.dtype)
            count = 1
            static = all(isinstance(x, n.Const) for x in buf.shape)
            if static:
                for x in buf.shape:
                    count *= max(int(x.value), 0)
            if static and count * buf.dtype.itemsize <= STACK_LIMIT:
                ctx.bufs[buf] = ctx.entry_alloca(st, max(count, 1), align=64, name=buf.name)
                continue
            size = ir.Constant(T.I64, buf.dtype.itemsize)
            for x in buf.shape:
                v = self.expr(x)
                size = b.mul(size, b.select(b.icmp_signed(">", v, ir.Constant(T.I64, 0)), v,
                                            ir.Constant(T.I64, 0)))
            size = b.select(b.icmp_signed(">", size, ir.Constant(T.I64, 0)), size,
                            ir.Constant(T.I64, 1))    # malloc(0) may return NULL
            p = b.call(self._libc_malloc(), [size])
            null = b.icmp_unsigned("==", p, ir.Constant(T.PTR, None))
            failed = null if failed is None else b.or_(failed, null)
            heap.append((buf, p))
        if not heap:
            self.stmt(inner)
        else:
            with b.if_else(failed) as (bad, good):
                with bad:
                    # atomic: chunks of a parallel loop may all fail at once
                    b.atomic_rmw("or", ctx.status, ir.Constant(T.I32, 1), "monotonic")
                    for _, p in heap:          # free(NULL) does nothing
                        b.call(self._libc_free(), [p])
                with good:
                    for buf, p in heap:
                        ctx.bufs[buf] = p
                    self.stmt(inner)
                    for _, p in reversed(heap):
                        b.call(self._libc_free(), [p])
        for buf in mine:
            ctx.bufs.pop(buf, None)
            ctx.private.discard(buf)

    def _libc_malloc(self):
        if self._malloc is None:
            self._malloc = ir.Function(self.module, ir.FunctionType(T.PTR, [T.I64]), "malloc")
        return self._malloc

    def _libc_free(self):
        if self._free is None:
            self._free = ir.Function(self.module, ir.FunctionType(T.VOID, [T.PTR]), "free")
        return self._free


class _FnPtr:
    """Call an LLVM function pointer of the runtime launcher type through IRBuilder.call."""

    def __init__(self, ptr):
        self.ptr = ptr
        self.function_type = _LAUNCH_TYPE

    def __getattr__(self, name):
        return getattr(self.ptr, name)
