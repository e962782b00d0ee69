// Step 6 — persistent. Forced move: launch and tail waves, and L2 misses.
// One CTA per SM stays resident and walks output tiles handed out by a tile scheduler that
// visits them in groups of GROUP_M tile-rows (neighbouring CTAs share A and B in L2). The
// k-tile stream of all this CTA's tiles is one pipeline: loads for the next tile start
// while the current tile is still being multiplied and written. Still lockstep.
// Shape: as step 4.
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
#ifndef GL_GROUP_M
#define GL_GROUP_M 8
#endif
#define STAGE_BYTES ((BM + BN) * BK * 2)

struct SharedStorage {
  u16 A[GL_DEPTH][BM * BK];
  u16 B[GL_DEPTH][BN * BK];
  u16 C[BM * BN];
  u64 full[GL_DEPTH];
};

// Where the leader's next TMA load goes: this CTA's k-tile stream, walked incrementally so
// the tile coordinates (divisions) are computed once per tile, not on every k-tile.
struct LoadCursor {
  int issued = 0;  // k-tiles loaded so far; the stage is issued % DEPTH
  int tile, kt = 0, m0 = 0, n0 = 0;
  GL_DEVICE explicit LoadCursor(const TileScheduler& s) : tile(blockIdx.x) { locate(s); }
  GL_DEVICE void locate(const TileScheduler& s) {
    int tm, tn;
    s.coords(tile, tm, tn);
    m0 = tm * BM;
    n0 = tn * BN;
  }
  GL_DEVICE void issue(SharedStorage& sm, const CUtensorMap* ta, const CUtensorMap* tb, Tracer& tr,
                       const TileScheduler& s, int k_tiles) {
    const int stage = issued % GL_DEPTH;
    mbar_arrive_expect_tx(&sm.full[stage], GL_EXPECT_TX(STAGE_BYTES));
    tma_load_2d(sm.A[stage], ta, &sm.full[stage], kt * BK, m0);
    tma_load_2d(sm.B[stage], tb, &sm.full[stage], kt * BK, n0);
    tr.event(EV_LOAD_ISSUE, BAR_FULL, stage, (issued / GL_DEPTH) & 1, kt, tile);
    ++issued;
    if (++kt == k_tiles) {
      kt = 0;
      tile += gridDim.x;
      locate(s);
    }
  }
};

extern "C" __global__ void __launch_bounds__(128, 1)
gemm_step6_persistent(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                      const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const bool leader = threadIdx.x == 0;
  Tracer tr(ROLE_TEAM, 0, leader);
  const TileScheduler sched(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const int my_tiles = blockIdx.x < sched.num_tiles() ? ceil_div(sched.num_tiles() - blockIdx.x, gridDim.x) : 0;
  const int total = my_tiles * k_tiles;  // length of this CTA's k-tile stream

  if (leader) {
    tma_prefetch_descriptor(&tmap_a);
    tma_prefetch_descriptor(&tmap_b);
    tma_prefetch_descriptor(&tmap_c);
    for (int i = 0; i < GL_DEPTH; ++i) mbar_init(&s.full[i], 1);
    fence_barrier_init();
  }
  __syncthreads();
  LoadCursor loads(sched);  // used by the leader only
  if (leader)
    while (loads.issued < min(GL_DEPTH - 1, total)) loads.issue(s, &tmap_a, &tmap_b, tr, sched, k_tiles);

  // Two nested loops (tiles, k-tiles), not one flattened loop: with the accumulators
  // zeroed and stored inside a single loop, ptxas must wait for every wgmma at each
  // iteration's end (WARPGROUP.DEPBAR 0), and the k-loop stops overlapping its MMAs.
  PipelineState<GL_DEPTH> st(GL_CONSUMER_START_PHASE);
  int consumed = 0;  // position in this CTA's k-tile stream; loads run DEPTH-1 ahead
  for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
    tr.event(EV_TILE_BEGIN, 0, 0, 0, 0, tile);
    float acc[2][BN / 2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) acc[h][j] = 0.f;

    for (int kt = 0; kt < k_tiles; ++kt, ++consumed) {
      consumer_wait(tr, s.full, st, BAR_FULL, kt);
      wgmma_fence();
      mma_ktile_128x128_sw128(acc, s.A[st.stage], s.B[st.stage]);
      wgmma_commit();
      tr.event(EV_MMA_ISSUE, 0, st.stage, 0, kt, tile);
      wgmma_wait<1>();
      tr.event(EV_MMA_DONE, 0, 0, 0, kt - 1, tile);
      __syncthreads();  // every warp is past the previous k-tile: its buffer may be refilled
      // refill the buffer just freed, DEPTH-1 k-tiles ahead (maybe of the next tile already)
      if (leader && consumed + GL_DEPTH - 1 < total) loads.issue(s, &tmap_a, &tmap_b, tr, sched, k_tiles);
      st.advance();
    }
    wgmma_wait<0>();
    tr.event(EV_MMA_DONE, 0, 0, 0, k_tiles - 1, tile);

    // Epilogue; the loads of the next tile's first k-tiles are already in flight.
    int tm, tn;
    sched.coords(tile, tm, tn);
    if (leader) tma_store_wait_read<0>();  // previous tile's store has read the staging
    __syncthreads();
    tr.event(EV_EPI_BEGIN, 0, 0, 0, 0, tile);
    stage_tile_128<BN>(acc, s.C);
    fence_proxy_async_smem();
    __syncthreads();
    tr.event(EV_EPI_END, 0, 0, 0, 0, tile);
    if (leader) {
      tma_store_tile<BM, BN>(&tmap_c, s.C, tn * BN, tm * BM);
      tma_store_commit();
      tr.event(EV_STORE_ISSUE, 0, 0, 0, 0, tile);
    }
  }
  if (leader) tma_store_wait_all<0>();
  tr.finish();
}
