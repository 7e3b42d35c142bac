"""``CarryLoop`` (a ``kd.fori_loop`` run inside one kernel) -> LLVM: a sequential step loop.

The steps run one after the other in the calling thread; each step's stages are the
body's own loops (its PARALLEL loops are outlined and run on the thread pool as anywhere
else: the launcher returns when every chunk is done, which is the barrier between one
stage and the next, and so between steps).  The carries ping-pong between two buffers
per carry, the result parameter and one temporary, chosen by parity so that the last
step writes the result: step ``s`` of ``E`` writes the result when ``E - 1 - s`` is even,
else the temporary, and reads what step ``s - 1`` wrote (the initial carry at ``s = 0``).
No carry is copied between steps; one temporary per carry is malloc'ed per call (when
two or more steps run).  ``E <= 0`` copies the initial carries into the results.  A carry
updated in place (``nxt is cur``: kdsl.passes.fori_loop proved it) has no temporary: its
result starts as a copy of its init and every step reads and writes it there.

Each step is one call of an outlined ``noinline`` step function (its body: the step's
stages), which is what lets the carry buffers have alias scopes
(kdsl_cpu/codegen/alias.py): scopes hold for a whole function, and one step's ``nxt`` is
the next step's ``cur``; inside one step they never overlap, and no step function holds
two steps (inlined into the step loop, LLVM could move a step's loads above the previous
step's stores).  The loop-invariant values the body uses are packed once per call.
"""
from __future__ import annotations

from llvmlite import ir

from kdsl.ir import make as mk
from kdsl.ir import nodes as n

from . import types as T
from .function import FnCtx


def _bytes(gen, buf: n.Buffer):
    """The size of compact ``buf`` in bytes (at least 1: malloc(0) may return NULL)."""
    b = gen.fn.b
    size = ir.Constant(T.I64, buf.dtype.itemsize)
    zero = ir.Constant(T.I64, 0)
    for x in buf.shape:
        v = gen.expr(x)
        size = b.mul(size, b.select(b.icmp_signed(">", v, zero), v, zero))
    return b.select(b.icmp_signed(">", size, zero), size, ir.Constant(T.I64, 1))


def _copy_nest(pairs) -> n.Stmt:
    """``dst[...] = src[...]`` for every ``(src, dst)`` of ``pairs`` (compact buffers)."""
    stmts = []
    for src, dst in pairs:
        idx = [n.Var(mk.as_expr(0).dtype, f"c{d}") for d in range(len(src.shape))]
        body = n.Store(dst, tuple(idx), n.Load(src.dtype, src, tuple(idx)))
        for v, e in reversed(list(zip(idx, src.shape))):
            body = n.For(v, mk.as_expr(0), e, n.ForKind.SERIAL, body)
        stmts.append(body)
    return n.Seq(tuple(stmts))


_STEP_TYPE = ir.FunctionType(T.VOID, [T.PTR])


def _step_function(gen, s: n.CarryLoop, uses):
    """``(data, step function, store_step)``: the body outlined into ``void step(ptr data)``;
    the invariant slots of ``data`` are filled here, ``store_step(i, curs, nxts)`` fills the
    per-step ones (the index and the carry pointers)."""
    outer = gen.fn
    b = outer.b
    used_vars, used_bufs = uses(s.body)
    live_vars = [(v, x) for v, x in outer.env.items() if v in used_vars]
    live_bufs = [(bf, p) for bf, p in outer.bufs.items() if bf in used_bufs]
    k = len(s.cur)
    base = 3 + 2 * k         # 0 status, 1 runtime table, 2 i, then cur and nxt pointers
    data = outer.entry_alloca(T.I64, base + len(live_vars) + len(live_bufs), align=16,
                              name="fori.data")

    def slot(builder, j):
        return builder.gep(data_ptr, [ir.Constant(T.I64, j)], source_etype=T.I64)

    data_ptr = data
    b.store(outer.status, slot(b, 0))
    b.store(outer.rt if outer.rt is not None else ir.Constant(T.PTR, None), slot(b, 1))
    for j, (_, v) in enumerate(live_vars):
        b.store(v, slot(b, base + j))
    for j, (_, p) in enumerate(live_bufs):
        b.store(p, slot(b, base + len(live_vars) + j))

    gen._chunks += 1
    fn = ir.Function(gen.module, _STEP_TYPE, f"{gen.kernel_name}.step{gen._chunks}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")       # one step per function: see the module docstring
    inner = FnCtx(fn, par_depth=outer.par_depth)
    inner.param_bufs = outer.param_bufs
    inner.alias = outer.alias
    gen.bind(inner)
    ib = inner.b
    data_ptr = fn.args[0]
    inner.status = ib.load(slot(ib, 0), typ=T.PTR)
    inner.rt = ib.load(slot(ib, 1), typ=T.PTR) if outer.rt is not None else None
    inner.env[s.var] = ib.load(slot(ib, 2), typ=T.I64)
    for j, (c, x) in enumerate(zip(s.cur, s.nxt)):
        inner.bufs[c] = ib.load(slot(ib, 3 + j), typ=T.PTR)
        inner.bufs[x] = ib.load(slot(ib, 3 + k + j), typ=T.PTR)
    for j, (var, v) in enumerate(live_vars):
        inner.env[var] = ib.load(slot(ib, base + j), typ=v.type)
    for j, (buf, _) in enumerate(live_bufs):
        inner.bufs[buf] = ib.load(slot(ib, base + len(live_vars) + j), typ=T.PTR)
    gen.stmt(s.body)
    ib.ret_void()
    inner.finish()
    gen.bind(outer)
    data_ptr = data

    def store_step(i, curs, nxts):
        b.store(i, slot(b, 2))
        for j, (c, x) in enumerate(zip(curs, nxts)):
            b.store(c, slot(b, 3 + j))
            b.store(x, slot(b, 3 + k + j))
    return data, fn, store_step


def emit(gen, s: n.CarryLoop, uses) -> None:
    """Generate ``s`` into ``gen``'s current function (kdsl_cpu.codegen.stmt.StmtGen;
    ``uses(stmt)``: the Vars and Buffers a statement uses)."""
    ctx = gen.fn
    b = ctx.b
    one, zero = ir.Constant(T.I64, 1), ir.Constant(T.I64, 0)
    null = ir.Constant(T.PTR, None)
    lo, ext = gen.expr(s.min), gen.expr(s.extent)
    # one temporary per carry updated by ping-pong, when two or more steps run; a carry
    # updated in place (nxt is cur) starts as a copy of its init in its result
    pp = [k for k, (c, x) in enumerate(zip(s.cur, s.nxt)) if c is not x]
    inplace = [k for k in range(len(s.cur)) if k not in pp]
    if inplace:
        gen.stmt(_copy_nest([(s.inits[k], s.results[k]) for k in inplace]))
    sizes = [_bytes(gen, s.cur[k]) for k in pp]
    pre = b.block
    temps = []
    many = b.icmp_signed(">", ext, one)
    with b.if_then(many):
        got = [b.call(gen._libc_malloc(), [sz]) for sz in sizes]
        filled = b.block
    for p in got:
        phi = b.phi(T.PTR)
        phi.add_incoming(p, filled)
        phi.add_incoming(null, pre)
        temps.append(phi)
    failed_temps = list(temps)
    temps = [temps[pp.index(k)] if k in pp else None for k in range(len(s.cur))]
    failed = None
    for p in failed_temps:
        bad = b.and_(many, b.icmp_unsigned("==", p, null))
        failed = bad if failed is None else b.or_(failed, bad)
    inits = [ctx.bufs[x] for x in s.inits]
    results = [ctx.bufs[x] for x in s.results]

    def step(k):
        # k: the step's number from 0; it writes the result when ext - 1 - k is even
        even = b.icmp_signed("==", b.and_(b.sub(b.sub(ext, one), k), one), zero)
        prev_even = b.icmp_signed("==", b.and_(b.sub(ext, k), one), zero)
        first = b.icmp_signed("==", k, zero)
        nxts = [r if t is None else b.select(even, r, t) for r, t in zip(results, temps)]
        curs = [r if t is None else b.select(first, init, b.select(prev_even, r, t))
                for r, t, init in zip(results, temps, inits)]
        store_step(b.add(lo, k), curs, nxts)
        b.call(fn, [data])

    ok = b.not_(failed) if failed is not None else ir.Constant(ir.IntType(1), 1)
    with b.if_else(ok) as (good, bad):
        with good:
            with b.if_then(b.icmp_signed(">", ext, zero)):
                data, fn, store_step = _step_function(gen, s, uses)
                gen.loop_values(zero, ext, step, name=s.var.name)
            if pp:
                with b.if_then(b.icmp_signed("<", ext, one)):
                    gen.stmt(_copy_nest([(s.inits[k], s.results[k]) for k in pp]))
        with bad:
            b.atomic_rmw("or", ctx.status, ir.Constant(T.I32, 1), "monotonic")
    for t in failed_temps:       # free(NULL) does nothing
        b.call(gen._libc_free(), [t])
