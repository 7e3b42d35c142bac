// wg2.cu -- wgmma GEMM fed by TMA (cp.async.bulk.tensor.2d) + mbarrier, warp-specialized.
// C[M,N] (f32, row-major) = A[M,K] (f16, row-major) @ B[K,N] (f16, row-major).
// 384 threads = 3 warpgroups: WG0 = producer (one thread issues the TMA copies), WG1/WG2 = consumers,
// each owning 64 rows of the 128x256 block tile (4 x wgmma.m64n256k16 per K step of 64).
// WG2_STAGES (4) stages of 48 KiB; full[s] barriers complete on TMA transaction bytes,
// empty[s] barriers get one arrive per consumer warp (8) once its wgmma batch reading s is done.
// Requires M % 128 == 0, N % 256 == 0, K % 64 == 0.  Dynamic smem: WG2_SMEM_BYTES.
// Tensor maps (host, cuTensorMapEncodeTiled, FLOAT16, SWIZZLE_128B, interleave none):
//   tmA: dims {K, M}, strides {2K} bytes, box {64, 128}  -> one 16 KiB SW128 tile per stage
//   tmB: dims {N, K}, strides {2N} bytes, box {64, 64}   -> four 8 KiB SW128 chunks per stage
// Smem layout and descriptors are exactly those of wg1.cu (TMA SWIZZLE_128B writes the same
// Swizzle<3,4,3> pattern the wgmma 128B-swizzle mode reads; every buffer is 1024-byte aligned).
// WGMMA_N = 256

typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

struct __align__(128) TmaDesc { uint64_t opaque[16]; };   // = CUtensorMap (128 bytes)

#ifndef WG2_STAGES
#define WG2_STAGES 4
#endif
#ifndef WG2_GROUP_M
#define WG2_GROUP_M 8
#endif
#define WG2_BM 128
#define WG2_BN 256
#define WG2_BK 64
#define WG2_A_BYTES (WG2_BM * WG2_BK * 2)   // 16384
#define WG2_B_BYTES (WG2_BK * WG2_BN * 2)   // 32768
#define WG2_STAGE_BYTES (WG2_A_BYTES + WG2_B_BYTES)
// stages, then 2*STAGES mbarriers (8 B each), plus 1 KiB for aligning the base to 1024
#define WG2_SMEM_BYTES (WG2_STAGES * WG2_STAGE_BYTES + 2 * WG2_STAGES * 8 + 1024)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  uint32_t r;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo, uint32_t swz) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | ((uint64_t)swz << 62);
}
__device__ __forceinline__ void st_f32x2(float* p, float a, float b) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};" :: "l"(p), "f"(a), "f"(b) : "memory");
}
template <int R> __device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
// mbarrier (PTX ISA 9.7.13.15)
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
// TMA 2D tile load global -> shared, completion counted on an mbarrier (PTX ISA 9.7.9.25.5.1)
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TmaDesc* map, uint32_t bar, int c0, int c1) {
  asm volatile(
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
    :: "r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}

// BEGIN GENERATED wgmma (gen.py)
// D(64x256, f32 regs) += A(64x16, smem desc) * B(16x256, smem desc); f16 inputs.
// TRANS_B = 0: B K-major; 1: B N-major (PTX ISA 9.7.15.5.1.2, imm-trans-b).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db) {
  asm volatile(
    "{\n"
    "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
    "%128, %129, 1, 1, 1, 0, %130;\n"
    "}\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
      "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
      "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
    : "l"(da), "l"(db), "n"(TRANS_B));
}
// END GENERATED wgmma

extern "C" __global__ void __launch_bounds__(384, 1)
wg2_gemm(const __grid_constant__ TmaDesc tmA, const __grid_constant__ TmaDesc tmB, float* __restrict__ C,
         int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t bar_full = sbase + WG2_STAGES * WG2_STAGE_BYTES;   // full[s]  = bar_full + 8s
  const uint32_t bar_empty = bar_full + WG2_STAGES * 8;             // empty[s] = bar_empty + 8s
  const int tid = threadIdx.x;
  const int wg = tid >> 7;

  const int ntn = N / WG2_BN, ntm = M / WG2_BM;
  const int bid = blockIdx.x;
  const int per_group = WG2_GROUP_M * ntn;
  const int group = bid / per_group;
  const int first_m = group * WG2_GROUP_M;
  const int gsz = (ntm - first_m) < WG2_GROUP_M ? (ntm - first_m) : WG2_GROUP_M;
  const int local = bid - group * per_group;
  const int m0 = (first_m + local % gsz) * WG2_BM;
  const int n0 = (local / gsz) * WG2_BN;
  const int KT = K / WG2_BK;

  if (tid == 0) {
    asm volatile("prefetch.tensormap [%0];" :: "l"((uint64_t)&tmA) : "memory");
    asm volatile("prefetch.tensormap [%0];" :: "l"((uint64_t)&tmB) : "memory");
#pragma unroll
    for (int s = 0; s < WG2_STAGES; ++s) {
      mbar_init(bar_full + 8 * s, 1);
      mbar_init(bar_empty + 8 * s, 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // ---------------- producer ----------------
    if (tid == 0) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % WG2_STAGES;
        if (kt >= WG2_STAGES) mbar_wait(bar_empty + 8 * s, ((kt / WG2_STAGES) - 1) & 1);
        const uint32_t full = bar_full + 8 * s;
        mbar_expect_tx(full, WG2_STAGE_BYTES);
        const uint32_t sa = sbase + s * WG2_STAGE_BYTES;
        const int k0 = kt * WG2_BK;
        tma_load_2d(sa, &tmA, full, k0, m0);
#pragma unroll
        for (int c = 0; c < 4; ++c)
          tma_load_2d(sa + WG2_A_BYTES + c * 8192, &tmB, full, n0 + 64 * c, k0);
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  const int cw = wg - 1;   // rows [64cw, 64cw+64) of the tile
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;

  const int lane = tid & 31;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % WG2_STAGES;
    mbar_wait(bar_full + 8 * s, (kt / WG2_STAGES) & 1);
    const uint32_t a_addr = sbase + s * WG2_STAGE_BYTES + cw * (64 * 128);
    const uint32_t b_addr = sbase + s * WG2_STAGE_BYTES + WG2_A_BYTES;
    fence_regs(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t da = make_desc(a_addr + kk * 32, 16, 1024, 1);
      const uint64_t db = make_desc(b_addr + kk * 2048, 8192, 1024, 1);
      wgmma_m64n256k16<1>(acc, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();     // batch kt-1 done -> its stage may be refilled
    fence_regs(acc);
    if (kt > 0 && lane == 0) mbar_arrive(bar_empty + 8 * ((kt - 1) % WG2_STAGES));
  }
  wgmma_wait<0>();
  fence_regs(acc);

  const int warp = (tid >> 5) & 3;
  const int row = m0 + cw * 64 + warp * 16 + (lane >> 2);
  const int col = n0 + (lane & 3) * 2;
  float* c0 = C + (size_t)row * N + col;
  float* c1 = c0 + (size_t)8 * N;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    st_f32x2(c0 + 8 * j, acc[4 * j], acc[4 * j + 1]);
    st_f32x2(c1 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
  }
}
