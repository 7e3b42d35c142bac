"""Tensor-core code for the warp statements ``WmmaFill``/``WmmaLoad``/``WmmaMma``/``WmmaStore``
(``kdsl.ir.nodes``), as inline PTX: no ``<mma.h>`` (the pip wheels' headers lack ``crt/mma.h``).

Instruction family: ``mma.sync.aligned.m16n8k16.row.col`` fed by ``ldmatrix``, not PTX
``wmma.*``.  Why: the statements' semantics need partial tiles (``extents``: zero outside,
never read there) and element-exact stores; PTX leaves the lane-to-element map of ``wmma``
fragments unspecified, while it documents the map of ``mma.m16n8k16`` (PTX ISA, "Matrix
Fragments for mma.m16n8k16 with floating point type").  With a known map, a partial tile is
loaded and stored element by element in registers (no shared staging tile, no extra
barrier), and a full tile in shared memory takes ``ldmatrix`` (``.trans`` for the transposed
layouts), the fast path.  One WMMA m x n x 16 tile is (m/16) x (n/8) ``mma.sync`` (an 8-row
tile, shape 8x32x16, runs with the upper half of A zero and its result dropped).

Per-thread fragment registers, in "atoms" of 8 rows or columns (g = lane / 4, t = lane % 4;
16-bit pairs packed low element first):

- ``wmma.matrix_a`` R x K: ``uint32_t f[R/8][K/16][2]``; ``f[i][k][j]`` holds row 8i+g,
  columns 16k+8j+2t and +1.
- ``wmma.matrix_b`` K x N: ``uint32_t f[K/16][N/8][2]``; ``f[k][i][j]`` holds rows 16k+8j+2t
  and +1 of column 8i+g.
- ``wmma.accumulator`` R x N, float32: ``float f[R/8][N/8][2]``, ``f[i][c][h]`` = row 8i+g,
  column 8c+2t+h; float16: ``uint32_t f[R/8][N/8][1]``, the pair packed.

An ``mma.sync`` over rows 16i.. takes A atoms i and i+1 (its a0/a1 and a2/a3 registers are
``f[i][k][0]``, ``f[i+1][k][0]``, ``f[i][k][1]``, ``f[i+1][k][1]``), one B atom and the C atoms
i and i+1 of its 8 columns: exactly the PTX map.

Alignment relied on (PTX ISA): ``ldmatrix`` needs each of the eight row addresses a thread
supplies to be 16-byte aligned in the shared window.  The fast path is taken when, at run time
(the test is uniform across the warp and folds away for constant shapes), the tile is full,
in shared memory, its last stride is 1, its first element 16-byte aligned and ``ldm`` (the
stride of dimension -2) a multiple of 8 elements; every other tile goes element by element
(strided views, odd offsets, partial tiles, global memory).  Stores pair two contiguous
elements into one 8- or 4-byte store when the tile is row-major, full, unit-stride and
aligned, else store element by element (only the valid part).  ``mma.sync`` itself needs no
alignment.  Instructions: ``ldmatrix.sync.aligned.m8n8.x{2,4}[.trans].shared.b16`` and
``mma.sync.aligned.m16n8k16.row.col.{f32.f16.f16.f32, f32.bf16.bf16.f32, f16.f16.f16.f16}``,
both sm_80+ (the prelude's ``kd_ldsm*``/``kd_mma*``).
"""
from __future__ import annotations

from kdsl import dtypes as dt
from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir import make as mk
from kdsl.ir.simplify import linear, simplify

from .offsets import flat_offset
from .types import stype

_A, _B, _C = n.Scope.WMMA_MATRIX_A, n.Scope.WMMA_MATRIX_B, n.Scope.WMMA_ACCUMULATOR
#: per operand scope: (rows, cols) of one register atom
_ATOM = {_A: (8, 16), _B: (16, 8), _C: (8, 8)}
_LANE = "const int kd_wg = (kd_tid & 31) >> 2, kd_wt = kd_tid & 3;"


def _const(e, what: str) -> int:
    if type(e) is n.Const and e.dtype.is_int:
        return int(e.value)
    raise InternalCompilerError(f"cuda codegen: {what} is not a constant")


def _tile_dims(scope, shape) -> tuple:
    m, nn, k = shape
    return {_A: (m, k), _B: (k, nn), _C: (m, nn)}[scope]


def _is_f16_acc(frag: n.Buffer) -> bool:
    return frag.scope is _C and frag.dtype is dt.float16


def allocate(p, s: n.Allocate, d: int) -> None:
    """A fragment: per-thread registers in atoms (module docstring), zeroed like the SIMT
    executor's fragments (the compiler drops the zeroing where a fill or load follows)."""
    b = s.buffer
    rows, cols = (_const(e, f"the shape of fragment {b.name}") for e in b.shape)
    ar, ac = _ATOM[b.scope]
    if rows % ar or cols % ac:
        raise InternalCompilerError(f"cuda codegen: fragment {b.name} of shape {rows}x{cols} is "
                                    f"not made of {ar}x{ac} {b.scope.value} atoms")
    if b.scope is _C and b.dtype is dt.float32:
        decl = f"float {p.buf(b)}[{rows // ar}][{cols // ac}][2] = {{}};"
    elif b.scope is _C:
        if b.dtype is not dt.float16:
            raise InternalCompilerError(f"cuda codegen: {b.dtype.name} accumulator {b.name}")
        decl = f"uint32_t {p.buf(b)}[{rows // ar}][{cols // ac}][1] = {{}};"
    else:
        if b.dtype not in (dt.float16, dt.bfloat16):
            raise InternalCompilerError(f"cuda codegen: {b.dtype.name} fragment {b.name}")
        decl = f"uint32_t {p.buf(b)}[{rows // ar}][{cols // ac}][2] = {{}};"
    p.emit(d, "{")
    p.emit(d + 1, decl)
    p.stmt(s.body, d + 1)
    p.emit(d, "}")


def _atom(p, e, q: int) -> str:
    """The atom index of tile coordinate ``e`` (a multiple of ``q``)."""
    if type(e) is n.Const:
        return str(int(e.value) // q)
    return f"((int)({p.expr(e)}) / {q})"


def _plus(base: str, k: int) -> str:
    if k == 0:
        return base
    return str(int(base) + k) if base.lstrip("-").isdigit() else f"{base} + {k}"


def lane_elements(scope, rows: int, cols: int):
    """(register path suffix, tile row text, tile column text, half) for every element a
    thread holds of a rows x cols tile of ``scope``; the suffix indexes from the tile's atoms
    as ``(atom row, atom col, register)``."""
    out = []
    if scope is _A:
        for i in range(rows // 8):
            for j in range(2):
                for h in range(2):
                    out.append(((i, 0, j), f"{8 * i} + kd_wg", f"{8 * j + h} + 2 * kd_wt", h))
    elif scope is _B:
        for i in range(cols // 8):
            for j in range(2):
                for h in range(2):
                    out.append(((0, i, j), f"{8 * j + h} + 2 * kd_wt", f"{8 * i} + kd_wg", h))
    else:
        for i in range(rows // 8):
            for c in range(cols // 8):
                for h in range(2):
                    out.append(((i, c, h), f"{8 * i} + kd_wg", f"{8 * c + h} + 2 * kd_wt", h))
    return out


def tile_strides(mem: n.Buffer, dims) -> tuple:
    """The strides (elements, Exprs) of ``mem``'s two dimensions ``dims`` that a tile spans
    (``WmmaLoad.dims``: by default the last two)."""
    nd = len(mem.shape)
    out = []
    for d in dims:
        d %= nd
        if mem.strides is not None:
            out.append(mem.strides[d])
        else:
            e = mk.as_expr(1)
            for x in mem.shape[d + 1:]:
                e = mk.mul(e, x)
            out.append(simplify(e))
    return tuple(out)


class _Tile:
    """What the load and store of one memory tile share: the pointer at the tile's element
    (0, 0), the strides of the two dimensions it spans, the valid extents (unclamped)."""

    def __init__(self, p, s, mem: n.Buffer, d: int):
        self.p, self.mem, self.d = p, mem, d
        self.col = s.layout is n.WmmaLayout.COL_MAJOR
        self.rows, self.cols = _tile_dims(s.frag.scope, s.shape)
        self.frag = s.frag
        fr = (_atom(p, s.tile[0], _ATOM[s.frag.scope][0]), _atom(p, s.tile[1], _ATOM[s.frag.scope][1]))
        self.frag_atoms = fr
        t = stype(mem.dtype)
        const = "const " if type(s) is n.WmmaLoad else ""
        s2, s1 = (p.expr(e) for e in tile_strides(mem, s.dims))
        p.emit(d, _LANE)
        p.emit(d, f"{const}{t}* const kd_wp = &{p.buf(mem)}[{p.flat_index(mem, s.origin)}];")
        p.emit(d, f"const int64_t kd_ws2 = {s2}, kd_ws1 = {s1};")
        # the valid extents, unclamped: the guards compare tile coordinates in [0, rows) with
        # them, and "full" is ``>=``.  Not ``clamp(x, 0, rows) == rows``: NVRTC 13.0's ptxas
        # turns that into VIMNMX.RELU with predicate outputs that read as true for tiles wholly
        # outside the matrix (seen on the H200: a whole tile stored one row down).
        p.emit(d, f"const long long kd_wrv = {p.expr(s.extents[0])}, "
                  f"kd_wcv = {p.expr(s.extents[1])};")

    def offset(self, r: str, c: str) -> str:
        """The element offset of tile element (r, c) from kd_wp."""
        if self.col:
            r, c = c, r
        return f"({r}) * kd_ws2 + ({c}) * kd_ws1"

    def reg(self, suffix) -> str:
        i, c, j = suffix
        return f"{self.p.buf(self.frag)}[{_plus(self.frag_atoms[0], i)}][{_plus(self.frag_atoms[1], c)}][{j}]"

    @property
    def full(self) -> str:
        return f"kd_wrv >= {self.rows} && kd_wcv >= {self.cols}"


def _multiple(e, m: int) -> bool:
    """Whether int Expr ``e`` is a multiple of ``m`` for every value of its variables (every
    coefficient and the constant of its linear form are)."""
    if e is None:
        return True
    lin = linear(e)
    return lin.const % m == 0 and all(c % m == 0 for c in lin.terms.values())


def static_fast_path(s: n.WmmaLoad) -> str | None:
    """``"full"`` when ``s`` is known at compile time to take ``ldmatrix`` alone: a full tile
    (constant extents, e.g. from a padded cache) of a 16-byte aligned shared buffer (every
    shared allocation is) at an offset and with a row stride that are multiples of 16 bytes;
    ``"whole"`` when the tile may be partial but can be read whole (``WmmaLoad.whole``):
    ``ldmatrix``, then the part outside ``extents`` zeroed in registers; else None."""
    src, item = s.src, s.src.dtype.itemsize
    rows, cols = _tile_dims(s.frag.scope, s.shape)
    if src.scope is not n.Scope.SHARED or s.frag.scope is _C or 16 % item:
        return None
    full = all(type(e) is n.Const and e.value >= w for e, w in zip(s.extents, (rows, cols)))
    if not (full or s.whole):
        return None
    strides = tile_strides(src, s.dims)
    if not all(type(x) is n.Const for x in strides):
        return None
    ldm, last = (int(x.value) for x in strides)
    per = 16 // item
    if last == 1 and ldm % per == 0 and _multiple(flat_offset(src, s.origin), per):
        return "full" if full else "whole"
    return None


def load(p, s: n.WmmaLoad, d: int) -> None:
    """``WmmaLoad``: ldmatrix for full aligned shared tiles of A/B (with no run-time test where
    ``static_fast_path``), else element by element (zero outside ``extents``, nothing read
    there)."""
    p.emit(d, "{")
    tile = _Tile(p, s, s.src, d + 1)
    path = static_fast_path(s)
    if path is not None:
        _ldmatrix(p, s, tile, d + 1)
        if path == "whole":
            _mask(p, s, tile, d + 1)
        p.emit(d, "}")
        return
    fast = s.src.scope is n.Scope.SHARED and s.frag.scope is not _C
    cond = tile.full
    if fast:
        cond += (" && kd_ws1 == 1 && ((reinterpret_cast<unsigned long long>(kd_wp) | "
                 "(unsigned long long)(kd_ws2 * 2)) & 15ULL) == 0ULL")
    p.emit(d + 1, f"if ({cond}) {{")
    if fast:
        _ldmatrix(p, s, tile, d + 2)
    else:
        _elementwise_load(p, s, tile, d + 2, guarded=False)
    p.emit(d + 1, "} else {")
    _elementwise_load(p, s, tile, d + 2, guarded=True)
    p.emit(d + 1, "}")
    p.emit(d, "}")


def _mask(p, s, tile: _Tile, d: int) -> None:
    """Zero the 16-bit elements of a whole-tile A/B fragment outside the valid extents (a
    uniform test: nothing to do for a full tile)."""
    p.emit(d, f"if (!({tile.full})) {{")
    elems = lane_elements(s.frag.scope, tile.rows, tile.cols)
    for k in range(0, len(elems), 2):
        (suffix, r0, c0, _), (_, r1, c1, _) = elems[k], elems[k + 1]
        keep = " | ".join(f"((({r}) < kd_wrv && ({c}) < kd_wcv) ? {m} : 0u)"
                          for r, c, m in ((r0, c0, "0x0000FFFFu"), (r1, c1, "0xFFFF0000u")))
        p.emit(d + 1, f"{tile.reg(suffix)} &= {keep};")
    p.emit(d, "}")


def _elementwise_load(p, s, tile: _Tile, d: int, guarded: bool) -> None:
    scope = s.frag.scope
    zero = "0.0f" if scope is _C and not _is_f16_acc(s.frag) else "(uint16_t)0"

    def value(r, c):
        v = f"kd_wp[{tile.offset(r, c)}]"
        return f"(({r}) < kd_wrv && ({c}) < kd_wcv ? {v} : {zero})" if guarded else v

    elems = lane_elements(scope, tile.rows, tile.cols)
    if scope is _C and not _is_f16_acc(s.frag):
        for suffix, r, c, _h in elems:
            p.emit(d, f"{tile.reg(suffix)} = {value(r, c)};")
        return
    # 16-bit elements: pairs (h = 0, 1) packed into one register
    for k in range(0, len(elems), 2):
        (suffix, r0, c0, _), (_, r1, c1, _) = elems[k], elems[k + 1]
        if scope is _C:
            suffix = suffix[:2] + (0,)
        p.emit(d, f"{tile.reg(suffix)} = kd_pack2({value(r0, c0)}, {value(r1, c1)});")


def ldmatrix_plan(is_a: bool, col: bool, rows: int, cols: int) -> list:
    """The ``ldmatrix`` instructions of a full rows x cols A (``is_a``) or B tile: a list of
    (width, trans, matrix text, offset text, register suffixes).  The tile is cut into 8x8
    matrices, four (or two) per instruction; matrix q of A is atom q/2's register q%2 (tile
    rows 8(q/2).., columns 8(q%2)..), of B atom q/2's register q%2 (rows 8(q%2).., columns
    8(q/2)..).  Lane L gives the address of memory row L%8 (``kd_lr``) of matrix L/8 of its
    instruction (``kd_m``, the matrix text): the offset text, in elements from the tile's
    (0, 0) with the stride ``kd_ws2``.  A 16-row A tile goes by fours in the mma's operand
    order instead: matrix q is atom 2(q/4) + q%2's register (q/2)%2.  ``.trans`` where the
    tile's memory rows are not the fragment's (col-major A, row-major B)."""
    count = 2 * (rows // 8 if is_a else cols // 8)
    trans = col if is_a else not col
    width = 4 if count % 4 == 0 else 2
    big, small = "8 * (kd_m >> 1)", "8 * (kd_m & 1)"
    ro, co = (big, small) if is_a else (small, big)
    a_order = is_a and width == 4
    if a_order:
        # A by fours in mma.sync's operand order (rows 0-7, rows 8-15 of k 0-7, then of k
        # 8-15): an instruction's four registers are then one mma's A operand as they stand
        # (no register moves before each HMMA)
        ro, co = "(16 * (kd_m >> 2) + 8 * (kd_m & 1))", "8 * ((kd_m >> 1) & 1)"
    # memory row kd_lr of the matrix runs along the tile's rows (row-major) or columns
    off = f"({co} + kd_lr) * kd_ws2 + {ro}" if col else f"({ro} + kd_lr) * kd_ws2 + {co}"
    plan = []
    for g in range(count // width):
        regs = [(2 * (q >> 2) + (q & 1), 0, (q >> 1) & 1) if a_order
                else (q // 2, 0, q % 2) if is_a else (0, q // 2, q % 2)
                for q in range(width * g, width * g + width)]
        plan.append((width, trans, f"{width * g} + ((kd_tid >> 3) & {width - 1})", off, regs))
    return plan


def _ldmatrix(p, s, tile: _Tile, d: int) -> None:
    p.emit(d, "const int kd_lr = kd_tid & 7;")
    for width, trans, m, off, regs in ldmatrix_plan(s.frag.scope is _A, tile.col, tile.rows, tile.cols):
        fn = f"kd_ldsm_x{width}{'_t' if trans else ''}"
        p.emit(d, "{")
        p.emit(d + 1, f"const int kd_m = {m};")
        p.emit(d + 1, f"{fn}({', '.join(tile.reg(r) for r in regs)}, kd_wp + {off});")
        p.emit(d, "}")


def store(p, s: n.WmmaStore, d: int) -> None:
    """``WmmaStore``: the valid part of the accumulator tile, in pairs where aligned; a
    converting store rounds each float32 value to the 16-bit type (``kd_f2h``/``kd_f2bf``,
    what the cast stage it replaces would do) and stores pairs as one 32-bit word."""
    p.emit(d, "{")
    tile = _Tile(p, s, s.dst, d + 1)
    f16 = _is_f16_acc(s.frag)
    to16 = {dt.float16: "kd_f2h", dt.bfloat16: "kd_f2bf"}.get(s.dst.dtype) if s.is_converting else None
    elems = lane_elements(_C, tile.rows, tile.cols)
    item = s.dst.dtype.itemsize

    def element(suffix, h):
        if f16:
            return f"(uint16_t)({tile.reg(suffix[:2] + (0,))} >> {16 * h})"
        return f"{to16}({tile.reg(suffix)})" if to16 else tile.reg(suffix)

    def pair(suffix):
        if f16:
            return tile.reg(suffix[:2] + (0,))
        lo, hi = tile.reg(suffix), tile.reg(suffix[:2] + (1,))
        return f"kd_pack2({to16}({lo}), {to16}({hi}))" if to16 else f"float2{{{lo}, {hi}}}"

    if not tile.col:
        vec = "uint32_t" if item == 2 else "float2"
        p.emit(d + 1, f"if ({tile.full} && kd_ws1 == 1 && ((reinterpret_cast<unsigned long long>(kd_wp) "
                      f"| (unsigned long long)(kd_ws2 * {item})) & {2 * item - 1}ULL) == 0ULL) {{")
        for k in range(0, len(elems), 2):
            suffix, r, c, _ = elems[k]
            p.emit(d + 2, f"*reinterpret_cast<{vec}*>(kd_wp + {tile.offset(r, c)}) = {pair(suffix)};")
        p.emit(d + 1, "} else {")
        dd = d + 2
    else:
        dd = d + 1
    for suffix, r, c, h in elems:
        p.emit(dd, f"if (({r}) < kd_wrv && ({c}) < kd_wcv) kd_wp[{tile.offset(r, c)}] = {element(suffix, h)};")
    if not tile.col:
        p.emit(d + 1, "}")
    p.emit(d, "}")


def fill(p, s: n.WmmaFill, d: int) -> None:
    """``WmmaFill``: every register of the accumulator tile set to the value."""
    rows, cols = _tile_dims(_C, s.shape)
    f = s.frag
    fr = (_atom(p, s.tile[0], 8), _atom(p, s.tile[1], 8))
    name = p.buf(f)
    f16 = _is_f16_acc(f)
    p.emit(d, "{")
    if f16:
        p.emit(d + 1, f"const uint16_t kd_wv = kd_f2h({p.expr(s.value)});")
        v = "kd_pack2(kd_wv, kd_wv)"
    else:
        p.emit(d + 1, f"const float kd_wv = {p.expr(s.value)};")
        v = "kd_wv"
    for i in range(rows // 8):
        for c in range(cols // 8):
            for h in range(1 if f16 else 2):
                p.emit(d + 1, f"{name}[{_plus(fr[0], i)}][{_plus(fr[1], c)}][{h}] = {v};")
    p.emit(d, "}")


def mma_plan(m: int, nn: int, f16: bool) -> list:
    """The ``mma.sync.m16n8k16`` instructions of an m x nn x 16 tile: a list of (a, b, c)
    operand lists in the instruction's order, each entry the register suffix relative to the
    tile's first atoms: a = (A atom row, register), b = (B atom column, register), c =
    (accumulator atom row, atom column, register), shared by C and D; None is a zero input
    (C) or a dropped output (D): the rows 8..15 of an 8-row tile."""
    half = m == 8
    nregs = 1 if f16 else 2
    plan = []
    for mi in range(max(m // 16, 1)):
        r0, r1 = 2 * mi, 2 * mi + 1
        a = [(r0, 0), None if half else (r1, 0), (r0, 1), None if half else (r1, 1)]
        for ni in range(nn // 8):
            b = [(ni, 0), (ni, 1)]
            c = [(r0, ni, h) for h in range(nregs)] + [None if half else (r1, ni, h) for h in range(nregs)]
            plan.append((a, b, c))
    return plan


def mma(p, s: n.WmmaMma, d: int) -> None:
    """``WmmaMma``: (m/16) x (n/8) ``mma.sync.m16n8k16`` (module docstring, ``mma_plan``)."""
    m, nn, k = s.shape
    if k != 16 or m % 8 or nn % 8:
        raise InternalCompilerError(f"cuda codegen: wmma shape {s.shape}")
    a_in = s.a.dtype
    f16 = _is_f16_acc(s.d)
    if _is_f16_acc(s.c) != f16 or a_in is not s.b.dtype or (f16 and a_in is not dt.float16):
        raise InternalCompilerError(f"cuda codegen: wmma mma of {a_in.name} x {s.b.dtype.name} + "
                                    f"{s.c.dtype.name} -> {s.d.dtype.name}")
    ar, ak = _atom(p, s.a_tile[0], 8), _atom(p, s.a_tile[1], 16)
    bk, bn = _atom(p, s.b_tile[0], 16), _atom(p, s.b_tile[1], 8)
    cr, cc = _atom(p, s.c_tile[0], 8), _atom(p, s.c_tile[1], 8)
    dr, dc = _atom(p, s.d_tile[0], 8), _atom(p, s.d_tile[1], 8)
    A, B, C, D = (p.buf(x) for x in (s.a, s.b, s.c, s.d))
    fn = "kd_mma_f16acc" if f16 else ("kd_mma_bf16" if a_in is dt.bfloat16 else "kd_mma_f16")
    t, zero = ("uint32_t", "0u") if f16 else ("float", "0.0f")
    p.emit(d, "{")
    for a, b, c in mma_plan(m, nn, f16):
        a_txt = ["0u" if x is None else f"{A}[{_plus(ar, x[0])}][{ak}][{x[1]}]" for x in a]
        b_txt = [f"{B}[{bk}][{_plus(bn, x[0])}][{x[1]}]" for x in b]
        c_txt = [zero if x is None else f"{C}[{_plus(cr, x[0])}][{_plus(cc, x[1])}][{x[2]}]" for x in c]
        p.emit(d + 1, "{")
        p.emit(d + 2, f"{t} kd_wd[{len(c)}];")
        p.emit(d + 2, f"{fn}(kd_wd, {', '.join(a_txt + b_txt + c_txt)});")
        for i, x in enumerate(c):
            if x is not None:
                p.emit(d + 2, f"{D}[{_plus(dr, x[0])}][{_plus(dc, x[1])}][{x[2]}] = kd_wd[{i}];")
        p.emit(d + 1, "}")
    p.emit(d, "}")


#: statement type -> its printer
EMIT = {n.WmmaFill: fill, n.WmmaLoad: load, n.WmmaMma: mma, n.WmmaStore: store}


def emit(p, s, d: int) -> None:
    """Print warp statement ``s`` through kernel printer ``p`` at depth ``d``."""
    EMIT[type(s)](p, s, d)


__all__ = ["allocate", "emit", "EMIT", "lane_elements", "ldmatrix_plan", "mma_plan"]
