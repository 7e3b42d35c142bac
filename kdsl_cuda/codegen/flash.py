"""The CUDA text of a fused attention block (FlashAttention-2's forward pass) on tensor cores.

One CTA per (batch x head, block of ``bm`` query rows); ``nw`` warps, each owning ``bm / nw``
rows (``mt`` tiles of 16).  The Q tile is copied to shared memory once; K and V tiles of ``bn``
keys stream through two shared buffers (``cp.async``, the next tile in flight while the
current one is used).  ``S = Q K^T`` and ``O += P V`` are ``mma.sync.m16n8k16`` with float32
accumulation (operands through ``ldmatrix``; V transposed by ``ldmatrix.trans``); the running
max, the rescaled sum and the rescaling of O stay in registers in float32 (a row's 8-column
slices live in the 4 lanes of a quad: row reductions are two ``shfl.xor``).  P goes from the
S accumulators to the A operand of the second product without memory (the m16n8 accumulator
layout of two adjacent tiles is the m16k16 operand layout), rounded to the input's 16-bit
type (as FlashAttention does).  A causal bound stops the key loop at the block's last visible
key and masks only the tiles that cross the diagonal.

Shared rows are swizzled by 16-byte chunks (chunk ``c`` of row ``r`` at ``c ^ (r & 7)``):
``ldmatrix``'s 8 row addresses fall in 8 different bank groups.

What the stage computes around the two products comes in as C expression text rendered from
the stage's own IR (``score``: the row value from the float32 product ``acc`` and the row /
key indices ``i``, ``j``; ``final``: the stored value from the accumulator ``o`` and the sum
``l``), so this module knows tiles and registers, never the user's formula.
"""
from __future__ import annotations

import dataclasses
import re

from .prelude import prelude_for

#: head dimensions the kernel tiles (16-byte chunks: a power of two of them)
HEAD_DIMS = (16, 32, 64, 128, 256)


@dataclasses.dataclass(frozen=True)
class FlashConfig:
    """Compile-time shape of one flash kernel."""

    d: int                  # head dimension (q/k width; v's width dv)
    dv: int
    bf16: bool = False      # operands bfloat16 (else float16)
    bm: int = 128           # query rows per CTA
    bn: int = 64            # keys per streamed tile
    nw: int = 4             # warps per CTA
    causal: bool = False    # a key bound j < i + causal_end (runtime offset)
    stages: int = 2         # K/V tiles in shared memory (stages - 1 in flight)
    mma_sum: bool = False   # row sums by the tensor cores (P times a ones column) not FADDs

    @property
    def mt(self) -> int:
        """16-row tiles per warp."""
        return self.bm // (16 * self.nw)

    @property
    def threads(self) -> int:
        return 32 * self.nw

    @property
    def smem_bytes(self) -> int:
        return 2 * (self.bm * self.d + self.stages * self.bn * (self.d + self.dv))

    def check(self) -> None:
        """Raise ValueError when the kernel cannot tile this shape."""
        if self.d not in HEAD_DIMS or self.dv not in HEAD_DIMS:
            raise ValueError(f"head dims {self.d}/{self.dv}: the flash kernel tiles {HEAD_DIMS}")
        if self.bm % (16 * self.nw) or self.mt < 1 or self.bn % 16 or self.bn < 16 \
                or not 2 <= self.stages <= 4:
            raise ValueError(f"tiles bm={self.bm} bn={self.bn} nw={self.nw} stages={self.stages}")


COMMON = r"""
// flash attention (kdsl_cuda/codegen/flash.py): element offset of 16-byte chunk c of row r
// in a swizzled tile of CH chunks per row
template <int CH> __device__ __forceinline__ int kd_fl_swz(int r, int c) {
  constexpr int m = (CH < 8 ? CH : 8) - 1;
  return r * (CH * 8) + ((c ^ (r & m)) << 3);
}
// rows r0 .. r0 + rows - 1 of a (nrows x width) operand into a swizzled shared tile of CH
// chunks per row, zeros beyond either end: cp.async (vec) or element by element
template <int CH> __device__ __forceinline__ void kd_fl_load(
    uint16_t* dst, const uint16_t* src, long long sn, long long sc, long long r0, long long nrows,
    long long width, int rows, bool vec, int tid, int nthreads) {
  if (vec) {
    for (int x = tid; x < rows * CH; x += nthreads) {
      int r = x / CH, c = x % CH;
      long long gr = r0 + r;
      kd_cp_async<16>(dst + kd_fl_swz<CH>(r, c), src + (gr < nrows ? gr : 0) * sn + c * 8, gr < nrows);
    }
  } else {
    for (int x = tid; x < rows * CH * 8; x += nthreads) {
      int r = x / (CH * 8), col = x % (CH * 8);
      long long gr = r0 + r;
      dst[kd_fl_swz<CH>(r, col >> 3) + (col & 7)] = (gr < nrows && col < width) ? src[gr * sn + col * sc] : (uint16_t)0;
    }
  }
}
// one thread's part of copying ROWS rows of a row-contiguous operand (16-byte aligned rows)
// into a swizzled shared tile of CH chunks per row by cp.async: chunk tid % CH of rows
// tid / CH + x * NTH / CH (a compile-time trip count).  Made once per kernel: a tile's copy
// is then one 64-bit add per pass (``src`` advanced by ``step``), rows past ``nrows`` checked
// only in the last tile (they read nothing and get zeros).
template <int CH, int ROWS, int NTH> struct kd_fl_copy {
  static_assert(NTH % CH == 0, "threads cover whole rows");
  static constexpr int RSTEP = NTH / CH, PASSES = (ROWS * CH + NTH - 1) / NTH;
  // the swizzle repeats every 8 rows (or CH): whole passes keep a thread's chunk position
  static constexpr bool SAME = RSTEP % ((CH < 8 ? CH : 8)) == 0;
  int rr, c;
  long long sn;
  const uint16_t* base;
  const uint16_t* row0;       // a valid address for the rows that read nothing
  __device__ __forceinline__ kd_fl_copy(const uint16_t* src, long long sn_, int tid)
      : rr(tid / CH), c(tid % CH), sn(sn_), base(src + (long long)(tid / CH) * sn_ + (tid % CH) * 8),
        row0(src) {}
  // rows r0 .. r0 + ROWS - 1 into dst (zeros at and past nrows)
  __device__ __forceinline__ void copy(uint16_t* dst, int r0, int nrows) const {
    const uint16_t* p = base + (long long)r0 * sn;
    const long long step = (long long)RSTEP * sn;
    const int d0 = kd_fl_swz<CH>(rr, c);
    if (r0 + ROWS <= nrows) {
#pragma unroll
      for (int x = 0; x < PASSES; ++x) {
        const int r = rr + x * RSTEP;
        if ((ROWS * CH) % NTH == 0 || r < ROWS)
          kd_cp_async<16>(dst + (SAME ? d0 + x * RSTEP * CH * 8 : kd_fl_swz<CH>(r, c)), p, true);
        p += step;
      }
    } else {
#pragma unroll
      for (int x = 0; x < PASSES; ++x) {
        const int r = rr + x * RSTEP;
        if ((ROWS * CH) % NTH == 0 || r < ROWS) {
          const bool ok = r0 + r < nrows;
          kd_cp_async<16>(dst + (SAME ? d0 + x * RSTEP * CH * 8 : kd_fl_swz<CH>(r, c)),
                          ok ? p : row0, ok);
        }
        p += step;
      }
    }
  }
};
// float16 rounding without numpy's NaN payload rules (a NaN stays a NaN): one cvt each way
__device__ __forceinline__ uint16_t kd_fl_f2h(float f) {
  uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float kd_fl_h2f(uint16_t h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ float kd_fl_rh(float f) { return kd_fl_h2f(kd_fl_f2h(f)); }
__device__ __forceinline__ float kd_fl_ex2(float x) {
  float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
template <bool BF> __device__ __forceinline__ uint32_t kd_fl_pack(float lo, float hi) {
  uint32_t r;
  if constexpr (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// ldmatrix x4 (.trans) at a 32-bit shared address (immediate offsets fold into the instruction)
__device__ __forceinline__ void kd_fl_ldsm(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}
__device__ __forceinline__ void kd_fl_ldsm_t(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}
// A lane's ldmatrix rows all have one r & m (m = min(CH, 8) - 1, the swizzle's mask): chunk c of
// them sits at (c & ~m) + ((c & m) ^ y), y = that r & m with the lane's chunk bit folded in.  For an
// even chunk pair base c (c & m in 0, 2, 4, 6) that is (c & ~m) + ((c & m) ^ y): the per-lane part
// takes (m + 1) / 2 values, made once (byte offsets ``o[k]`` for c & m = 2k); the rest is a
// compile-time immediate.
template <int CH> __device__ __forceinline__ void kd_fl_swz_lane(uint32_t (&o)[4], uint32_t base, int y) {
  constexpr int m = (CH < 8 ? CH : 8) - 1;
#pragma unroll
  for (int k = 0; k < 4; ++k) o[k] = base + ((((2 * k) & m) ^ y) << 4);
}
// the byte offset of 16-byte chunk c (even) of row r (r & m the lane's) past the lane's base
template <int CH> __device__ __forceinline__ uint32_t kd_fl_swz_at(const uint32_t (&o)[4], int r, int c) {
  constexpr int m = (CH < 8 ? CH : 8) - 1;
  return o[((c & m) >> 1) & 3] + (uint32_t)(r * CH * 16 + ((c & ~m) << 4));
}
template <bool BF> __device__ __forceinline__ void kd_fl_mma(float* c, uint32_t a0, uint32_t a1, uint32_t a2,
                                                             uint32_t a3, uint32_t b0, uint32_t b1) {
  if constexpr (BF) kd_mma_bf16(c, a0, a1, a2, a3, b0, b1, c[0], c[1], c[2], c[3]);
  else kd_mma_f16(c, a0, a1, a2, a3, b0, b1, c[0], c[1], c[2], c[3]);
}
"""

BLOCK = r"""
#define FD {d}
#define FDV {dv}
#define FBM {bm}
#define FBN {bn}
#define FNW {nw}
#define FMT {mt}
#define FCAUSAL {causal}
#define FBF16 {bf16}
#define FFAST {fast}
#define FST {stages}
#define FMMASUM {mma_sum}

__device__ __forceinline__ float {name}_score(float acc, long long i, long long j{cparams}) {{
  return {score};
}}
__device__ __forceinline__ uint16_t {name}_final(float o, float l, float m{cparams}) {{
  return {final};
}}
// one CTA's query block (blockIdx bx) of batch x head by: Q K^T, online softmax, P V, O / l
__device__ __forceinline__ void {name}_block(
    const uint16_t* __restrict__ Q, const uint16_t* __restrict__ K, const uint16_t* __restrict__ V,
    uint16_t* __restrict__ O, uint16_t* smem, long long bx, long long by,
    long long H, long long group, long long Nq, long long Nk, long long Dq, long long Dv,
    long long causal_end,
    long long sqb, long long sqh, long long sqn, long long sqc, long long skb, long long skh,
    long long skn, long long skc, long long svb, long long svh, long long svn, long long svc,
    long long sob, long long soh, long long son, long long soc{cparams}) {{
  constexpr int CQ = FD / 8, CV = FDV / 8, NT = FBN / 8, DT = FDV / 8, NTH = FNW * 32;
  constexpr float L2E = 1.4426950408889634f;
  const float NINF = -__int_as_float(0x7f800000);
  uint16_t* sQ = smem;
  uint16_t* sK = sQ + FBM * FD;
  uint16_t* sV = sK + FST * FBN * FD;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = (int)bx * FBM;
  const long long bh = by, b = bh / H, h = bh % H, hk = h / group;
  const uint16_t* q = Q + b * sqb + h * sqh;
  const uint16_t* k = K + b * skb + hk * skh;
  const uint16_t* v = V + b * svb + hk * svh;
  uint16_t* o = O + b * sob + h * soh;

  // the keys this block sees: all, or those before the causal bound of its last row
  long long kend = Nk;
#if FCAUSAL
  {{ long long e = (long long)m0 + FBM - 1 + causal_end; if (e < kend) kend = e; }}
#endif
  const int nblocks = kend > 0 ? (int)((kend + FBN - 1) / FBN) : 0;

  // 16-byte copies where every row starts 16-byte aligned and the widths are the tile's;
  // else element by element (any strides, a narrower head dim zero-padded)
  const bool vec = ((((unsigned long long)Q | (unsigned long long)K | (unsigned long long)V) & 15ull) == 0)
      && Dq == FD && Dv == FDV && sqc == 1 && skc == 1 && svc == 1
      && ((sqb | sqh | sqn | skb | skh | skn | svb | svh | svn) & 7) == 0;
  if (vec) kd_fl_copy<CQ, FBM, NTH>(q, sqn, tid).copy(sQ, m0, (int)Nq);
  else kd_fl_load<CQ>(sQ, q, sqn, sqc, m0, Nq, Dq, FBM, false, tid, NTH);
  const kd_fl_copy<CQ, FBN, NTH> ck(k, skn, tid);
  const kd_fl_copy<CV, FBN, NTH> cv(v, svn, tid);
  auto load_kv = [&](int buf, int n0) {{
    if (vec) {{
      ck.copy(sK + buf * FBN * FD, n0, (int)Nk);
      cv.copy(sV + buf * FBN * FDV, n0, (int)Nk);
    }} else {{
      kd_fl_load<CQ>(sK + buf * FBN * FD, k, skn, skc, n0, Nk, Dq, FBN, false, tid, NTH);
      kd_fl_load<CV>(sV + buf * FBN * FDV, v, svn, svc, n0, Nk, Dv, FBN, false, tid, NTH);
    }}
  }};
  // the first FST - 1 key tiles in flight (one commit group each, empty past the last)
#pragma unroll
  for (int st = 0; st < FST - 1; ++st) {{
    if (st < nblocks) load_kv(st, st * FBN);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }}

  // p = 2^(s cs - m cs): s the row value (FFAST: the raw product Q K^T, sign-flipped for a
  // negative factor) and cs its factor times log2(e) -- one FFMA and one EX2 per score, as
  // FlashAttention-2 (a factor of 0 takes the smallest normal: masked -inf stays -inf)
#if FFAST
  const float fac = {factor};
  const bool flip = fac < 0.f;
  float cs = fabsf(fac) * L2E;
  if (cs == 0.f) cs = 1.17549435e-38f;
  const float mscale = fabsf(fac);        // the row value's max is m * |factor|
#else
  const float cs = L2E, mscale = 1.f;
#endif

  float acc_o[FMT][DT][4];
  // row_x: the running max; row_m: the reference the exponents and sums are taken against (raised
  // to the max only when the max passes it by more than 2^8 -- FlashAttention-4's lazy rescale:
  // p stays <= 256, and O is rescaled on few tiles); row_l: the lane's partial sum
  float row_m[FMT][2], row_x[FMT][2], row_l[FMT][2];
#if FMMASUM
  // the row sums of the rounded P, as P times a column of ones (every column of an m16n8
  // accumulator holds its row's sum: no quad reduction)
  float lacc[FMT][4];
  const uint32_t ONE2 = FBF16 ? 0x3f803f80u : 0x3c003c00u;
#endif
#pragma unroll
  for (int mt = 0; mt < FMT; ++mt) {{
#pragma unroll
    for (int t = 0; t < DT; ++t) acc_o[mt][t][0] = acc_o[mt][t][1] = acc_o[mt][t][2] = acc_o[mt][t][3] = 0.f;
    row_m[mt][0] = row_m[mt][1] = row_x[mt][0] = row_x[mt][1] = NINF;
    row_l[mt][0] = row_l[mt][1] = 0.f;
#if FMMASUM
    lacc[mt][0] = lacc[mt][1] = lacc[mt][2] = lacc[mt][3] = 0.f;
#endif
  }}
  const int g = lane >> 2, tq = lane & 3;
  const int wrow = warp * (FMT * 16);
  // the lanes' ldmatrix addresses (bytes, shared space): Q rows wrow + (lane & 15), chunk bit
  // lane >> 4; K rows (lane >> 4) * 8 + (lane & 7), chunk bit (lane >> 3) & 1; V (.trans) rows
  // ((lane >> 3) & 1) * 8 + (lane & 7), chunk bit lane >> 4
  uint32_t oq[4], ok[4], ov[4];
  {{
    constexpr int mq = (CQ < 8 ? CQ : 8) - 1, mv = (CV < 8 ? CV : 8) - 1;
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);
    kd_fl_swz_lane<CQ>(oq, s0 + (wrow + (lane & 15)) * CQ * 16, (lane >> 4) ^ (lane & mq));
    kd_fl_swz_lane<CQ>(ok, s0 + FBM * FD * 2 + ((lane >> 4) * 8 + (lane & 7)) * CQ * 16,
                       ((lane >> 3) & 1) ^ (lane & mq));
    kd_fl_swz_lane<CV>(ov, s0 + (FBM * FD + FST * FBN * FD) * 2 + (((lane >> 3) & 1) * 8 + (lane & 7)) * CV * 16,
                       (lane >> 4) ^ (lane & mv));
  }}

  int cur = 0, nxt = FST - 1;       // the ring's buffers: this tile's, the one loaded now
  for (int it = 0; it < nblocks; ++it) {{
    const int n0 = it * FBN;
    // tile it + FST - 1 into the buffer tile it - 1 used (every thread is past it: the
    // barrier ending the last iteration), then wait for tile it: all groups but the last
    // FST - 1 complete
    if (it + FST - 1 < nblocks) load_kv(nxt, n0 + (FST - 1) * FBN);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group %0;\n" :: "n"(FST - 1) : "memory");
    __syncthreads();

    // S = Q K^T for this warp's rows and the tile's keys
    const uint32_t kb = cur * (FBN * FD * 2), vb = cur * (FBN * FDV * 2);
    float s[FMT][NT][4];
#pragma unroll
    for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
      for (int t = 0; t < NT; ++t) s[mt][t][0] = s[mt][t][1] = s[mt][t][2] = s[mt][t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < FD / 16; ++kk) {{
      uint32_t a[FMT][4];
#pragma unroll
      for (int mt = 0; mt < FMT; ++mt)
        kd_fl_ldsm(a[mt][0], a[mt][1], a[mt][2], a[mt][3], kd_fl_swz_at<CQ>(oq, mt * 16, kk * 2));
#pragma unroll
      for (int t = 0; t < NT; t += 2) {{
        uint32_t b0, b1, b2, b3;
        kd_fl_ldsm(b0, b1, b2, b3, kb + kd_fl_swz_at<CQ>(ok, t * 8, kk * 2));
#pragma unroll
        for (int mt = 0; mt < FMT; ++mt) {{
          kd_fl_mma<FBF16>(s[mt][t], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
          kd_fl_mma<FBF16>(s[mt][t + 1], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b2, b3);
        }}
      }}
    }}

    // the row values (rows g and g + 8 of each 16-row tile; columns t * 8 + tq * 2 + e)
#if FFAST
    if (flip) {{
#pragma unroll
      for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][t][e] = -s[mt][t][e];
    }}
#else
#pragma unroll
    for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {{
        long long i = (long long)m0 + wrow + mt * 16 + g + hr * 8;
#pragma unroll
        for (int t = 0; t < NT; ++t) {{
          long long j = (long long)n0 + t * 8 + tq * 2;
          s[mt][t][hr * 2] = {name}_score(s[mt][t][hr * 2], i, j{cargs});
          s[mt][t][hr * 2 + 1] = {name}_score(s[mt][t][hr * 2 + 1], i, j + 1{cargs});
        }}
      }}
#endif
    // masks only on the tiles that cross the key count or the causal diagonal: a key column
    // is dead past lim = min(Nk, i + causal_end) - n0 (in 32 bits: clamped to the tile)
    bool edge = n0 + FBN > Nk;
#if FCAUSAL
    edge = edge || ((long long)n0 + FBN - 1 >= (long long)m0 + causal_end);
#endif
    if (edge) {{
#pragma unroll
      for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {{
          long long lim = Nk - n0;
#if FCAUSAL
          {{ long long c = (long long)m0 + wrow + mt * 16 + g + hr * 8 + causal_end - n0;
            if (c < lim) lim = c; }}
#endif
          const int li = lim < 0 ? 0 : lim > FBN ? FBN : (int)lim;
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (t * 8 + tq * 2 + e >= li) s[mt][t][hr * 2 + e] = NINF;
        }}
    }}

    // online softmax: the max once per row and tile (two shuffles across the quad); the reference
    // raised (O and the lane's partial sum rescaled by 2^((m_old - m_new) cs)) only past 2^8;
    // the sum stays per lane (the quad's four partial sums are added once, at the end)
    uint32_t p[FMT][NT / 2][4];
    float al[FMT][2];
    bool resc = false;
#pragma unroll
    for (int mt = 0; mt < FMT; ++mt) {{
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {{
        float mx = row_x[mt][hr];
#pragma unroll
        for (int t = 0; t < NT; ++t) mx = fmaxf(mx, fmaxf(s[mt][t][hr * 2], s[mt][t][hr * 2 + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        row_x[mt][hr] = mx;
        const float mold = row_m[mt][hr];
        // (a row with no key yet keeps -inf: the difference is NaN, not > 8)
        const bool up = (mx - mold) * cs > 8.f;
        const float mref = up ? mx : mold;
        // a row with no key yet (mref = -inf) takes 0: its -inf values give 0, not NaN
        const float ms = (mref == NINF) ? 0.f : mref * cs;
        const float alpha = up ? kd_fl_ex2(fmaf(mold, cs, -ms)) : 1.f;
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) {{
            float pe = kd_fl_ex2(fmaf(s[mt][t][hr * 2 + e], cs, -ms));
            s[mt][t][hr * 2 + e] = pe;
#if !FMMASUM
            sum += pe;
#endif
          }}
        row_m[mt][hr] = mref;
        row_l[mt][hr] = row_l[mt][hr] * alpha + sum;
        al[mt][hr] = alpha;
        resc = resc || up;
      }}
      // the S accumulators of key tiles 2kk, 2kk+1 are P's m16k16 operand
#pragma unroll
      for (int kk = 0; kk < NT / 2; ++kk) {{
        p[mt][kk][0] = kd_fl_pack<FBF16>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        p[mt][kk][1] = kd_fl_pack<FBF16>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        p[mt][kk][2] = kd_fl_pack<FBF16>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        p[mt][kk][3] = kd_fl_pack<FBF16>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }}
    }}
    // the running sums of O rescaled where a row's max grew (skipped by the whole warp when
    // none did: late tiles rarely raise it)
    if (__any_sync(0xffffffffu, resc)) {{
#pragma unroll
      for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
        for (int t = 0; t < DT; ++t) {{
          acc_o[mt][t][0] *= al[mt][0];
          acc_o[mt][t][1] *= al[mt][0];
          acc_o[mt][t][2] *= al[mt][1];
          acc_o[mt][t][3] *= al[mt][1];
        }}
#if FMMASUM
#pragma unroll
      for (int mt = 0; mt < FMT; ++mt) {{
        lacc[mt][0] *= al[mt][0];
        lacc[mt][1] *= al[mt][0];
        lacc[mt][2] *= al[mt][1];
        lacc[mt][3] *= al[mt][1];
      }}
#endif
    }}

    // O += P V
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk) {{
#pragma unroll
      for (int t = 0; t < DT; t += 2) {{
        uint32_t b0, b1, b2, b3;
        kd_fl_ldsm_t(b0, b1, b2, b3, vb + kd_fl_swz_at<CV>(ov, kk * 16, t));
#pragma unroll
        for (int mt = 0; mt < FMT; ++mt) {{
          kd_fl_mma<FBF16>(acc_o[mt][t], p[mt][kk][0], p[mt][kk][1], p[mt][kk][2], p[mt][kk][3], b0, b1);
          kd_fl_mma<FBF16>(acc_o[mt][t + 1], p[mt][kk][0], p[mt][kk][1], p[mt][kk][2], p[mt][kk][3], b2, b3);
        }}
      }}
#if FMMASUM
#pragma unroll
      for (int mt = 0; mt < FMT; ++mt)
        kd_fl_mma<FBF16>(lacc[mt], p[mt][kk][0], p[mt][kk][1], p[mt][kk][2], p[mt][kk][3], ONE2, ONE2);
#endif
    }}
    __syncthreads();
    cur = cur + 1 == FST ? 0 : cur + 1;
    nxt = nxt + 1 == FST ? 0 : nxt + 1;
  }}
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");

  // O / l, stored as the output's 16-bit type (two per 32-bit store where aligned)
  const bool ofast = (((unsigned long long)O & 3ull) == 0) && Dv == FDV && soc == 1
      && ((sob | soh | son) & 1) == 0;
#pragma unroll
  for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {{
      // the sums and O against the row's max (the final expression may read m and l)
      const float mref = row_m[mt][hr], mx = row_x[mt][hr];
      const float f = (mref == mx) ? 1.f : kd_fl_ex2((mref - mx) * cs);
#if FMMASUM
      const float l = lacc[mt][hr * 2] * f, m = mx * mscale;
#else
      float l = row_l[mt][hr] * f, m = mx * mscale;
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
#endif
#pragma unroll
      for (int t = 0; t < DT; ++t) {{
        acc_o[mt][t][hr * 2] *= f;
        acc_o[mt][t][hr * 2 + 1] *= f;
      }}
      int i = m0 + wrow + mt * 16 + g + hr * 8;
      if (i < Nq) {{
        uint16_t* orow = o + (long long)i * son;
        // each pair stored as soon as made (no row of results held: the epilogue's registers)
#pragma unroll
        for (int t = 0; t < DT; ++t) {{
          const uint16_t v0 = {name}_final(acc_o[mt][t][hr * 2], l, m{cargs});
          const uint16_t v1 = {name}_final(acc_o[mt][t][hr * 2 + 1], l, m{cargs});
          if (ofast) {{
            *(uint32_t*)(orow + t * 8 + tq * 2) = (uint32_t)v0 | ((uint32_t)v1 << 16);
          }} else {{
            const long long col = t * 8 + tq * 2;
            if (col < Dv) orow[col * soc] = v0;
            if (col + 1 < Dv) orow[(col + 1) * soc] = v1;
          }}
        }}
      }}
    }}
}}
#undef FD
#undef FDV
#undef FBM
#undef FBN
#undef FNW
#undef FMT
#undef FCAUSAL
#undef FBF16
#undef FFAST
#undef FST
#undef FMMASUM
"""

_WRAPPER = r"""
extern "C" __global__ void __launch_bounds__({threads}) {name}(
    const uint16_t* __restrict__ Q, const uint16_t* __restrict__ K, const uint16_t* __restrict__ V,
    uint16_t* __restrict__ O, int H, int group, int Nq, int Nk,
    long long sqb, long long sqh, long long sqn, long long skb, long long skh, long long skn,
    long long svb, long long svh, long long svn, long long sob, long long soh, long long son,
    float scale, long long causal_end) {{
  extern __shared__ __align__(128) uint16_t kd_fl_smem[];
  {name}_block(Q, K, V, O, kd_fl_smem, {bx}, blockIdx.y, H, group, Nq, Nk, {d}, {dv},
               causal_end, sqb, sqh, sqn, 1, skb, skh, skn, 1, svb, svh, svn, 1, sob, soh, son, 1,
               scale);
}}
"""

#: the row value and the stored value of ``softmax(q k^T * scale) @ v`` in 16-bit inputs:
#: numpy rounds the product to the input type and multiplies in it (scale rounded too)
DEFAULT_SCORE = {False: "kd_fl_rh(kd_fl_rh(acc) * kd_fl_rh(scale))",
                 True: "kd_rbf(kd_rbf(acc) * kd_rbf(scale))"}
DEFAULT_FINAL = {False: "kd_fl_f2h(o / kd_fl_rh(l))", True: "kd_f2bf(o / kd_rbf(l))"}


_FAST = re.compile(r"\bkd_(rh|f2h|h2f)\(")


def fast_rounding(text: str) -> str:
    """``text`` (CUDA from kdsl's expression printer) with its float16 conversions in one
    ``cvt`` each (``kd_fl_*``: no NaN payload rules, a NaN stays a NaN): the row values and
    the stored results run them per element."""
    return _FAST.sub(lambda m: f"kd_fl_{m.group(1)}(", text)


def block_function(cfg: FlashConfig, name: str, score: str, final: str, consts=(),
                   factor: str | None = None) -> str:
    """The ``__device__`` function ``<name>_block`` (with ``<name>_score``/``<name>_final``) that
    computes one CTA's query block; ``consts``: (C type, name) of loop-invariant values the
    ``score`` and ``final`` expressions use (parameters after ``causal_end``).  ``factor``
    (C text of a float), when given, says that ``score`` is the product times ``factor``
    (``float(T(acc) * factor)`` in the user's 16-bit type T; masking aside: the kernel's own
    causal bound does it): the kernel then computes it as FlashAttention-2 does -- the float32
    product, the factor folded into the exponent's one FFMA per score (``2^(acc f log2e -
    m f log2e)``), no 16-bit rounding of the score (closer to the exact result than numpy's
    rounding; the SIMT form does the same).  Needs ``COMMON`` and the prelude
    (``prelude_for``) before it."""
    cfg.check()
    score, final = fast_rounding(score), fast_rounding(final)
    cparams = "".join(f", {t} {c}" for t, c in consts)
    cargs = "".join(f", {c}" for _, c in consts)
    return BLOCK.format(d=cfg.d, dv=cfg.dv, bm=cfg.bm, bn=cfg.bn, nw=cfg.nw, mt=cfg.mt, stages=cfg.stages,
                        mma_sum=int(cfg.mma_sum),
                        causal=int(cfg.causal), bf16=int(cfg.bf16), name=name, score=score,
                        final=final, cparams=cparams, cargs=cargs, fast=int(factor is not None),
                        factor=factor or "0.f")


def source(cfg: FlashConfig, name: str = "kd_flash_fwd", unpaired: bool = False) -> str:
    """A whole CUDA module (prelude included) with one ``__global__`` flash kernel ``name`` for
    ``softmax(q k^T * scale) @ v`` in numpy's 16-bit semantics (the product and the scale
    rounded to the input type; the benchmark's raw kernel).

    Its parameters: ``Q, K, V, O`` (16-bit bits), ``H`` (heads), ``group`` (query heads per kv
    head), ``Nq, Nk``, the batch/head/row strides (elements) of q, k, v, o (the last axis
    contiguous), ``scale`` and ``causal_end`` (key j is visible to row i iff
    ``j < i + causal_end``).  Grid ``(ceil(Nq / bm), B * H)``, ``cfg.threads`` threads,
    ``cfg.smem_bytes`` dynamic shared memory."""
    body = COMMON + block_function(cfg, name, DEFAULT_SCORE[cfg.bf16], DEFAULT_FINAL[cfg.bf16],
                                   (("float", "scale"),), factor=None if unpaired else "scale")
    # causal: the longest rows (most keys) first, as the schedule's call does: no tail of heavy blocks
    bx = "(gridDim.x - 1 - blockIdx.x)" if cfg.causal else "blockIdx.x"
    body += _WRAPPER.format(name=name, threads=cfg.threads, d=cfg.d, dv=cfg.dv, bx=bx)
    return prelude_for(body) + body


def grid(cfg: FlashConfig, batch_heads: int, nq: int) -> tuple:
    """The launch grid of ``cfg`` for ``batch_heads`` (B * H) and ``nq`` query rows."""
    return (-(-nq // cfg.bm), batch_heads, 1)


__all__ = ["COMMON", "FlashConfig", "HEAD_DIMS", "block_function", "grid", "source"]
