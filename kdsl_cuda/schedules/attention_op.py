"""The flash-attention block intrinsic (``FlashOp``) of kdsl_cuda/schedules/attention.py: its
IR form (``build``: a thread loop around one ``n.Intrinsic`` in the query-block loop), its SIMT
form (``simt``: the block's rows in numpy, tile by tile as the CUDA kernel runs them) and its
CUDA form (``cuda``: a call of kdsl_cuda/codegen/flash.py's block function, one per head-dim
size the size class allows).  The row value and the output value are the stages' own
expressions, loop invariants hoisted into ``let``s and passed to the block function."""
from __future__ import annotations

import numpy as np

from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import simplify
from kdsl.ir.visitor import Mutator, collect, substitute, uses_var
from kdsl.schedule.intrin import BlockIntrinsic

#: query rows, keys per streamed tile and warps of the block function, by (padded) head
#: dimension (H100/H200).  A CTA runs the rows of the first (exact-size) function; a
#: covering function of fewer rows runs as many times as that takes.  Two 16-row m-tiles a
#: warp (each K/V fragment feeds two products: one is bound by shared-memory bandwidth), the
#: widest key tile that fits the registers without spilling (ptxas, sm_90: ~255 registers).
#: Measured on an H200 (.devrun/flash/results1, B*H = 32, N 1024..16384, 17 candidates):
#: d=64 128x96x4 1.01-1.09x SDPA (flash), 128x64x4 0.94-1.03x; d=128 128x48x4 0.90-1.05x,
#: 128x32x4 0.93-0.96x, 64x64x4 (the last session's) 0.81-0.94x
TILES = {16: (64, 16, 4), 32: (64, 32, 4), 64: (128, 96, 4), 128: (128, 48, 4),
         256: (64, 32, 4)}
#: the tiles when 128-row blocks would leave SMs idle (``tiles``): half the rows, as many
#: m-tiles a warp (two warps)
FEW_ROWS = {64: (64, 64, 2), 128: (64, 32, 2)}
#: fewer CTAs than this (batch x heads x query blocks, at the sizes' lower bounds) take
#: FEW_ROWS: an H100/H200 has 132 SMs
FEW_CTAS = 132
#: the tiles of a wider function that covers the rest of a size class (d = 65..127 on the
#: 128-wide one): less code (NVRTC time), padded sizes are the rare ones
COVER = (64, 32, 4)


def tiles(d: int, rows: int | None, blocks: int | None) -> tuple:
    """(bm, bn, warps) of the exact-size function for head dim ``d``: ``TILES[d]``, or
    ``FEW_ROWS[d]`` when ``blocks`` (batch x heads) times the query blocks of ``rows`` (lower
    bounds; None: unknown) is under ``FEW_CTAS`` -- half the rows a CTA, twice the CTAs."""
    t = TILES[d]
    if d in FEW_ROWS and rows is not None and blocks is not None \
            and blocks * -(-rows // t[0]) < FEW_CTAS:
        return FEW_ROWS[d]
    return t


class _ReplaceReads(Mutator):
    def __init__(self, repl: dict):
        super().__init__()
        self.repl = repl

    def visit_TensorRead(self, r):
        return self.repl.get(r, r)


def _cond_bound(cond, i, j):
    """``c`` with ``cond`` equivalent to ``j < i + c`` (``i >= j + k``: c = 1 - k, ``>``:
    -k; written either way round), else None."""
    if not isinstance(cond, n.Compare):
        return None
    flip = {n.CmpOp.LE: n.CmpOp.GE, n.CmpOp.LT: n.CmpOp.GT}
    op, a, b = (flip[cond.op], cond.b, cond.a) if cond.op in flip else (cond.op, cond.a, cond.b)
    if op not in (n.CmpOp.GE, n.CmpOp.GT) or a is not i:
        return None
    off = simplify(mk.sub(b, j))
    if uses_var(off, j) or uses_var(off, i):
        return None
    c = mk.sub(mk.as_expr(1 if op is n.CmpOp.GE else 0), off)
    return simplify(c)


def _same(a, b) -> bool:
    if a is None or b is None:
        return False
    a, b = simplify(mk.cast(a, dt.int64)), simplify(mk.cast(b, dt.int64))
    if mk.is_const(a) and mk.is_const(b):
        return a.value == b.value
    return a == b


# ----------------------------------------------------------------------- the op


def _hoist(e, keep: set, consts: list):
    """``e`` with every maximal subtree that uses none of ``keep`` (and is not a constant)
    replaced by a Var appended to ``consts`` as (Var, subtree)."""
    if isinstance(e, n.Const):
        return e
    if not any(uses_var(e, v) for v in keep):
        for v, x in consts:
            if x == e:
                return v
        c = n.var(f"c{len(consts)}", e.dtype)
        consts.append((c, e))
        return c
    if isinstance(e, (n.Var,)):
        return e
    return _Rebuild(keep, consts).visit_children(e)


class _Rebuild(Mutator):
    def __init__(self, keep, consts):
        super().__init__()
        self.keep, self.consts = keep, consts

    def visit_children(self, e):
        return self.generic(e)

    def visit(self, node):
        if isinstance(node, n.Expr):
            return _hoist(node, self.keep, self.consts)
        return super().visit(node)


class FlashOp(BlockIntrinsic):
    """The flash-attention block (see the module docstring): built per schedule from a Match."""

    def __init__(self, m, hd, tiles, by):
        self.m, self.tile, self.by = m, tuple(tiles), by
        self.bm = self.tile[0]
        self.dims = hd
        self.causal = m.causal_end is not None
        self.bf16 = m.q.dtype is dt.bfloat16
        self.acc, self.i, self.j = (n.var("acc", dt.float32), n.var("i", dt.int64),
                                    n.var("j", dt.int64))
        ov = [a.var for a in m.O.axes]
        sread = collect(m.x, lambda e: isinstance(e, n.TensorRead))[0]
        x = _ReplaceReads({sread: self.acc}).visit(m.x)
        x = substitute(x, {ov[m.nb]: self.i, m.j: self.j})
        consts = []
        self.score = _hoist(x, {self.acc, self.i, self.j}, consts)
        self.final = _hoist(m.final, {m.o, m.l, m.m}, consts)
        self.consts = consts
        self.factor = self._pair_factor(m)
        self.name = "kd_flash"     # one chain per graph (find): no clash in a module

    def __str__(self) -> str:
        return "flash_attention"

    def __repr__(self) -> str:
        return f"FlashOp(rows={self.bm}, head_dims={self.dims}, causal={self.causal})"

    def _pair_factor(self, m):
        """The factor ``c`` when the row value is ``float32(T(acc) * c)`` (T the inputs'
        16-bit type), under a causal ``where`` exactly the kernel's key bound (which masks
        the same keys): the kernel (and the SIMT form) then computes it as FlashAttention-2
        does, ``acc * c`` in float32 folded into the exponent's FFMA, without numpy's 16-bit
        rounding of the product (closer to the exact result); else None."""
        e = self.score
        if isinstance(e, n.Cast) and e.dtype is dt.float32:
            e = e.a
        if isinstance(e, n.Select):
            if not (self.causal and mk.is_const(e.f) and e.f.value == float("-inf")
                    and _same(_cond_bound(e.cond, self.i, self.j), m.causal_end)):
                return None
            e = e.t
        t = m.q.dtype
        if not (isinstance(e, n.Binary) and e.op is n.BinOp.MUL and e.dtype is t):
            return None
        for a, c in ((e.a, e.b), (e.b, e.a)):
            if isinstance(a, n.Cast) and a.dtype is t and a.a is self.acc and c.dtype is t:
                if isinstance(c, n.Var) and any(c is v for v, _ in self.consts):
                    return c
                if isinstance(c, n.Const):
                    return c
        return None

    # --------------------------------------------------------------- IR
    def _buffer(self, func, t):
        for b in func.buffers:
            if b.name == t.name:
                return b
        from kdsl.errors import InternalCompilerError
        raise InternalCompilerError(f"flash attention: no buffer for {t.name}")

    def _strides(self, b, t):
        """(batch, head, row, column) strides of ``b`` (tensor ``t``; elements), Exprs; 0 for
        missing and broadcast batch axes."""
        nb = self.m.nb
        if b.strides is not None:
            st = list(b.strides)
        else:
            st, acc = [], mk.as_expr(1)
            for e in reversed(b.shape):
                st.insert(0, acc)
                acc = mk.mul(acc, e)
        lead = st[:-2]
        shared = self.m.shared.get(id(t), (False,) * nb)
        lead = [mk.as_expr(0) if sh else x for x, sh in zip(lead, shared)]
        lead = [mk.as_expr(0)] * (2 - len(lead)) + lead
        return lead + st[-2:]

    def build(self, loop, func):
        m = self.m
        Q, K, V, O = (self._buffer(func, t) for t in (m.q, m.k, m.v, m.F.output))
        fa = m.F.axes
        heads = fa[m.nb - 1].dom.extent if m.nb >= 1 else mk.as_expr(1)
        if m.nb == 1:       # one batch axis: it is the "head", batch stride 0
            heads = fa[0].dom.extent
        by = mk.as_expr(0)      # batch x head, flat: b * heads + h
        for ax in self.by:
            by = mk.add(mk.mul(by, ax.dom.extent), ax.var) if by is not None else ax.var
        nq = fa[m.nb].dom.extent
        d = m.S.reduce_axes[0].dom.extent
        dv = fa[-1].dom.extent
        ce = m.causal_end if self.causal else mk.as_expr(0)
        strides = [s for b, t in zip((Q, K, V, O), (m.q, m.k, m.v, m.F.output))
                   for s in self._strides(b, t)]
        nwords = max(self._cfg(p).smem_bytes for p in self.dims) // 2
        smem = n.Buffer(f"{self.name}_smem", dt.float16, (mk.as_expr(nwords),), scope=n.Scope.SHARED)
        args = (self, smem, Q, K, V, O, loop.var, by, heads, nq, m.keys, d, dv,
                mk.cast(ce, dt.int64), *strides, *(c for c, _ in self.consts))
        threads = max(self._cfg(p).threads for p in self.dims)
        tx = n.var(f"{self.name}_tx", dt.int64)
        body = n.For(tx, mk.as_expr(0), mk.as_expr(threads), n.ForKind.BOUND,
                     n.Intrinsic("flash_attention", args), n.ThreadTag.THREAD_X)
        body = n.Allocate(smem, body)
        for c, e in reversed(self.consts):
            body = n.LetStmt(c, e, body)
        return body

    def _cfg(self, p):
        from kdsl_cuda.codegen.flash import FlashConfig
        # (bm, bn, warps[, stages]); a covering function runs with the CTA's warps (every
        # thread of the block calls it: its barriers), rows a multiple of theirs
        nw = self.tile[2]
        t = self.tile if p == self.dims[0] else (max(COVER[0], 16 * nw), COVER[1], nw)
        return FlashConfig(p, p, bf16=self.bf16, bm=t[0], bn=t[1], nw=t[2], causal=self.causal,
                           stages=t[3] if len(t) > 3 else 2)

    # --------------------------------------------------------------- SIMT
    def simt(self, ex, s) -> None:
        """The block's rows in numpy, tile by tile as the CUDA kernel runs them."""
        from kdsl.numerics.numpy_eval import round_bf16
        (_, _, Q, K, V, O, bx, by, heads, nq, nk, d, dv, ce, *rest) = s.args
        g = lambda e: ex._uniform(e, "a flash attention argument")   # noqa: E731
        bx, by, heads, nq, nk, ce = (g(e) for e in (bx, by, heads, nq, nk, ce))
        lead = (by // heads, by % heads) if self.m.nb == 2 else (by,) if self.m.nb == 1 else ()
        def at(t):
            sh = self.m.shared.get(id(t), (False,) * len(lead))
            return tuple(0 if b else x for x, b in zip(lead, sh))
        q = np.asarray(ex.mem[Q].data[lead], np.float32)
        k = np.asarray(ex.mem[K].data[at(self.m.k)], np.float32)
        v = np.asarray(ex.mem[V].data[at(self.m.v)], np.float32)
        out = ex.mem[O].data[lead]
        rows = np.arange(bx * self.bm, min(bx * self.bm + self.bm, nq))
        if rows.size == 0:
            return
        kend = nk if not self.causal else min(nk, int(rows[-1]) + ce)
        keys = np.arange(max(kend, 0))
        acc = q[rows] @ k[keys].T if keys.size else np.zeros((rows.size, 0), np.float32)
        env = ex.env
        saved = {c: env.get(c) for c, _ in self.consts}
        env.update({self.acc: acc.astype(np.float32), self.i: rows[:, None].astype(np.int64),
                    self.j: keys[None, :].astype(np.int64)})
        if self.factor is not None:     # as the kernel: the float32 product times the factor
            f = np.float32(ex.ev(mk.cast(self.factor, dt.float32)))
            x = (acc * f).astype(np.float32)
        else:
            x = np.broadcast_to(np.asarray(ex.ev(self.score), np.float32), acc.shape).copy()
        if self.causal:
            x[keys[None, :] >= rows[:, None] + ce] = -np.inf
        rnd = round_bf16 if self.bf16 else (lambda a: a.astype(np.float16).astype(np.float32))
        mx = np.full(rows.size, -np.inf, np.float32)      # the running max
        ref = mx.copy()         # the exponents' reference: raised past the max by > 2^8 only
        ls = np.zeros(rows.size, np.float32)
        o = np.zeros((rows.size, v.shape[-1]), np.float32)
        bn = self._cfg(self.dims[0]).bn
        with np.errstate(invalid="ignore", over="ignore"):
            for n0 in range(0, keys.size, bn):
                xs = x[:, n0:n0 + bn]
                mx = np.maximum(mx, xs.max(axis=1))
                up = (mx - ref) * np.float32(np.log2(np.e)) > 8
                new = np.where(up, mx, ref)
                alpha = np.where(up, np.exp(ref - new), np.float32(1)).astype(np.float32)
                p = np.where((new == -np.inf)[:, None], np.float32(0),
                             np.exp(xs - new[:, None])).astype(np.float32)
                ls = ls * alpha + p.sum(axis=1, dtype=np.float32)
                o = o * alpha[:, None] + rnd(p) @ v[n0:n0 + xs.shape[1]]
                ref = new
            f = np.where(ref == mx, np.float32(1), np.exp(ref - mx)).astype(np.float32)
            ls, o = ls * f, o * f[:, None]
            env.update({self.m.o: o, self.m.l: ls[:, None], self.m.m: mx[:, None]})
            res = np.broadcast_to(np.asarray(ex.ev(self.final)), o.shape)
        out[rows] = res
        for c in (self.acc, self.i, self.j, self.m.o, self.m.l, self.m.m):
            env.pop(c, None)
        for c, val in saved.items():
            if val is not None:
                env[c] = val

    # --------------------------------------------------------------- CUDA
    def _factor_text(self, pr):
        if self.factor is None:
            return None
        return pr(mk.cast(self.factor, dt.float32))

    def cuda(self, kp, s, d) -> None:
        """Print the call of the block function (and add it to the module's helpers)."""
        from kdsl_cuda.codegen import flash
        from kdsl_cuda.codegen.expr import ExprPrinter
        names = {self.acc: "acc", self.i: "i", self.j: "j", self.m.o: "o", self.m.l: "l",
                 self.m.m: "m"}
        names.update({c: f"c{k}" for k, (c, _) in enumerate(self.consts)})

        def var_name(v, narrow=False):
            return names[v]

        def no_load(e):
            raise AssertionError("flash attention expressions read no memory")

        pr = ExprPrinter(var_name, no_load)
        # 16-bit values print as rounded floats: the stored bits are their conversion
        score = pr(self.score)
        final = f"{'kd_f2bf' if self.bf16 else 'kd_f2h'}({pr(self.final)})"
        from kdsl_cuda.codegen.types import ctype
        consts = [(ctype(c.dtype), f"c{k}") for k, (c, _) in enumerate(self.consts)]
        kp.helpers.setdefault("kd_flash_common", flash.COMMON)
        (_, smem, Q, K, V, O, bx, by, heads, nq, nk, dd, dv, ce, *rest) = s.args
        strides, cargs = rest[:16], rest[16:]
        vals = [kp.expr(e) for e in (bx, by, heads, nq, nk, dd, dv, ce)]
        if self.causal:     # the longest rows (most keys) first: no tail of heavy blocks
            vals[0] = f"(((int)gridDim.x - 1) - {vals[0]})"
        args = ", ".join([kp._buf(b) for b in (Q, K, V, O)] + [f"(uint16_t*){kp._buf(smem)}"]
                         + ["@BX@"] + vals[1:3] + ["1"] + vals[3:] + [kp.expr(e) for e in strides]
                         + [kp.expr(c) for c in cargs])
        first = True
        for p in self.dims:
            cfg = self._cfg(p)
            fname = f"{self.name}_{p}"
            kp.helpers.setdefault(fname, flash.block_function(
                cfg, fname, score, final, consts, factor=self._factor_text(pr)))
            cond = f"{vals[5]} <= {p} && {vals[6]} <= {p}"
            kp.emit(d, f"{'' if first else 'else '}if ({cond}) {{")
            rep = self.bm // cfg.bm      # a CTA's rows in calls of cfg.bm rows
            if rep * cfg.bm != self.bm:
                from kdsl.errors import InternalCompilerError
                raise InternalCompilerError(f"flash attention: {cfg.bm}-row function in "
                                            f"{self.bm}-row blocks")
            if rep == 1:
                kp.emit(d + 1, f"{fname}_block({args.replace('@BX@', vals[0])});")
            else:       # one call site in a loop: the function is inlined once
                call = args.replace("@BX@", f"({vals[0]}) * {rep} + kd_fl_r")
                kp.emit(d + 1, f"for (int kd_fl_r = 0; kd_fl_r < {rep}; ++kd_fl_r) {{")
                kp.emit(d + 2, f"{fname}_block({call});")
                kp.emit(d + 2, "__syncthreads();")
                kp.emit(d + 1, "}")
            kp.emit(d, "}")
            first = False


__all__ = ["COVER", "FEW_CTAS", "FEW_ROWS", "FlashOp", "TILES", "tiles"]
