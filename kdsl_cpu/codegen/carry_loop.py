"""``CarryLoop`` (a ``kd.fori_loop`` run inside one kernel) -> LLVM: a sequential step loop.

The steps run one after the other in the calling thread; each step's stages are the
body's own loops (its PARALLEL loops are outlined and run on the thread pool as anywhere
else: the launcher returns when every chunk is done, which is the barrier between one
stage and the next, and so between steps).  The carries ping-pong between two buffers
per carry, the result parameter and one temporary, chosen by parity so that the last
step writes the result: step ``s`` of ``E`` writes the result when ``E - 1 - s`` is even,
else the temporary, and reads what step ``s - 1`` wrote (the initial carry at ``s = 0``).
No carry is copied between steps; one temporary per carry is malloc'ed per call (when
two or more steps run).  ``E <= 0`` copies the initial carries into the results.

The carry buffers get no alias scopes (kdsl_cpu/codegen/alias.py): scopes hold for the
whole function, and one step's ``nxt`` is the next step's ``cur``, so "cur and nxt never
alias" would let LLVM move a step's loads above the previous step's stores.
"""
from __future__ import annotations

from llvmlite import ir

from kdsl.ir import make as mk
from kdsl.ir import nodes as n

from . import types as T


def _bytes(gen, buf: n.Buffer):
    """The size of compact ``buf`` in bytes (at least 1: malloc(0) may return NULL)."""
    b = gen.fn.b
    size = ir.Constant(T.I64, buf.dtype.itemsize)
    zero = ir.Constant(T.I64, 0)
    for x in buf.shape:
        v = gen.expr(x)
        size = b.mul(size, b.select(b.icmp_signed(">", v, zero), v, zero))
    return b.select(b.icmp_signed(">", size, zero), size, ir.Constant(T.I64, 1))


def _copy_nest(s: n.CarryLoop) -> n.Stmt:
    """``results[k][...] = inits[k][...]`` for every carry (zero steps)."""
    stmts = []
    for src, dst in zip(s.inits, s.results):
        idx = [n.Var(mk.as_expr(0).dtype, f"c{d}") for d in range(len(src.shape))]
        body = n.Store(dst, tuple(idx), n.Load(src.dtype, src, tuple(idx)))
        for v, e in reversed(list(zip(idx, src.shape))):
            body = n.For(v, mk.as_expr(0), e, n.ForKind.SERIAL, body)
        stmts.append(body)
    return n.Seq(tuple(stmts))


def emit(gen, s: n.CarryLoop) -> None:
    """Generate ``s`` into ``gen``'s current function (kdsl_cpu.codegen.stmt.StmtGen)."""
    ctx = gen.fn
    b = ctx.b
    one, zero = ir.Constant(T.I64, 1), ir.Constant(T.I64, 0)
    null = ir.Constant(T.PTR, None)
    lo, ext = gen.expr(s.min), gen.expr(s.extent)
    # one temporary per carry, when two or more steps run
    sizes = [_bytes(gen, c) for c in s.cur]
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
    failed = None
    for p in temps:
        bad = b.and_(many, b.icmp_unsigned("==", p, null))
        failed = bad if failed is None else b.or_(failed, bad)
    inits = [ctx.bufs[x] for x in s.inits]
    results = [ctx.bufs[x] for x in s.results]

    def step(k):
        # k: the step's number from 0; it writes the result when ext - 1 - k is even
        even = b.icmp_signed("==", b.and_(b.sub(b.sub(ext, one), k), one), zero)
        prev_even = b.icmp_signed("==", b.and_(b.sub(ext, k), one), zero)
        first = b.icmp_signed("==", k, zero)
        for c, x, r, t, init in zip(s.cur, s.nxt, results, temps, inits):
            ctx.bufs[x] = b.select(even, r, t)
            ctx.bufs[c] = b.select(first, init, b.select(prev_even, r, t))
        ctx.env[s.var] = b.add(lo, k)
        gen.stmt(s.body)
        del ctx.env[s.var]
        for c, x in zip(s.cur, s.nxt):
            del ctx.bufs[c], ctx.bufs[x]

    ok = b.not_(failed) if failed is not None else ir.Constant(ir.IntType(1), 1)
    with b.if_else(ok) as (good, bad):
        with good:
            gen.loop_values(zero, ext, step, name=s.var.name)
            with b.if_then(b.icmp_signed("<", ext, one)):
                gen.stmt(_copy_nest(s))
        with bad:
            b.atomic_rmw("or", ctx.status, ir.Constant(T.I32, 1), "monotonic")
    for t in temps:       # free(NULL) does nothing
        b.call(gen._libc_free(), [t])
