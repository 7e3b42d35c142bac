"""Hopper tensor-core code for ``WgmmaMma`` (``wgmma.mma_async``, sm_90a) and the 128-byte
swizzled shared layout its operand tiles have (``Buffer.swizzle``, ``kdsl.gpu.shared_layout``).

**Swizzled addressing.**  A swizzled buffer ``[.., P, Q]`` of ``item``-byte elements keeps its
last dimension in 128-byte column blocks (``L = 128 / item`` elements), each block ``P`` rows of
128 bytes, one after another; in each row the 16-byte chunks (``C = 16 / item`` elements) sit
at chunk index XOR ``p % 8``.  Element ``(p, q)`` is at ``(q / L) * P * L + p * L + (((q / C)
% 8) ^ (p % 8)) * C + q % C`` (``kd_swz``); leading dimensions are compact multiples of ``P *
Q``.  Every access of the buffer goes through it (``offset``): the copies that fill it, scalar
or 16-byte (a vector of at most 16 aligned bytes never crosses a chunk), and the descriptors.

**The instruction.**  Each warp's ``WgmmaMma`` is its 16-row share of one ``m64nNk16``
issued by the warpgroup (warps 4g..4g+3 of the block: ``tensorize`` and the SIMT executor
check that their A tiles are consecutive 16-row blocks of one 64-row tile, with one B tile).
The warpgroup's A tile starts 16 * (warp % 4) rows above the warp's.  Shared-memory matrix
descriptors (PTX ISA, "Matrix Descriptor Format"): start address >> 4, leading byte offset
(LBO) >> 4, stride byte offset (SBO) >> 4, swizzle mode 1 (128 bytes); every tile starts on an
8-row atom (so its start is its unswizzled address) and the buffers are 1024-byte aligned
(base offset 0).  A row-major A is K-major (SBO 1024: the next 8 rows; LBO unused), a
row-major B is N-major (``imm-trans-b`` 1; LBO = the next 64-column block, ``P * 128`` bytes;
SBO 1024: the next 8 k rows), a column-major B K-major.  A column-major A (M-major) is not
supported (``tensorize`` refuses it).

**Registers.**  The accumulator is a ``wmma.accumulator`` fragment (``codegen/wmma``: ``float
f[R/8][N/8][2]``, ``f[i][c][h]`` = row 8i + lane/4, column 8c + 2(lane%4) + h), which is the
layout of wgmma's D: register ``4j + 2h + e`` is row 8h + lane/4, column 8j + 2(lane%4) + e of
the warp's 16 rows.  A ``kd_wgmma_*`` function per shape takes ``float*`` at the tile's first
atom and the fragment's row pitch.

**Asynchrony.**  wgmma runs asynchronously: a run of them (an unrolled loop of ``WgmmaMma``
statements only, or one statement) is preceded by ``wgmma.fence``.  In a kernel without
``WgmmaCommit`` it is followed by ``wgmma.commit_group`` and ``wgmma.wait_group 0``: when the
run's code ends, the products are in the registers and the shared tiles are no longer read,
which is what the statements mean there (the barriers and ring buffers of
``software_pipeline`` and ``sync`` rely on it).  In a kernel with ``WgmmaCommit`` (the
pipeline of ``software_pipeline`` whose products stay in flight over the next tile's copies)
the IR's ``WgmmaCommit``/``WgmmaWait`` are the commits and waits.  Empty
``asm volatile`` with ``"+f"`` operands around the run keep the compiler from moving other
accesses of the accumulator across it.  Shared memory written by ordinary stores or
``cp.async`` must be made visible to the tensor cores' (async) proxy: in a kernel with wgmma,
every barrier is preceded by ``fence.proxy.async.shared::cta``.
"""
from __future__ import annotations

from kdsl import dtypes as dt
from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.visitor import any_statement

#: bytes of a swizzle line and of an 8-row atom of lines
LINE_BYTES, ATOM_BYTES = 128, 1024

#: in a module's source: it needs the sm_90a target (``kdsl_cuda.build.target_arch``)
from .types import SM90A_MARK

SWIZZLE_HELPERS = SM90A_MARK + r"""
// Hopper tensor cores (codegen/wgmma.py): the 128-byte swizzle, descriptors, fences
template <unsigned P, unsigned L> __device__ __forceinline__ unsigned kd_swz(unsigned p, unsigned q) {
  return (q / L) * (P * L) + p * L + ((((q / (L / 8)) & 7u) ^ (p & 7u)) * (L / 8)) + (q & (L / 8 - 1u));
}
__device__ __forceinline__ unsigned long long kd_wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16)
         | ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void kd_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void kd_wg_commit_wait() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
template <int R> __device__ __forceinline__ void kd_wg_fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
__device__ __forceinline__ void kd_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
"""


def uses_wgmma(body) -> bool:
    """Whether a kernel body holds shared-operand products (it needs sm_90a)."""
    return any_statement(body, lambda x: type(x) is n.WgmmaMma)


def _const(e, what: str) -> int:
    if type(e) is n.Const and e.dtype.is_int:
        return int(e.value)
    raise InternalCompilerError(f"cuda codegen: {what} is not a constant")


def offset(p, b: n.Buffer, indices) -> str:
    """The element offset of ``b[indices]`` for swizzled buffer ``b`` (module docstring)."""
    return offset_text(b, [p.expr.index(e) for e in indices])


def offset_text(b: n.Buffer, texts) -> str:
    """``offset`` of C index texts."""
    if b.swizzle != LINE_BYTES or b.strides is not None:
        raise InternalCompilerError(f"cuda codegen: buffer {b.name} with swizzle {b.swizzle}")
    dims = [_const(e, f"the shape of swizzled buffer {b.name}") for e in b.shape]
    rows, cols = dims[-2:]
    line = LINE_BYTES // b.dtype.itemsize
    if cols % line:
        raise InternalCompilerError(f"cuda codegen: swizzled buffer {b.name} has rows of {cols} elements")
    text = f"kd_swz<{rows}u, {line}u>((unsigned)({texts[-2]}), (unsigned)({texts[-1]}))"
    lead, stride = [], rows * cols
    for t, ext in zip(reversed(texts[:-2]), reversed(dims[:-2])):
        if t != "0":
            lead.append(f"(unsigned)({t}) * {stride}u")
        stride *= ext
    return " + ".join(lead + [text]) if lead else text


def _function(p, shape, dtype, trans_b: int, pitch: int) -> str:
    """The name of the ``kd_wgmma_*`` function of one shape (its text added to the module)."""
    _, nn, _ = shape
    name = f"kd_wgmma_m64n{nn}k16_{dtype.name}_t{trans_b}_p{pitch}"
    if name in p.helpers:
        return name
    ptx = {dt.float16: "f16", dt.bfloat16: "bf16"}[dtype]
    regs = []               # register 4j + 2h + e -> fragment offset h * pitch + 2j + e
    for j in range(nn // 8):
        for h in range(2):
            for e in range(2):
                regs.append(h * pitch + 2 * j + e)
    count = len(regs)
    ops = ", ".join(f"%{i}" for i in range(count))
    outs = ", ".join(f'"+f"(d[{r}])' for r in regs)
    p.helpers[name] = (
        f"__device__ __forceinline__ void {name}(float* d, unsigned long long da, unsigned long long db) {{\n"
        f'  asm volatile("wgmma.mma_async.sync.aligned.m64n{nn}k16.f32.{ptx}.{ptx} {{{ops}}}, '
        f'%{count}, %{count + 1}, 1, 1, 1, 0, {trans_b};\\n"\n'
        f"    : {outs}\n"
        f'    : "l"(da), "l"(db));\n'
        "}\n")
    return name


def _address(p, buf: n.Buffer, texts) -> str:
    """The shared-window byte address of ``buf`` at index texts ``texts`` (a tile's first
    element)."""
    return (f"(unsigned)__cvta_generic_to_shared({p.buf(buf)}) + "
            f"{buf.dtype.itemsize}u * ({offset_text(buf, texts)})")


def _frag_base(p, frag: n.Buffer, tile) -> tuple:
    """(``&frag`` at the tile's first atom, the fragment's row pitch in floats)."""
    cols = _const(frag.shape[1], f"the columns of fragment {frag.name}")
    pitch = (cols // 8) * 2

    def atom(e, q):
        return str(int(e.value) // q) if type(e) is n.Const else f"((int)({p.expr(e)}) / {q})"
    return f"&{p.buf(frag)}[{atom(tile[0], 8)}][{atom(tile[1], 8)}][0]", pitch


def _regs(frag: n.Buffer) -> int:
    return _const(frag.shape[0], "fragment rows") * _const(frag.shape[1], "fragment columns") // 32


def mma(p, s: n.WgmmaMma, d: int) -> None:
    """One ``WgmmaMma``: the warpgroup's descriptors and instruction; outside a batch
    (``p.wgmma_batch``) fenced, committed and waited for on its own."""
    m, nn, k = s.shape
    if (m, k) != (16, 16) or nn % 8 or not 8 <= nn <= 256:
        raise InternalCompilerError(f"cuda codegen: wgmma shape {s.shape}")
    if s.a_layout is not n.WmmaLayout.ROW_MAJOR:
        raise InternalCompilerError("cuda codegen: wgmma with a column-major A")
    if s.d is not s.c or s.d_tile != s.c_tile:
        raise InternalCompilerError("cuda codegen: wgmma accumulating into another fragment")
    for b in (s.a, s.b):
        if b.swizzle != LINE_BYTES:
            raise InternalCompilerError(f"cuda codegen: wgmma operand {b.name} is not swizzled")
    alone = not p.wgmma_batch
    base, pitch = _frag_base(p, s.d, s.d_tile)
    p.emit(d, "{")
    if alone:
        _fenced_start(p, [s.d], d + 1)
    # the warpgroup's A tile: 16 rows per warp above this warp's
    a = [p.expr.index(e) for e in s.a_origin]
    a[-2] = f"({a[-2]}) - 16 * ((kd_tid >> 5) & 3)"
    p.emit(d + 1, f"const unsigned long long kd_da = kd_wg_desc({_address(p, s.a, a)}, 16u, {ATOM_BYTES}u);")
    rows_b = _const(s.b.shape[-2], f"the rows of {s.b.name}")
    if s.b_layout is n.WmmaLayout.ROW_MAJOR:       # N-major B: 64-column blocks of rows_b lines
        trans_b, lbo = 1, rows_b * LINE_BYTES
    else:                                          # K-major B
        trans_b, lbo = 0, 16
    b = [p.expr.index(e) for e in s.b_origin]
    p.emit(d + 1, f"const unsigned long long kd_db = kd_wg_desc({_address(p, s.b, b)}, {lbo}u, {ATOM_BYTES}u);")
    fn = _function(p, s.shape, s.a.dtype, trans_b, pitch)
    p.emit(d + 1, f"{fn}({base}, kd_da, kd_db);")
    if alone:
        _fenced_end(p, [s.d], d + 1)
    p.emit(d, "}")


def _frags(frags) -> list:
    out, seen = [], set()
    for f in frags:
        if id(f) not in seen:
            seen.add(id(f))
            out.append(f)
    return out


def _fenced_start(p, frags, d: int) -> None:
    for f in _frags(frags):
        p.emit(d, f"kd_wg_fence_regs<{_regs(f)}>(&{p.buf(f)}[0][0][0]);")
    p.emit(d, "kd_wg_fence();")


def _fenced_end(p, frags, d: int) -> None:
    if p.async_wgmma:           # the IR commits and waits (WgmmaCommit, WgmmaWait)
        return
    p.emit(d, "kd_wg_commit_wait();")
    fence_regs(p, frags, d)


def fence_regs(p, frags, d: int) -> None:
    """Keep the compiler from moving accesses of these accumulators across this point."""
    for f in _frags(frags):
        p.emit(d, f"kd_wg_fence_regs<{_regs(f)}>(&{p.buf(f)}[0][0][0]);")


def commit(p, s: n.WgmmaCommit, d: int) -> None:
    """``WgmmaCommit``: ``wgmma.commit_group``."""
    p.emit(d, 'asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");')


def wait(p, s: n.WgmmaWait, d: int) -> None:
    """``WgmmaWait``: ``wgmma.wait_group``, then the accumulators in scope fenced."""
    p.emit(d, f'asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"({int(s.pending)}) : "memory");')
    fence_regs(p, [f for f in p.fragments if f.scope is n.Scope.WMMA_ACCUMULATOR], d)


def batch(s) -> list | None:
    """The ``WgmmaMma`` statements of loop ``s`` when its body holds nothing else (loops,
    sequences and lets around them): one fenced, committed run; else None."""
    found = []

    def walk(x) -> bool:
        t = type(x)
        if t is n.WgmmaMma:
            found.append(x)
            return True
        if t is n.Seq:
            return all(walk(y) for y in x.stmts)
        if t in (n.For, n.LetStmt):
            return (t is not n.For or x.kind is not n.ForKind.BOUND) and walk(x.body)
        return False
    return found if walk(s.body) and found else None


def batched_loop(p, s: n.For, stmts: list, d: int) -> None:
    """Loop ``s`` of wgmma statements only, as one asynchronous run (module docstring)."""
    frags = [x.d for x in stmts]
    _fenced_start(p, frags, d)
    p.wgmma_batch = True
    try:
        p.plain_loop(s, d)
    finally:
        p.wgmma_batch = False
    _fenced_end(p, frags, d)


__all__ = ["SM90A_MARK", "SWIZZLE_HELPERS", "uses_wgmma", "offset", "offset_text", "mma", "batch", "batched_loop",
           "commit", "wait", "fence_regs"]
