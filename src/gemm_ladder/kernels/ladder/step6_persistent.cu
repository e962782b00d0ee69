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

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_DYNAMIC_SMEM)
#error "step 6 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_DYNAMIC_SMEM"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH;
static_assert(BM == 128 && BK == 64 && BN == 128, "step 6's MMA and epilogue are written for 128x128x64");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
using OperandPipe = LockstepPipeline<DEPTH>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];
  u16 C[BM * BN];
  OperandPipe ring;  // a full barrier per stage
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

// Where the leader's next TMA load goes: this CTA's k-tile stream, walked incrementally so
// the tile coordinates (divisions) are computed once per tile, not on every k-tile. Its
// PipelineState walks the ring in step with the full barriers' phases (a lockstep ring has
// no empty barriers to wait on: __syncthreads frees a buffer).
struct LoadCursor {
  int issued = 0;  // k-tiles loaded so far
  int tile, kt = 0, m0 = 0, n0 = 0;
  PipelineState<DEPTH> st = OperandPipe::producer_state();
  GL_DEVICE explicit LoadCursor(const TileScheduler& s) : tile(blockIdx.x) { locate(s); }
  GL_DEVICE void locate(const TileScheduler& s) {
    int tm, tn;
    s.coords(tile, tm, tn);
    m0 = tm * BM;
    n0 = tn * BN;
  }
  GL_DEVICE void issue(SharedStorage& sm, const OperandPipe::Port& ring, const CUtensorMap* ta,
                       const CUtensorMap* tb, const TileScheduler& s, int k_tiles) {
    ring.producer_acquire(st);
    tma_load_2d(sm.A[st.stage], ta, ring.producer_barrier(st), kt * BK, m0);
    tma_load_2d(sm.B[st.stage], tb, ring.producer_barrier(st), kt * BK, n0);
    ring.tr.event(EV_LOAD_ISSUE, BAR_FULL, st.stage, st.phase, kt, tile);
    st.advance();
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
    tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);
    s.ring.init();
    fence_barrier_init();
  }
  __syncthreads();
  const auto ring = s.ring.bind(tr, STAGE_BYTES);
  LoadCursor loads(sched);  // used by the leader only
  if (leader)
    while (loads.issued < min(DEPTH - 1, total)) loads.issue(s, ring, &tmap_a, &tmap_b, sched, k_tiles);

  // Two nested loops (tiles, k-tiles), not one flattened loop: with the accumulators
  // zeroed and stored inside a single loop, ptxas must wait for every wgmma at each
  // iteration's end (WARPGROUP.DEPBAR 0), and the k-loop stops overlapping its MMAs.
  auto st = OperandPipe::State::consumer();
  int consumed = 0;  // position in this CTA's k-tile stream; loads run DEPTH-1 ahead
  for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
    tr.event(EV_TILE_BEGIN, 0, 0, 0, 0, tile);
    float acc[2][BN / 2];
    zero_acc(acc);

    for (int kt = 0; kt < k_tiles; ++kt, ++consumed) {
      ring.consumer_wait(st, kt);
      wgmma_fence();
      mma_ktile_128x128_sw128(acc, s.A[st.stage], s.B[st.stage]);
      wgmma_commit();
      tr.event(EV_MMA_ISSUE, 0, st.stage, 0, kt, tile);
      wgmma_wait<1>();
      tr.event(EV_MMA_DONE, 0, 0, 0, kt - 1, tile);
      __syncthreads();  // every warp is past the previous k-tile: its buffer may be refilled
      // refill the buffer just freed, DEPTH-1 k-tiles ahead (maybe of the next tile already)
      if (leader && consumed + DEPTH - 1 < total) loads.issue(s, ring, &tmap_a, &tmap_b, sched, k_tiles);
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
  if (leader) tma_store_wait_exit();
  tr.finish();
}
