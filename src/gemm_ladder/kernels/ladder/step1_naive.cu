// Step 1 — naive. The baseline every later step is measured against.
// One thread per element of C, fp32 accumulation on the CUDA cores, operands straight from
// global memory. Any shape works. C = A * B^T with A (M x K), B (N x K), C (M x N), all
// row-major.
#include "gl_common.cuh"

extern "C" __global__ void __launch_bounds__(256)
gemm_step1_naive(u16* __restrict__ C, const u16* __restrict__ A, const u16* __restrict__ B,
                 int M, int N, int K) {
  const int n = blockIdx.x * 16 + threadIdx.x % 16;
  const int m = blockIdx.y * 16 + threadIdx.x / 16;
  if (m >= M || n >= N) return;
  const u16* a = A + (long long)m * K;
  const u16* b = B + (long long)n * K;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += to_float(a[k]) * to_float(b[k]);
  C[(long long)m * N + n] = to_elem(acc);
}
