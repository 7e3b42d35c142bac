// wg1.cu -- wgmma GEMM with a cp.async pipeline into 128-byte-swizzled shared tiles.
// C[M,N] (f32, row-major) = A[M,K] (f16 bits, row-major) @ B[K,N] (f16 bits, row-major).
// Block tile 128x256, K step 64, WG1_STAGES (4) smem stages of 48 KiB, 256 threads = 2 warpgroups;
// warpgroup w owns rows [64w, 64w+64) of the tile: 4 x wgmma.m64n256k16 per K step, accumulators
// (128 f32 per thread) in registers, f32 epilogue straight from registers.
// All 256 threads issue the cp.async copies (no producer warpgroup).
// Requires M % 128 == 0, N % 256 == 0, K % 64 == 0.  Dynamic smem: WG1_SMEM_BYTES (192 KiB + 1 KiB).
// WGMMA_N = 256
//
// Shared-memory layouts (PTX ISA 9.7.15.5.1.2: "Shared Memory Matrix Layout", canonical layouts
// 9.7.15.5.1.2.1.3, descriptor 9.7.15.5.1.2.2).  128B swizzle = Swizzle<3,4,3> on byte addresses:
// byte-address bits [4:6] (16-byte chunk within a 128-byte line) ^= bits [7:9] (line index mod 8);
// every stage buffer is 1024-byte aligned, so the matrix base offset field is 0.
//  A tile (128 x 64, K-major, SW128): line r (= tile row) at r*128; element (r,k) at
//     r*128 + (((k/8) ^ (r%8)) * 16) + (k%8)*2.  Canonical ((8,m),(T,2k)):((8T,SBO),(1,T)):
//     SBO = 1024 (8 rows), LBO unused for swizzled K-major (encoded 1).  Warpgroup w: start + w*8192;
//     k16 step kk: start + kk*32 (inside the 128-byte line; hardware applies the XOR on the address).
//  B tile (64 x 256, N-major, SW128): 4 column chunks of 64 n (one 128-byte line per k);
//     element (k,n) at (n/64)*8192 + k*128 + ((((n%64)/8) ^ (k%8)) * 16) + (n%8)*2.
//     Canonical ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): LBO = 8192 (next 64-wide N chunk),
//     SBO = 1024 (next 8 k-lines).  k16 step kk: start + kk*2048.  imm-trans-b = 1.
// Pipeline: prefetch distance STAGES-2 so that one wgmma batch stays in flight
// (wgmma.wait_group 1) while the copies for a later stage are issued.

typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#ifndef WG1_STAGES
#define WG1_STAGES 4
#endif
// descriptor fields (bytes); overridable with -D for diagnosis
#ifndef WG1_A_LBO
#define WG1_A_LBO 16
#endif
#ifndef WG1_A_SBO
#define WG1_A_SBO 1024
#endif
#ifndef WG1_B_LBO
#define WG1_B_LBO 8192
#endif
#ifndef WG1_B_SBO
#define WG1_B_SBO 1024
#endif
// 1: fence.proxy.async after the cp.async wait (what the PTX ISA requires before wgmma reads
// generic-proxy writes; compiles to MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S).  0: timing experiment only.
#ifndef WG1_PROXY_FENCE
#define WG1_PROXY_FENCE 1
#endif
#ifndef WG1_GROUP_M
#define WG1_GROUP_M 8
#endif

#define WG1_BM 128
#define WG1_BN 256
#define WG1_BK 64
#define WG1_A_BYTES (WG1_BM * WG1_BK * 2)   // 16384
#define WG1_B_BYTES (WG1_BK * WG1_BN * 2)   // 32768
#define WG1_STAGE_BYTES (WG1_A_BYTES + WG1_B_BYTES)
#define WG1_SMEM_BYTES (WG1_STAGES * WG1_STAGE_BYTES + 1024)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  uint32_t r;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ void cp_async16(uint32_t saddr, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(saddr), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
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

extern "C" __global__ void __launch_bounds__(256, 1)
wg1_gemm(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C,
         int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const int tid = threadIdx.x;
  const int wg = tid >> 7;

  // grouped raster: WG1_GROUP_M consecutive M tiles sweep the N tiles together (L2 reuse)
  const int ntn = N / WG1_BN, ntm = M / WG1_BM;
  const int bid = blockIdx.x;
  const int per_group = WG1_GROUP_M * ntn;
  const int group = bid / per_group;
  const int first_m = group * WG1_GROUP_M;
  const int gsz = (ntm - first_m) < WG1_GROUP_M ? (ntm - first_m) : WG1_GROUP_M;
  const int local = bid - group * per_group;
  const int m0 = (first_m + local % gsz) * WG1_BM;
  const int n0 = (local / gsz) * WG1_BN;

  // copy assignment.  A: 128 rows x 8 chunks(16 B) = 1024 chunks, 4 per thread (rows +32 apart).
  const int ar = tid >> 3, ac = tid & 7;
  const uint16_t* gA = A + (size_t)(m0 + ar) * K + ac * 8;
  const uint32_t sA_off = ar * 128 + ((ac ^ (ar & 7)) << 4);
  // B: 64 k-rows x 32 chunks = 2048 chunks, 8 per thread (k-rows +8 apart).
  const int br = tid >> 5, bc = tid & 31;
  const uint16_t* gB = B + (size_t)br * N + n0 + bc * 8;
  const uint32_t sB_off = (bc >> 3) * 8192 + br * 128 + (((bc & 7) ^ (br & 7)) << 4);
  const size_t a_step = (size_t)32 * K, b_step = (size_t)8 * N;

  const int KT = K / WG1_BK;
  auto load_stage = [&](int s, int kt) {
    const uint32_t sa = sbase + s * WG1_STAGE_BYTES + sA_off;
    const uint16_t* ga = gA + kt * WG1_BK;
#pragma unroll
    for (int i = 0; i < 4; ++i) cp_async16(sa + i * 4096, ga + i * a_step);
    const uint32_t sb = sbase + s * WG1_STAGE_BYTES + WG1_A_BYTES + sB_off;
    const uint16_t* gb = gB + (size_t)kt * WG1_BK * N;
#pragma unroll
    for (int i = 0; i < 8; ++i) cp_async16(sb + i * 1024, gb + i * b_step);
  };

#ifndef WG1_KDSL
#define WG1_KDSL 0
#endif
#if WG1_KDSL
  // the structure kdsl's pipeline(stages) produces: prefetch distance STAGES-1, copies issued
  // first, wait, barrier, the step's wgmma batch waited to completion, barrier
#pragma unroll
  for (int s = 0; s < WG1_STAGES - 1; ++s) {
    if (s < KT) load_stage(s, s);
    cp_async_commit();
  }
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  for (int kt = 0; kt < KT; ++kt) {
    {
      const int pf = kt + WG1_STAGES - 1;
      if (pf < KT) load_stage(pf % WG1_STAGES, pf);
      cp_async_commit();
    }
    cp_async_wait<WG1_STAGES - 1>();
    fence_proxy_async();
    __syncthreads();
    const int s = kt % WG1_STAGES;
    const uint32_t a_addr = sbase + s * WG1_STAGE_BYTES + wg * (64 * 128);
    const uint32_t b_addr = sbase + s * WG1_STAGE_BYTES + WG1_A_BYTES;
    fence_regs(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t da = make_desc(a_addr + kk * 32, WG1_A_LBO, WG1_A_SBO, 1);
      const uint64_t db = make_desc(b_addr + kk * 2048, WG1_B_LBO, WG1_B_SBO, 1);
      wgmma_m64n256k16<1>(acc, da, db);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(acc);
    __syncthreads();
  }
#else
#pragma unroll
  for (int s = 0; s < WG1_STAGES - 2; ++s) {
    if (s < KT) load_stage(s, s);
    cp_async_commit();
  }

  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<WG1_STAGES - 3>();  // this thread's copies of stage kt have landed
#if WG1_PROXY_FENCE
    fence_proxy_async();               // make them visible to the async proxy (wgmma)
#endif
    __syncthreads();                   // everyone's copies of stage kt; wgmma kt-2 done in both WGs
    {
      const int pf = kt + WG1_STAGES - 2;  // reuses the buffer read by wgmma batch kt-2
      if (pf < KT) load_stage(pf % WG1_STAGES, pf);
      cp_async_commit();
    }
    const int s = kt % WG1_STAGES;
    const uint32_t a_addr = sbase + s * WG1_STAGE_BYTES + wg * (64 * 128);
    const uint32_t b_addr = sbase + s * WG1_STAGE_BYTES + WG1_A_BYTES;
    fence_regs(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t da = make_desc(a_addr + kk * 32, WG1_A_LBO, WG1_A_SBO, 1);
      const uint64_t db = make_desc(b_addr + kk * 2048, WG1_B_LBO, WG1_B_SBO, 1);
      wgmma_m64n256k16<1>(acc, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();                   // batch kt-1 complete (batch kt stays in flight)
    fence_regs(acc);
  }
  wgmma_wait<0>();
  fence_regs(acc);

#endif
  // Accumulator fragment (PTX ISA 9.7.15.5.1.1.1, Figure 149): d[4j+2h+e] holds
  // row = 16*warp + lane/4 + 8*h, col = 8*j + 2*(lane%4) + e   (warp within the warpgroup).
  const int warp = (tid >> 5) & 3, lane = tid & 31;
  const int row = m0 + wg * 64 + warp * 16 + (lane >> 2);
  const int col = n0 + (lane & 3) * 2;
  float* c0 = C + (size_t)row * N + col;
  float* c1 = c0 + (size_t)8 * N;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    st_f32x2(c0 + 8 * j, acc[4 * j], acc[4 * j + 1]);
    st_f32x2(c1 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
  }
}
