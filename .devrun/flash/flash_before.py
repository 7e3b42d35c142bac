# kdsl_cuda/codegen/flash.py as of 4f91041 (before this session): the "before" baseline of bench.py
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

from kdsl_cuda.codegen.prelude import prelude_for

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

    @property
    def mt(self) -> int:
        """16-row tiles per warp."""
        return self.bm // (16 * self.nw)

    @property
    def threads(self) -> int:
        return 32 * self.nw

    @property
    def smem_bytes(self) -> int:
        return 2 * (self.bm * self.d + 2 * self.bn * self.d + 2 * self.bn * self.dv)

    def check(self) -> None:
        """Raise ValueError when the kernel cannot tile this shape."""
        if self.d not in HEAD_DIMS or self.dv not in HEAD_DIMS:
            raise ValueError(f"head dims {self.d}/{self.dv}: the flash kernel tiles {HEAD_DIMS}")
        if self.bm % (16 * self.nw) or self.mt < 1 or self.bn % 16 or self.bn < 16:
            raise ValueError(f"tiles bm={self.bm} bn={self.bn} nw={self.nw}")


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
#define FPAIR {pair}

__device__ __forceinline__ float {name}_score(float acc, long long i, long long j{cparams}) {{
  return {score};
}}
__device__ __forceinline__ uint16_t {name}_final(float o, float l, float m{cparams}) {{
  return {final};
}}
#if FPAIR
// two row values at once: round both products to the 16-bit type, multiply by the factor in
// it (one rounding, as numpy's), back to float
__device__ __forceinline__ void {name}_pair(float a0, float a1, float& x0, float& x1{cparams}) {{
  const float f = {factor};
  uint32_t h = kd_fl_pack<FBF16>(a0, a1), c = kd_fl_pack<FBF16>(f, f), r;
#if FBF16
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(h), "r"(c));
  x0 = __uint_as_float(r << 16);
  x1 = __uint_as_float(r & 0xffff0000u);
#else
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(h), "r"(c));
  x0 = kd_fl_h2f((uint16_t)(r & 0xffffu));
  x1 = kd_fl_h2f((uint16_t)(r >> 16));
#endif
}}
#endif
// one CTA's query block (blockIdx bx) of batch x head by: Q K^T, online softmax, P V, O / l
__device__ __forceinline__ void {name}_block(
    const uint16_t* __restrict__ Q, const uint16_t* __restrict__ K, const uint16_t* __restrict__ V,
    uint16_t* __restrict__ O, uint16_t* smem, long long bx, long long by,
    long long H, long long group, long long Nq, long long Nk, long long Dq, long long Dv,
    long long causal_end,
    long long sqb, long long sqh, long long sqn, long long sqc, long long skb, long long skh,
    long long skn, long long skc, long long svb, long long svh, long long svn, long long svc,
    long long sob, long long soh, long long son, long long soc{cparams}) {{
  constexpr int CQ = FD / 8, CV = FDV / 8, NT = FBN / 8, DT = FDV / 8;
  uint16_t* sQ = smem;
  uint16_t* sK = sQ + FBM * FD;
  uint16_t* sV = sK + 2 * FBN * FD;
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
  kd_fl_load<CQ>(sQ, q, sqn, sqc, m0, Nq, Dq, FBM, vec, tid, FNW * 32);
  auto load_kv = [&](int buf, int n0) {{
    kd_fl_load<CQ>(sK + buf * FBN * FD, k, skn, skc, n0, Nk, Dq, FBN, vec, tid, FNW * 32);
    kd_fl_load<CV>(sV + buf * FBN * FDV, v, svn, svc, n0, Nk, Dv, FBN, vec, tid, FNW * 32);
  }};
  if (nblocks > 0) load_kv(0, 0);
  asm volatile("cp.async.commit_group;\n" ::: "memory");

  float acc_o[FMT][DT][4];
  float row_m[FMT][2], row_l[FMT][2];
#pragma unroll
  for (int mt = 0; mt < FMT; ++mt) {{
#pragma unroll
    for (int t = 0; t < DT; ++t) acc_o[mt][t][0] = acc_o[mt][t][1] = acc_o[mt][t][2] = acc_o[mt][t][3] = 0.f;
    row_m[mt][0] = row_m[mt][1] = -__int_as_float(0x7f800000);
    row_l[mt][0] = row_l[mt][1] = 0.f;
  }}
  const int g = lane >> 2, tq = lane & 3;
  const int wrow = warp * (FMT * 16);

  for (int it = 0; it < nblocks; ++it) {{
    const int cur = it & 1, n0 = it * FBN;
    if (it + 1 < nblocks) {{
      load_kv(cur ^ 1, n0 + FBN);
      asm volatile("cp.async.commit_group;\n" ::: "memory");
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    }} else {{
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }}
    __syncthreads();
    const uint16_t* tK = sK + cur * FBN * FD;
    const uint16_t* tV = sV + cur * FBN * FDV;

    // S = Q K^T for this warp's rows and the tile's keys
    float s[FMT][NT][4];
#pragma unroll
    for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
      for (int t = 0; t < NT; ++t) s[mt][t][0] = s[mt][t][1] = s[mt][t][2] = s[mt][t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < FD / 16; ++kk) {{
      uint32_t a[FMT][4];
#pragma unroll
      for (int mt = 0; mt < FMT; ++mt) {{
        int r = wrow + mt * 16 + (lane & 15), c = kk * 2 + (lane >> 4);
        kd_ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], sQ + kd_fl_swz<CQ>(r, c));
      }}
#pragma unroll
      for (int t = 0; t < NT; t += 2) {{
        int mat = lane >> 3;
        int r = t * 8 + (mat >> 1) * 8 + (lane & 7), c = kk * 2 + (mat & 1);
        uint32_t b0, b1, b2, b3;
        kd_ldsm_x4(b0, b1, b2, b3, tK + kd_fl_swz<CQ>(r, c));
#pragma unroll
        for (int mt = 0; mt < FMT; ++mt) {{
          kd_fl_mma<FBF16>(s[mt][t], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
          kd_fl_mma<FBF16>(s[mt][t + 1], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b2, b3);
        }}
      }}
    }}

    // row values, mask, online softmax (rows g and g + 8 of each 16-row tile)
    bool edge = n0 + FBN > Nk;
#if FCAUSAL
    edge = edge || ((long long)n0 + FBN - 1 >= (long long)m0 + causal_end);
#endif
    uint32_t p[FMT][NT / 2][4];
    float al[FMT][2];
    bool resc = false;
#pragma unroll
    for (int mt = 0; mt < FMT; ++mt) {{
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {{
        long long i = (long long)m0 + wrow + mt * 16 + g + hr * 8;
        float mx = row_m[mt][hr];
#pragma unroll
        for (int t = 0; t < NT; ++t) {{
          long long j = (long long)n0 + t * 8 + tq * 2;
          float x0, x1;
#if FPAIR
          {name}_pair(s[mt][t][hr * 2], s[mt][t][hr * 2 + 1], x0, x1{cargs});
#else
          x0 = {name}_score(s[mt][t][hr * 2], i, j{cargs});
          x1 = {name}_score(s[mt][t][hr * 2 + 1], i, j + 1{cargs});
#endif
          if (edge) {{
            bool dead0 = j >= Nk, dead1 = j + 1 >= Nk;
#if FCAUSAL
            dead0 = dead0 || j >= i + causal_end;
            dead1 = dead1 || j + 1 >= i + causal_end;
#endif
            if (dead0) x0 = -__int_as_float(0x7f800000);
            if (dead1) x1 = -__int_as_float(0x7f800000);
          }}
          s[mt][t][hr * 2] = x0;
          s[mt][t][hr * 2 + 1] = x1;
          mx = fmaxf(mx, fmaxf(x0, x1));
        }}
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mold = row_m[mt][hr];
        // exp(x - mx) = 2^(x log2e - mx log2e): one FFMA and one EX2 per element; a row with
        // no key yet (mx = -inf) takes 0 for mx: its -inf values give 0, not NaN
        const float ms = (mx == -__int_as_float(0x7f800000)) ? 0.f : mx * 1.4426950408889634f;
        const float alpha = (mold == mx) ? 1.f : kd_fl_ex2(fmaf(mold, 1.4426950408889634f, -ms));
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) {{
            float pe = kd_fl_ex2(fmaf(s[mt][t][hr * 2 + e], 1.4426950408889634f, -ms));
            s[mt][t][hr * 2 + e] = pe;
            sum += pe;
          }}
        row_m[mt][hr] = mx;
        row_l[mt][hr] = row_l[mt][hr] * alpha + sum;
        al[mt][hr] = alpha;
        resc = resc || alpha != 1.f;
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
    }}

    // O += P V
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk) {{
#pragma unroll
      for (int t = 0; t < DT; t += 2) {{
        int mat = lane >> 3;
        int r = kk * 16 + (mat & 1) * 8 + (lane & 7), c = t + (mat >> 1);
        uint32_t b0, b1, b2, b3;
        kd_ldsm_x4_t(b0, b1, b2, b3, tV + kd_fl_swz<CV>(r, c));
#pragma unroll
        for (int mt = 0; mt < FMT; ++mt) {{
          kd_fl_mma<FBF16>(acc_o[mt][t], p[mt][kk][0], p[mt][kk][1], p[mt][kk][2], p[mt][kk][3], b0, b1);
          kd_fl_mma<FBF16>(acc_o[mt][t + 1], p[mt][kk][0], p[mt][kk][1], p[mt][kk][2], p[mt][kk][3], b2, b3);
        }}
      }}
    }}
    __syncthreads();
  }}

  // O / l, stored as the output's 16-bit type (two per 32-bit store where aligned)
  const bool ofast = (((unsigned long long)O & 3ull) == 0) && Dv == FDV && soc == 1
      && ((sob | soh | son) & 1) == 0;
#pragma unroll
  for (int mt = 0; mt < FMT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {{
      float l = row_l[mt][hr], m = row_m[mt][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      int i = m0 + wrow + mt * 16 + g + hr * 8;
      if (i < Nq) {{
        uint16_t* orow = o + (long long)i * son;
        uint16_t val[DT][2];
#pragma unroll
        for (int t = 0; t < DT; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) val[t][e] = {name}_final(acc_o[mt][t][hr * 2 + e], l, m{cargs});
        if (ofast) {{
#pragma unroll
          for (int t = 0; t < DT; ++t)
            *(uint32_t*)(orow + t * 8 + tq * 2) = (uint32_t)val[t][0] | ((uint32_t)val[t][1] << 16);
        }} else {{
#pragma unroll
          for (int t = 0; t < DT; ++t)
#pragma unroll
            for (int e = 0; e < 2; ++e) {{
              long long col = t * 8 + tq * 2 + e;
              if (col < Dv) orow[col * soc] = val[t][e];
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
#undef FPAIR
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
    (C text of a float holding a 16-bit value), when given, says that ``score`` is
    ``float(T(acc) * factor)`` in the input type T (masking aside: the kernel's own causal
    bound does it): row values are then made two at a time (``mul.rn.f16x2``/``bf16x2``).
    Needs ``COMMON`` and the prelude (``prelude_for``) before it."""
    cfg.check()
    score, final = fast_rounding(score), fast_rounding(final)
    cparams = "".join(f", {t} {c}" for t, c in consts)
    cargs = "".join(f", {c}" for _, c in consts)
    return BLOCK.format(d=cfg.d, dv=cfg.dv, bm=cfg.bm, bn=cfg.bn, nw=cfg.nw, mt=cfg.mt,
                        causal=int(cfg.causal), bf16=int(cfg.bf16), name=name, score=score,
                        final=final, cparams=cparams, cargs=cargs, pair=int(factor is not None),
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
    # (bench baseline: causal blocks in the schedule's order, longest rows first, as the new one)
    bx = "(gridDim.x - 1 - blockIdx.x)" if cfg.causal else "blockIdx.x"
    body += _WRAPPER.format(name=name, threads=cfg.threads, d=cfg.d, dv=cfg.dv, bx=bx)
    return prelude_for(body) + body


def grid(cfg: FlashConfig, batch_heads: int, nq: int) -> tuple:
    """The launch grid of ``cfg`` for ``batch_heads`` (B * H) and ``nq`` query rows."""
    return (-(-nq // cfg.bm), batch_heads, 1)


__all__ = ["COMMON", "FlashConfig", "HEAD_DIMS", "block_function", "grid", "source"]
