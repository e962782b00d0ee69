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

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_DYNAMIC_SMEM)
#error "step 5 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_DYNAMIC_SMEM"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH;
static_assert(BM == 128 && BK == 64 && BN == 128, "step 5's MMA and epilogue are written for 128x128x64");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
using OperandPipe = LockstepPipeline<DEPTH>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];
  u16 C[BM * BN];
  OperandPipe ring;  // a full barrier per stage: "k-tile landed in this buffer"
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

// The leader's loads walk the ring in step with the full barriers' phases (a lockstep ring
// has no empty barriers to wait on: __syncthreads frees a buffer).
GL_DEVICE void issue_load(SharedStorage& s, const OperandPipe::Port& ring, PipelineState<DEPTH>& ld,
                          const CUtensorMap* ta, const CUtensorMap* tb, int kt, int m0, int n0) {
  ring.producer_acquire(ld);
  tma_load_2d(s.A[ld.stage], ta, ring.producer_barrier(ld), kt * BK, m0);
  tma_load_2d(s.B[ld.stage], tb, ring.producer_barrier(ld), kt * BK, n0);
  ring.tr.event(EV_LOAD_ISSUE, BAR_FULL, ld.stage, ld.phase, kt);
  ld.advance();
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
    s.ring.init();
    fence_barrier_init();
  }
  __syncthreads();
  const auto ring = s.ring.bind(tr, STAGE_BYTES);

  float acc[2][BN / 2];
  zero_acc(acc);

  const int k_tiles = ceil_div(K, BK);
  // Prologue: fill all but one buffer (the last one is refilled inside the loop).
  auto ld = OperandPipe::producer_state();
  if (leader)
    for (int kt = 0; kt < min(DEPTH - 1, k_tiles); ++kt) issue_load(s, ring, ld, &tmap_a, &tmap_b, kt, m0, n0);

  auto st = OperandPipe::State::consumer();
  for (int kt = 0; kt < k_tiles; ++kt) {
    ring.consumer_wait(st, kt);
    wgmma_fence();
    mma_ktile_128x128_sw128(acc, s.A[st.stage], s.B[st.stage]);
    wgmma_commit();
    tr.event(EV_MMA_ISSUE, 0, st.stage, 0, kt);
    wgmma_wait<1>();  // k-tile kt-1 retired; kt keeps the tensor core busy meanwhile
    tr.event(EV_MMA_DONE, 0, 0, 0, kt - 1);
    __syncthreads();  // every warp is past kt-1, so its buffer may be refilled
    if (leader && kt + DEPTH - 1 < k_tiles) issue_load(s, ring, ld, &tmap_a, &tmap_b, kt + DEPTH - 1, m0, n0);
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
