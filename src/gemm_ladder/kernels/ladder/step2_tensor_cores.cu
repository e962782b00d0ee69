// Step 2 — tensor cores. Forced move: the scalar FMA. The CUDA cores of step 1 do one
// multiply-add per instruction; a wgmma does 64x128x16 of them per warpgroup.
//
// One warpgroup computes a 128x128 tile of C. Per 64-wide k-tile the threads copy A and B
// element by element into shared memory, in wgmma's plain ("interleaved") K-major layout of
// 8x8 core matrices, then issue the wgmmas and wait for them at once (synchronous).
// Shape: M, N multiples of 128, K a multiple of 64.
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_epilogue.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK)
#error "step 2 takes its tile from its Step (steps.py): GL_BM, GL_BN, GL_BK"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK;  // BK = 64 elements: one 128-byte row
static_assert(BM == 128 && BN == 128 && BK == 64, "step 2's copy loops and MMA are written for 128x128x64");

// Element (r, k) of a K-major tile in core-matrix layout: core matrix (r/8, k/8) is 128
// contiguous bytes; K-adjacent core matrices are 128 B apart (LBO), row groups 1024 B (SBO).
GL_DEVICE int interleaved_index(int r, int k) {
  return ((r / 8) * (BK / 8) + k / 8) * 64 + (r % 8) * 8 + (k % 8);
}

extern "C" __global__ void __launch_bounds__(128, 1)
gemm_step2_tensor_cores(u16* __restrict__ C, const u16* __restrict__ A,
                        const u16* __restrict__ B, int M, int N, int K) {
  __shared__ alignas(1024) u16 sA[BM * BK];
  __shared__ alignas(1024) u16 sB[BN * BK];
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, t = threadIdx.x;

  float acc[2][BN / 2];  // two m64 halves of the 128-row tile
  zero_acc(acc);

  for (int k0 = 0; k0 < K; k0 += BK) {
    // Thread copy, one 2-byte element at a time (consecutive threads: consecutive k).
    for (int i = t; i < BM * BK; i += 128) {
      const int r = i / BK, k = i % BK;
      sA[interleaved_index(r, k)] = A[(long long)(m0 + r) * K + k0 + k];
      sB[interleaved_index(r, k)] = B[(long long)(n0 + r) * K + k0 + k];
    }
    fence_proxy_async_smem();  // ordinary stores -> visible to wgmma's async reads
    __syncthreads();

    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {  // 16-wide k slices = 2 core matrices = 256 B
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u64 da = desc_interleaved(sA + h * 64 * BK + kk * 128, 128, 1024);
        const u64 db = desc_interleaved(sB + kk * 128, 128, 1024);
        wgmma_m64n128k16(acc[h], da, db, 1);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();  // synchronous: the tensor core result is needed before the next copy
    __syncthreads();
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) store_acc_global<BN>(acc[h], C, N, m0 + 64 * h, n0);
}
