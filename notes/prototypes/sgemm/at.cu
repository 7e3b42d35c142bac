// Hand SGEMM with a k-major (transposed) A tile in shared memory: the layout question of
// issue 11's SGEMM target.  Same blocking as kdsl's default recipe: 128x128x8 per block,
// 16x16 threads, each 2x2 virtual threads of 4x4 outputs, double-buffered with cp.async.
// C = A @ B, row-major, M % 128 == N % 128 == K % 8 == 0 (a prototype: no edges).
// MINB: the second __launch_bounds__ argument; UNROLL: unroll the 8-step k loop.
#ifndef MINB
#define MINB 1
#endif
__device__ __forceinline__ void cp4(float* s, const float* g) {
  unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(a), "l"(g) : "memory");
}
__device__ __forceinline__ void cp16(float* s, const float* g) {
  unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(a), "l"(g) : "memory");
}
#ifndef TM
#define TM 8          // rows of C per thread (two virtual threads of TM / 2); 8 or 16
#endif
#define BM (16 * TM)
#define HM (BM / 2)
#define PITCH 132
#define APITCH (BM + 4)
extern "C" __global__ void __launch_bounds__(256, MINB)
sgemm_at(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
         int M, int N, int K) {
  __shared__ __align__(16) float As[2][8][APITCH];
  __shared__ __align__(16) float Bs[2][8][PITCH];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * 128;
  const float* Ab = A + (long long)bm * K;
  const float* Bb = B + bn;
  float acc[TM][8];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
  const int nk = K / 8;
  // A: element e = tid + 256 j: k = e % 8, m = e / 8 (banks (4k + m) % 32: conflict-free)
  const int ak = tid % 8, am = tid / 8;
  // B: one 16-byte vector per thread: row tid / 32, columns (tid % 32) * 4
  const int br = tid / 32, bc = (tid % 32) * 4;
#define LOAD(buf, kt)                                                              \
  {                                                                                \
    _Pragma("unroll") for (int j = 0; j < BM / 32; ++j)                                  \
      cp4(&As[buf][ak][am + 32 * j], Ab + (long long)(am + 32 * j) * K + (kt) * 8 + ak); \
    cp16(&Bs[buf][br][bc], Bb + (long long)((kt) * 8 + br) * N + bc);              \
    asm volatile("cp.async.commit_group;\n" ::: "memory");                        \
  }
  LOAD(0, 0);
  for (int kt = 0; kt < nk; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < nk) LOAD(cur ^ 1, kt + 1) else asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncthreads();
#ifdef UNROLL
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int k = 0; k < 8; ++k) {
      float a[TM], b[8];
#pragma unroll
      for (int q = 0; q < TM / 8; ++q) {
        *(float4*)&a[4 * q] = *(const float4*)&As[cur][k][ty * (TM / 2) + 4 * q];
        *(float4*)&a[TM / 2 + 4 * q] = *(const float4*)&As[cur][k][HM + ty * (TM / 2) + 4 * q];
      }
      *(float4*)&b[0] = *(const float4*)&Bs[cur][k][tx * 4];
      *(float4*)&b[4] = *(const float4*)&Bs[cur][k][64 + tx * 4];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = bm + (i < TM / 2 ? ty * (TM / 2) + i : HM + ty * (TM / 2) + i - TM / 2);
    *(float4*)&C[(long long)m * N + bn + tx * 4] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *(float4*)&C[(long long)m * N + bn + 64 + tx * 4] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}
