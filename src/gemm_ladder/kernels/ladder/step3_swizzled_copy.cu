// Step 3 — the best thread copy. Forced move: bank conflicts and narrow loads.
// Same serial structure as step 2, but each thread moves 16 bytes per load, and the tile is
// stored in the 128B-swizzled layout (the one TMA writes and wgmma reads fastest): the
// 16-byte unit u of row r is stored at unit u ^ (r % 8), so the 8 rows a warp writes
// together fall into different banks.
// Shape: M, N multiples of 128, K a multiple of 64.
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_epilogue.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK)
#error "step 3 takes its tile from its Step (steps.py): GL_BM, GL_BN, GL_BK"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK;  // BK = 64 elements: one 128-byte row
static_assert(BM == 128 && BN == 128 && BK == 64, "step 3's copy loops and MMA are written for 128x128x64");

// Copy a ROWS x 64 tile (row stride ld elements) into swizzled shared memory, 16 B a load.
template <int ROWS>
GL_DEVICE void copy_tile_sw128(u16* smem, const u16* gmem, int ld) {
  const int t = threadIdx.x;
#pragma unroll 4
  for (int i = t; i < ROWS * 8; i += 128) {  // 8 units of 16 B per row
    const int r = i / 8, u = i % 8;
    const uint4 v = *reinterpret_cast<const uint4*>(gmem + (long long)r * ld + u * 8);
    *reinterpret_cast<uint4*>(reinterpret_cast<u8*>(smem) + r * 128 + ((u ^ (r % 8)) * 16)) = v;
  }
}

extern "C" __global__ void __launch_bounds__(128, 1)
gemm_step3_swizzled_copy(u16* __restrict__ C, const u16* __restrict__ A,
                         const u16* __restrict__ B, int M, int N, int K) {
  __shared__ alignas(1024) u16 sA[BM * BK];
  __shared__ alignas(1024) u16 sB[BN * BK];
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  float acc[2][BN / 2];
  zero_acc(acc);

  for (int k0 = 0; k0 < K; k0 += BK) {
    copy_tile_sw128<BM>(sA, A + (long long)m0 * K + k0, K);
    copy_tile_sw128<BN>(sB, B + (long long)n0 * K + k0, K);
    fence_proxy_async_smem();
    __syncthreads();

    wgmma_fence();
    mma_ktile_128x128_sw128(acc, sA, sB);
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) store_acc_global<BN>(acc[h], C, N, m0 + 64 * h, n0);
}
