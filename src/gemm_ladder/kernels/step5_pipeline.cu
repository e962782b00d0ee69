// Step 5 — software pipeline. Forced move: load latency on the critical path.
// Step 4 waited for every k-tile right after asking for it. Now a ring of DEPTH shared
// buffers, each with its own "full" mbarrier, lets the copy engine run DEPTH-1 k-tiles
// ahead; wgmma runs asynchronously and wait_group(1) retires only the previous k-tile, so
// the next tile's math is queued while the previous one completes. Still one team of 128
// threads doing everything in turn (lockstep). Shape: as step 4.
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_epilogue.cuh"
#include "gl_pipeline.cuh"
#include "gl_scheduler.cuh"

#define BM 128
#define BN 128
#define BK 64
#ifndef GL_DEPTH
#define GL_DEPTH 4
#endif
#define STAGE_BYTES ((BM + BN) * BK * 2)

struct SharedStorage {
  u16 A[GL_DEPTH][BM * BK];
  u16 B[GL_DEPTH][BN * BK];
  u16 C[BM * BN];
  u64 full[GL_DEPTH];  // one per stage: "k-tile landed in this buffer"
};

GL_DEVICE void issue_load(SharedStorage& s, const CUtensorMap* ta, const CUtensorMap* tb,
                          Tracer& tr, int kt, int m0, int n0) {
  const int stage = kt % GL_DEPTH;
  mbar_arrive_expect_tx(&s.full[stage], GL_EXPECT_TX(STAGE_BYTES));
  tma_load_2d(s.A[stage], ta, &s.full[stage], kt * BK, m0);
  tma_load_2d(s.B[stage], tb, &s.full[stage], kt * BK, n0);
  tr.event(EV_LOAD_ISSUE, BAR_FULL, stage, (kt / GL_DEPTH) & 1, kt);
}

extern "C" __global__ void __launch_bounds__(128, 1)
gemm_step5_pipeline(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                    const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const bool leader = threadIdx.x == 0;
  Tracer tr(ROLE_TEAM, 0, leader);

  if (leader) {
    for (int i = 0; i < GL_DEPTH; ++i) mbar_init(&s.full[i], 1);
    fence_barrier_init();
  }
  __syncthreads();

  float acc[2][BN / 2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[h][i] = 0.f;

  const int k_tiles = ceil_div(K, BK);
  // Prologue: fill all but one buffer (the last one is refilled inside the loop).
  if (leader)
    for (int kt = 0; kt < min(GL_DEPTH - 1, k_tiles); ++kt) issue_load(s, &tmap_a, &tmap_b, tr, kt, m0, n0);

  PipelineState<GL_DEPTH> st(GL_CONSUMER_START_PHASE);
  for (int kt = 0; kt < k_tiles; ++kt) {
    consumer_wait(tr, s.full, st, BAR_FULL, kt);
    wgmma_fence();
    mma_ktile_128x128_sw128(acc, s.A[st.stage], s.B[st.stage]);
    wgmma_commit();
    tr.event(EV_MMA_ISSUE, 0, st.stage, 0, kt);
    wgmma_wait<1>();  // k-tile kt-1 retired; kt keeps the tensor core busy meanwhile
    tr.event(EV_MMA_DONE, 0, 0, 0, kt - 1);
    __syncthreads();  // every warp is past kt-1, so its buffer may be refilled
    if (leader && kt + GL_DEPTH - 1 < k_tiles) issue_load(s, &tmap_a, &tmap_b, tr, kt + GL_DEPTH - 1, m0, n0);
    st.advance();
  }
  wgmma_wait<0>();
  tr.event(EV_MMA_DONE, 0, 0, 0, k_tiles - 1);

  tr.event(EV_EPI_BEGIN);
  stage_tile_128<BN>(acc, s.C);
  fence_proxy_async_smem();
  __syncthreads();
  tr.event(EV_EPI_END);
  if (leader) {
    tma_store_tile<BM, BN>(&tmap_c, s.C, n0, m0);
    tma_store_commit();
    tr.event(EV_STORE_ISSUE);
    tma_store_wait_read<0>();
    tr.event(EV_STORE_DONE);
  }
  tr.finish();
}
