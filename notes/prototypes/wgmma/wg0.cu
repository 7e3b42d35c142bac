// wg0.cu -- FALLBACK wgmma GEMM, deliberately simple (correctness first, not speed).
// C[M,N] (f32, row-major) = A[M,K] (f16 bits, row-major) @ B[K,N] (f16 bits, row-major).
// One warpgroup (128 threads) per 64x128 block tile, K step 64, single smem stage,
// NO swizzle ("interleave" core-matrix layout), wgmma.m64n128k16, B N-major (imm-trans-b = 1).
// Requires M % 64 == 0, N % 128 == 0, K % 64 == 0.  Dynamic smem: WG0_SMEM_BYTES (24 KiB + 128).
// WGMMA_N = 128
//
// Shared-memory layout (PTX ISA 9.7.15.5.1.2.1.3 canonical layouts, T = 8 halves = 16 bytes):
//  A, K-major, no swizzle: ((8,m),(T,2k)):((1T,SBO),(1,LBO))
//     core matrix = 8 rows x 8 k (16 B per row, 128 B contiguous);
//     byte(m,k) = (m/8)*1024 + (k/8)*128 + (m%8)*16 + (k%8)*2    -> LBO = 128 (K dir), SBO = 1024 (M dir)
//  B, N-major, no swizzle: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
//     core matrix = 8 k-rows x 8 n (16 B per k-row, 128 B contiguous);
//     byte(k,n) = (n/8)*1024 + (k/8)*128 + (k%8)*16 + (n%8)*2    -> LBO = 128 (K dir), SBO = 1024 (N dir)
//  one k16 step = 2 core matrices along K = +256 B on both start addresses.

typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#ifndef WG0_A_LBO
#define WG0_A_LBO 128
#endif
#ifndef WG0_A_SBO
#define WG0_A_SBO 1024
#endif
#ifndef WG0_B_LBO
#define WG0_B_LBO 128
#endif
#ifndef WG0_B_SBO
#define WG0_B_SBO 1024
#endif

#define WG0_BM 64
#define WG0_BN 128
#define WG0_BK 64
#define WG0_A_BYTES (WG0_BM * WG0_BK * 2)   // 8192
#define WG0_B_BYTES (WG0_BK * WG0_BN * 2)   // 16384
#define WG0_SMEM_BYTES (WG0_A_BYTES + WG0_B_BYTES + 128)

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
// generic-proxy smem writes -> async-proxy (wgmma) reads (PTX ISA: wgmma.fence description)
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// Matrix descriptor (PTX ISA 9.7.15.5.1.2.2): bits 0-13 start>>4, 16-29 LBO>>4, 32-45 SBO>>4,
// 49-51 base offset (0 here), 62-63 swizzle (0 none, 1 128B, 2 64B, 3 32B).
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
// D(64x128, f32 regs) += A(64x16, smem desc) * B(16x128, smem desc); f16 inputs.
// TRANS_B = 0: B K-major; 1: B N-major (PTX ISA 9.7.15.5.1.2, imm-trans-b).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db) {
  asm volatile(
    "{\n"
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
    "%64, %65, 1, 1, 1, 0, %66;\n"
    "}\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
    : "l"(da), "l"(db), "n"(TRANS_B));
}
// END GENERATED wgmma

extern "C" __global__ void __launch_bounds__(128, 1)
wg0_gemm(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C,
         int M, int N, int K) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t sbase = (smem_addr(smem_raw) + 127u) & ~127u;
  const uint32_t sA = sbase, sB = sbase + WG0_A_BYTES;
  const int tid = threadIdx.x;
  const int m0 = blockIdx.y * WG0_BM, n0 = blockIdx.x * WG0_BN;

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;

  for (int k0 = 0; k0 < K; k0 += WG0_BK) {
    // A: 64 rows x 8 granules(16 B) = 512 granules, 4 per thread
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int g = tid + 128 * i, row = g >> 3, c = g & 7;
      uint32_t off = (row >> 3) * 1024 + c * 128 + (row & 7) * 16;
      cp_async16(sA + off, A + (size_t)(m0 + row) * K + k0 + c * 8);
    }
    // B: 64 k-rows x 16 granules = 1024 granules, 8 per thread
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      int g = tid + 128 * i, krow = g >> 4, cn = g & 15;
      uint32_t off = cn * 1024 + (krow >> 3) * 128 + (krow & 7) * 16;
      cp_async16(sB + off, B + (size_t)(k0 + krow) * N + n0 + cn * 8);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();

    fence_regs(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint64_t da = make_desc(sA + kk * 256, WG0_A_LBO, WG0_A_SBO, 0);
      uint64_t db = make_desc(sB + kk * 256, WG0_B_LBO, WG0_B_SBO, 0);
      wgmma_m64n128k16<1>(acc, da, db);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(acc);
    __syncthreads();   // smem is overwritten by the next iteration's copies
  }

  // Accumulator fragment (PTX ISA 9.7.15.5.1.1.1, Figure 149): d[4j+2h+e] holds
  // row = 16*warp + lane/4 + 8*h, col = 8*j + 2*(lane%4) + e.
  const int warp = tid >> 5, lane = tid & 31;
  const int row = m0 + warp * 16 + (lane >> 2);
  const int col = n0 + (lane & 3) * 2;
  float* c0 = C + (size_t)row * N + col;
  float* c1 = c0 + (size_t)8 * N;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    st_f32x2(c0 + 8 * j, acc[4 * j], acc[4 * j + 1]);
    st_f32x2(c1 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
  }
}
