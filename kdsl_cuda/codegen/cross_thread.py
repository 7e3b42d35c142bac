"""``CrossThreadReduce`` -> warp shuffles plus shared memory across warps.

The statement's meaning (kdsl.ir.nodes): every thread of the block reaches it (the verifier
forbids it under divergence or in a thread loop shorter than the block), the threads that
share their indices along the tags *not* reduced form a group, and every member of a group
gets the combiner over the group's values in its ``results``.  The fold order is free (the
combiners are associative and commutative), but every member must get the *same* bits, since
any of them may store or reuse the result.

With ``G`` the product of the block's extents along the reduced tags (a group's size):

- ``G == 1``: nothing to combine.
- The groups are contiguous runs of ``G`` linear thread ids when every tag below a reduced one
  (x < y < z) of extent > 1 is reduced too (a row per block, ``x`` or ``x, y`` reduced):
  - ``G`` a power of two <= 32: an xor butterfly inside the group's lanes (mask: the group's
    lanes only, so several groups per warp and a partial last warp are fine): every lane ends
    with the same value.
  - otherwise each warp first reduces the piece of the group it holds (a shuffle-down tree over
    the segment, lanes past the segment's end skipped), the segment's first lane publishes it
    in shared memory, and after a barrier the group's segment totals are combined: by an xor
    butterfly over one warp's lanes when ``G`` is a multiple of 32 (every warp computes the
    same value from the same shared data), else by every thread in segment order.  A second
    barrier lets the scratch be reused.
- Otherwise (e.g. only ``y`` reduced in a (32, 8) block: the group is strided across warps)
  every thread publishes its value and, after a barrier, folds its group's values from shared
  memory in thread order (x fastest); a second barrier frees the scratch.

A *scan* (``CrossThreadReduce.scan``, issue 25) gives each thread the combine of its group's
members up to itself (``scan``): groups of contiguous thread ids whose size ``G`` divides 32
or is a multiple of it scan each warp's piece by a shuffle-up ladder (log2 steps, earlier
values on the left), then (``G > 32``) the warps' last lanes publish their totals in shared
memory and, after a barrier, each thread folds the totals of the warps before its own in its
group; a second barrier frees the scratch.  Other groups publish every value and fold the
members up to themselves from shared memory.

Multi-value combiners (argmax: index and value) shuffle every value and apply the combiner's
``result`` expressions to them together.
"""
from __future__ import annotations

import math
import re

from kdsl.ir import nodes as n

from .types import ctype, store

_AXIS = {n.ThreadTag.THREAD_X: 0, n.ThreadTag.THREAD_Y: 1, n.ThreadTag.THREAD_Z: 2}
WARP = 32


_IDENT = re.compile(r"[A-Za-z_]\w*")


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def contiguous(axes: set, block: tuple) -> bool:
    """Whether the groups over ``axes`` are runs of consecutive linear thread ids."""
    return all(a in axes for r in axes for a in range(r) if block[a] > 1)


class CrossThreadEmitter:
    """Emits one ``CrossThreadReduce`` through the kernel printer ``p`` (its ``emit``,
    ``names``, ``expr``, ``shared_decls``, ``block``, ``nthreads``, ``bind``)."""

    def __init__(self, p, s: n.CrossThreadReduce, k: int):
        self.p, self.s, self.k = p, s, k
        self.comb = s.combiner
        self.types = [ctype(r.dtype) for r in s.results]
        self.axes = {_AXIS[t] for t in s.threads}
        self.G = math.prod(p.block[a] for a in self.axes)
        self.N = p.nthreads

    # ------------------------------------------------------------- helpers
    def fresh(self, hint):
        return self.p.names.fresh(f"{hint}{self.k}")

    def combine(self, d: int, accs: list, others: list) -> None:
        """``accs = combiner(accs, others)``: the combiner's Vars printed as the C variables
        they stand for (no copies: a shuffle ladder is a dozen of these); through fresh
        temporaries where it has several results (each reads every old value: argmax)."""
        p, comb = self.p, self.comb
        held = []
        for x, t in zip(others, self.types):   # a shared element: read once, as before
            if not _IDENT.fullmatch(x):
                y = self.fresh("kd_y")
                p.emit(d, f"const {t} {y} = {x};")
                x = y
            held.append(x)
        pairs = list(zip(comb.lhs, accs)) + list(zip(comb.rhs, held))
        saved = [p.names.alias(v, c) for v, c in pairs]
        try:
            for v, _ in pairs:
                p.bind(v)
            texts = [p.expr(r) for r in comb.result]
        finally:
            for (v, _), old in zip(pairs, saved):
                p.unbind(v)
                p.names.restore(v, old)
        if len(accs) == 1:
            p.emit(d, f"{accs[0]} = {texts[0]};")
            return
        news = [self.fresh("kd_new") for _ in accs]
        for nv, text, t in zip(news, texts, self.types):
            p.emit(d, f"const {t} {nv} = {text};")
        for a, nv in zip(accs, news):
            p.emit(d, f"{a} = {nv};")

    def scratch(self, size: int) -> list:
        names = []
        for j, t in enumerate(self.types):
            name = self.p.names.fresh(f"kd_red{self.k}_{j}")
            self.p.shared_decls.append(f"__shared__ __align__(16) {t} {name}[{max(size, 1)}];")
            names.append(name)
        return names

    def shuffle(self, d: int, kind: str, mask: str, vals: list, off) -> list:
        outs = [self.fresh("kd_o") for _ in vals]
        for o, v, t in zip(outs, vals, self.types):
            self.p.emit(d, f"const {t} {o} = kd_shfl_{kind}({mask}, {v}, {off});")
        return outs

    def identities(self, d: int) -> list:
        accs = [self.fresh("kd_acc") for _ in self.types]
        for a, t, i in zip(accs, self.types, self.comb.identity):
            self.p.emit(d, f"{t} {a} = {self.p.expr(i)};")
        return accs

    # ------------------------------------------------------------- the statement
    def emit(self, d: int) -> None:
        p, s = self.p, self.s
        p.emit(d, "{")
        d1 = d + 1
        vals = [self.fresh("kd_v") for _ in self.types]
        for v, t, e in zip(vals, self.types, s.values):
            p.emit(d1, f"{t} {v} = {p.expr(e)};")
        if self.G > 1 and s.scan:
            self.scan(d1, vals)
        elif self.G > 1:
            if not contiguous(self.axes, p.block):
                self.strided(d1, vals)
            elif _pow2(self.G) and self.G <= WARP:
                self.butterfly(d1, vals)
            else:
                self.segmented(d1, vals)
        for r, v in zip(s.results, vals):
            p.emit(d1, f"{p.buf(r)}[0] = {store(r.dtype, v)};")
        p.emit(d, "}")

    def butterfly(self, d: int, vals: list, G: int | None = None, mask: str | None = None) -> None:
        """xor butterfly over aligned groups of ``G`` (a power of two <= 32) lanes."""
        G = G or self.G
        if mask is None:
            mask = self.fresh("kd_mask")
            m = "0xffffffffu" if G == WARP else f"({hex((1 << G) - 1)}u << (kd_tid & {WARP - G}))"
            self.p.emit(d, f"const unsigned {mask} = {m};")
        off = G // 2
        while off >= 1:
            outs = self.shuffle(d, "xor", mask, vals, off)
            self.combine(d, vals, outs)
            off //= 2

    def segmented(self, d: int, vals: list) -> None:
        """Contiguous groups of any size: per-warp segment trees, then shared memory."""
        p, G, N = self.p, self.G, self.N
        whole = G % WARP == 0                   # groups are whole warps (then N % 32 == 0 too)
        lane, gb = self.fresh("kd_lane"), self.fresh("kd_gb")
        p.emit(d, f"const int {lane} = kd_tid & {WARP - 1};")
        p.emit(d, f"const int {gb} = (kd_tid / {G}) * {G};")
        if whole:
            mask, lo, hi = self.fresh("kd_mask"), "0", None
            p.emit(d, f"const unsigned {mask} = 0xffffffffu;")
            span = WARP
        else:
            wb, lo, hi, mask = (self.fresh(h) for h in ("kd_wb", "kd_lo", "kd_hi", "kd_mask"))
            p.emit(d, f"const int {wb} = kd_tid & ~{WARP - 1};")
            p.emit(d, f"const int {lo} = ({gb} > {wb} ? {gb} : {wb}) - {wb};")
            p.emit(d, f"const int {hi} = min(min({gb} + {G}, {wb} + {WARP}), {N}) - {wb};")
            p.emit(d, f"const unsigned {mask} = ({hi} - {lo} == {WARP}) ? 0xffffffffu : "
                      f"(((1u << ({hi} - {lo})) - 1u) << {lo});")
            span = min(_next_pow2(G), WARP)
        off = span // 2
        while off >= 1:
            outs = self.shuffle(d, "down", mask, vals, off)
            if hi is None:
                self.combine(d, vals, outs)
            else:
                p.emit(d, f"if ({lane} + {off} < {hi}) {{")
                self.combine(d + 1, vals, outs)
                p.emit(d, "}")
            off //= 2
        # segment totals (in each segment's first lane) through shared memory
        if whole:
            nw = G // WARP
            scr = self.scratch(N // WARP)
            p.emit(d, f"if ({lane} == 0) {{")
            for sc, v in zip(scr, vals):
                p.emit(d + 1, f"{sc}[kd_tid >> 5] = {v};")
            p.emit(d, "}")
            p.emit(d, "__syncthreads();")
            ident = [p.expr(i) for i in self.comb.identity]
            wide = _next_pow2(nw)
            # every aligned run of `wide` lanes loads the group's warp totals: all lanes agree
            sub = lane if wide == WARP else f"({lane} & {wide - 1})"
            for sc, v, i in zip(scr, vals, ident):
                src = f"{sc}[({gb} >> 5) + {sub}]"
                p.emit(d, f"{v} = {src if nw == wide else f'({sub} < {nw}) ? {src} : {i}'};")
            if wide > 1:
                m2 = self.fresh("kd_mask")
                p.emit(d, f"const unsigned {m2} = 0xffffffffu;")
                self.butterfly(d, vals, wide, m2)
        else:
            scr = self.scratch(N)
            p.emit(d, f"if ({lane} == {lo}) {{")
            for sc, v in zip(scr, vals):
                p.emit(d + 1, f"{sc}[kd_tid] = {v};")
            p.emit(d, "}")
            p.emit(d, "__syncthreads();")
            accs = self.identities(d)
            seg = self.fresh("kd_seg")
            p.emit(d, f"for (int {seg} = {gb}; {seg} < {gb} + {G}; {seg} = ({seg} | {WARP - 1}) + 1) {{")
            self.combine(d + 1, accs, [f"{sc}[{seg}]" for sc in scr])
            p.emit(d, "}")
            for v, a in zip(vals, accs):
                p.emit(d, f"{v} = {a};")
        p.emit(d, "__syncthreads();   // the scratch may be reused")

    def strided(self, d: int, vals: list) -> None:
        """Groups strided across warps: publish, barrier, every thread folds its group."""
        p, block = self.p, self.p.block
        scr = self.scratch(self.N)
        for sc, v in zip(scr, vals):
            p.emit(d, f"{sc}[kd_tid] = {v};")
        p.emit(d, "__syncthreads();")
        accs = self.identities(d)
        coords, depth = [], d
        for axis in (2, 1, 0):                   # z outermost: x fastest, the SIMT order
            if axis in self.axes:
                r = self.fresh(f"kd_r{'xyz'[axis]}")
                p.emit(depth, f"for (int {r} = 0; {r} < {block[axis]}; ++{r}) {{")
                depth += 1
                coords.append(r)
            else:
                coords.append(f"(int)threadIdx.{'xyz'[axis]}")
        z, y, x = coords
        self.combine(depth, accs, [f"{sc}[{x} + {block[0]} * ({y} + {block[1]} * {z})]" for sc in scr])
        while depth > d:
            depth -= 1
            p.emit(depth, "}")
        for v, a in zip(vals, accs):
            p.emit(d, f"{v} = {a};")
        p.emit(d, "__syncthreads();   // the scratch may be reused")

    # ------------------------------------------------------------- scans (issue 25)
    def prepend(self, d: int, earlier: list, vals: list) -> None:
        """``vals = combiner(earlier, vals)``: the earlier values on the left."""
        tmp = [self.fresh("kd_pre") for _ in vals]
        for t, e, ty in zip(tmp, earlier, self.types):
            self.p.emit(d, f"{ty} {t} = {e};")
        self.combine(d, tmp, vals)
        for v, t in zip(vals, tmp):
            self.p.emit(d, f"{v} = {t};")

    def scan(self, d: int, vals: list) -> None:
        """An inclusive scan over each group (module docstring)."""
        p, G, N = self.p, self.G, self.N
        if not contiguous(self.axes, p.block) or not (G % WARP == 0 or WARP % G == 0):
            self.scan_shared(d, vals)
            return
        span = min(G, WARP)
        lane, mask = self.fresh("kd_lane"), self.fresh("kd_mask")
        p.emit(d, f"const int {lane} = kd_tid & {WARP - 1};")
        if N % WARP == 0:
            p.emit(d, f"const unsigned {mask} = 0xffffffffu;")
        else:                   # the block's last warp is partial: its present lanes only
            p.emit(d, f"const unsigned {mask} = ({N} - (kd_tid & ~{WARP - 1}) >= {WARP}) ? 0xffffffffu : "
                      f"((1u << ({N} - (kd_tid & ~{WARP - 1}))) - 1u);")
        off = 1
        while off < span:
            outs = self.shuffle(d, "up", mask, vals, off)
            p.emit(d, f"if (({lane} & {span - 1}) >= {off}) {{")
            self.prepend(d + 1, outs, vals)
            p.emit(d, "}")
            off *= 2
        if G <= WARP:
            return
        scr = self.scratch(N // WARP)
        p.emit(d, f"if ({lane} == {WARP - 1}) {{")
        for sc, v in zip(scr, vals):
            p.emit(d + 1, f"{sc}[kd_tid >> 5] = {v};")
        p.emit(d, "}")
        p.emit(d, "__syncthreads();")
        w, w0, q = self.fresh("kd_w"), self.fresh("kd_w0"), self.fresh("kd_q")
        p.emit(d, f"const int {w} = kd_tid >> 5;")
        p.emit(d, f"const int {w0} = (kd_tid / {G}) * {G // WARP};")
        p.emit(d, f"if ({w} > {w0}) {{")
        pre = [self.fresh("kd_pre") for _ in vals]
        for t, sc, ty in zip(pre, scr, self.types):
            p.emit(d + 1, f"{ty} {t} = {sc}[{w0}];")
        p.emit(d + 1, f"for (int {q} = {w0} + 1; {q} < {w}; ++{q}) {{")
        self.combine(d + 2, pre, [f"{sc}[{q}]" for sc in scr])
        p.emit(d + 1, "}")
        self.prepend(d + 1, pre, vals)
        p.emit(d, "}")
        p.emit(d, "__syncthreads();   // the scratch may be reused")

    def scan_shared(self, d: int, vals: list) -> None:
        """Any groups: publish, barrier, every thread folds its group's members up to itself
        (x fastest), then a barrier frees the scratch."""
        p, block = self.p, self.p.block
        scr = self.scratch(self.N)
        for sc, v in zip(scr, vals):
            p.emit(d, f"{sc}[kd_tid] = {v};")
        p.emit(d, "__syncthreads();")
        accs = self.identities(d)
        coords, depth, lin, own = [], d, "0", "0"
        for axis in (2, 1, 0):
            if axis in self.axes:
                r = self.fresh(f"kd_r{'xyz'[axis]}")
                p.emit(depth, f"for (int {r} = 0; {r} < {block[axis]}; ++{r}) {{")
                depth += 1
                coords.append(r)
                lin = f"({lin} * {block[axis]} + {r})"
                own = f"({own} * {block[axis]} + (int)threadIdx.{'xyz'[axis]})"
            else:
                coords.append(f"(int)threadIdx.{'xyz'[axis]}")
        z, y, x = coords
        p.emit(depth, f"if ({lin} <= {own}) {{")
        self.combine(depth + 1, accs, [f"{sc}[{x} + {block[0]} * ({y} + {block[1]} * {z})]" for sc in scr])
        p.emit(depth, "}")
        while depth > d:
            depth -= 1
            p.emit(depth, "}")
        for v, a in zip(vals, accs):
            p.emit(d, f"{v} = {a};")
        p.emit(d, "__syncthreads();   // the scratch may be reused")
