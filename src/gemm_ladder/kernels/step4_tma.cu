// Step 4 — TMA async. Forced move: the thread-copy tax. 128 threads no longer compute
// addresses and move bytes: one elected thread hands each tile to the copy engine
// (cp.async.bulk.tensor), which writes it 128B-swizzled and credits its bytes to an
// mbarrier (arrive.expect_tx). Everyone waits on the barrier's phase bit (try_wait.parity),
// flipping the bit each k-tile. The result leaves through shared memory and a TMA store.
// Still serial: load, then compute, then load. Shape: any M, N; K and N multiples of 8
// (TMA needs 16-byte row strides); partial tiles are zero-filled / clipped by TMA.
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_epilogue.cuh"
#include "gl_pipeline.cuh"
#include "gl_scheduler.cuh"

#define BM 128
#define BN 128
#define BK 64

struct SharedStorage {
  u16 A[BM * BK];   // 16 KB, 1024-aligned
  u16 B[BN * BK];   // 16 KB
  u16 C[BM * BN];   // 32 KB staging: two 128x64 swizzled chunks
  u64 full;         // "the k-tile has landed"
};

extern "C" __global__ void __launch_bounds__(128, 1)
gemm_step4_tma(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
               const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const bool leader = threadIdx.x == 0;
  Tracer tr(ROLE_TEAM, 0, leader);

  if (leader) {
    mbar_init(&s.full, 1);
    fence_barrier_init();
  }
  __syncthreads();

  float acc[2][BN / 2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[h][i] = 0.f;

  PipelineState<1> st(0);  // one buffer: the phase bit flips every k-tile
  const int k_tiles = ceil_div(K, BK);
  for (int kt = 0; kt < k_tiles; ++kt) {
    if (leader) {
      mbar_arrive_expect_tx(&s.full, GL_EXPECT_TX((BM + BN) * BK * 2));
      tma_load_2d(s.A, &tmap_a, &s.full, kt * BK, m0);
      tma_load_2d(s.B, &tmap_b, &s.full, kt * BK, n0);
      tr.event(EV_LOAD_ISSUE, BAR_FULL, 0, st.phase, kt);
    }
    wait_stage(tr, &s.full, st, BAR_FULL, kt);
    st.advance();

    wgmma_fence();
    mma_ktile_128x128_sw128(acc, s.A, s.B);
    wgmma_commit();
    tr.event(EV_MMA_ISSUE, 0, 0, 0, kt);
    wgmma_wait<0>();
    tr.event(EV_MMA_DONE, 0, 0, 0, kt);
    __syncthreads();  // all warps are done reading before the buffer is refilled
  }

  tr.event(EV_EPI_BEGIN);
  stage_tile_128<BN>(acc, s.C);
  fence_proxy_async_smem();
  __syncthreads();
  tr.event(EV_EPI_END);
  if (leader) {
    tma_store_tile<BM, BN>(&tmap_c, s.C, n0, m0);
    tma_store_commit();
    tr.event(EV_STORE_ISSUE);
    tma_store_wait_read<0>();  // shared memory must outlive the copy engine's reads
    tr.event(EV_STORE_DONE);
  }
  tr.finish();
}
