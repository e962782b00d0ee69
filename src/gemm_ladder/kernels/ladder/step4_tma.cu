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

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DYNAMIC_SMEM)
#error "step 4 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DYNAMIC_SMEM"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK;
static_assert(BM == 128 && BK == 64 && BN == 128, "step 4's MMA and epilogue are written for 128x128x64");

struct SharedStorage {
  u16 A[BM * BK];   // 16 KB, 1024-aligned
  u16 B[BN * BK];   // 16 KB
  u16 C[BM * BN];   // 32 KB staging: two 128x64 swizzled chunks
  LockstepPipeline<1> ring;  // "the k-tile has landed": a ring of one stage
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(128, 1)
gemm_step4_tma(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
               const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const bool leader = threadIdx.x == 0;
  Tracer tr(ROLE_TEAM, 0, leader);

  if (leader) {
    s.ring.init();
    fence_barrier_init();
  }
  __syncthreads();
  const auto ring = s.ring.bind(tr, (BM + BN) * BK * 2);

  float acc[2][BN / 2];
  zero_acc(acc);

  auto st = PipelineState<1>::consumer();  // one buffer: the phase bit flips every k-tile (load and wait alike)
  const int k_tiles = ceil_div(K, BK);
  for (int kt = 0; kt < k_tiles; ++kt) {
    if (leader) {
      ring.producer_acquire(st);
      tma_load_2d(s.A, &tmap_a, ring.producer_barrier(st), kt * BK, m0);
      tma_load_2d(s.B, &tmap_b, ring.producer_barrier(st), kt * BK, n0);
      tr.event(EV_LOAD_ISSUE, BAR_FULL, 0, st.phase, kt);
    }
    ring.consumer_wait(st, kt);
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
