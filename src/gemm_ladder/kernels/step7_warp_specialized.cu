// Step 7 — warp specialization. Forced move: one team doing load, compute and write in
// turn. Each engine gets its own warps, and they hand work over through two producer–
// consumer rings of mbarriers instead of meeting at __syncthreads:
//
//   operand ring  (DEPTH stages):  tma2mma[s]  producer -> consumer  "stage s has landed"
//                                  mma2tma[s]  consumer -> producer  "stage s may be refilled"
//   epilogue ring (1 staging buf): mma2ld      consumer -> writeback "accumulators are staged"
//                                  ld2mma      writeback -> consumer "staging may be reused"
//
// (Names follow the course; on Hopper the accumulators live in the consumer's registers, so
// the consumer stages them into shared memory and the writeback warp issues the TMA store.)
// Every ring end keeps a PipelineState{stage, phase}: whoever fills a ring starts at phase
// 1 (its first wait on a fresh barrier passes), whoever drains it starts at phase 0.
//
// Roles: warpgroup 0 gives registers away (setmaxnreg.dec): warp 0 = TMA producer, warp 1 =
// writeback, warps 2-3 idle. Warpgroup 1 takes them (setmaxnreg.inc) and issues wgmma.
// Persistent, grouped tile order as step 6. Shape: as step 4.
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_epilogue.cuh"
#include "gl_pipeline.cuh"
#include "gl_scheduler.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_DYNAMIC_SMEM)
#error "step 7 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_DYNAMIC_SMEM"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH;
static_assert(BM == 128 && BK == 64 && BN == 128, "step 7's MMA and epilogue are written for 128x128x64");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 CONSUMER_THREADS = 128;
constexpr u32 CONSUMER_SYNC_ID = 1;  // named barrier of the consumer warpgroup (0 is __syncthreads')
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandRing = Ring<DEPTH>;
using EpilogueRing = Ring<1>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];
  u16 C[BM * BN];
  u64 tma2mma[DEPTH];
  u64 mma2tma[DEPTH];
  u64 mma2ld[1];
  u64 ld2mma[1];
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(256, 1)
gemm_step7_warp_specialized(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                            const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const TileScheduler sched(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();

  if (threadIdx.x == 0) {
    OperandRing::init(s.tma2mma, 1,                // the producer's arrive.expect_tx
                      s.mma2tma, CONSUMER_WARPS);  // one arrive per consumer warp
    EpilogueRing::init(s.mma2ld, 1,                // one consumer thread, after a named barrier
                       s.ld2mma, 1);               // the writeback thread
    fence_barrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: from here on the roles run apart

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
      tma_prefetch_descriptor(&tmap_a);
      tma_prefetch_descriptor(&tmap_b);
      auto st = PipelineState<DEPTH>::producer();
      for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
        int tm, tn;
        sched.coords(tile, tm, tn);
        for (int kt = 0; kt < k_tiles; ++kt) {
          ops.producer_acquire(st, kt);  // buffer free to refill?
          ops.producer_expect_tx(st, STAGE_BYTES);
          tma_load_2d(s.A[st.stage], &tmap_a, ops.full_bar(st), kt * BK, tm * BM);
          tma_load_2d(s.B[st.stage], &tmap_b, ops.full_bar(st), kt * BK, tn * BN);
          tr.event(EV_LOAD_ISSUE, BAR_TMA2MMA, st.stage, st.phase, kt, tile);
          st.advance();
        }
      }
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK ─────────────────────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      const EpilogueRing epi(s.mma2ld, BAR_MMA2LD, s.ld2mma, BAR_LD2MMA, tr);
      tma_prefetch_descriptor(&tmap_c);
      auto acc = PipelineState<1>::consumer();  // drains the epilogue ring
      for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
        int tm, tn;
        sched.coords(tile, tm, tn);
        epi.consumer_wait(acc);  // accumulators staged?
        tma_store_tile<BM, BN>(&tmap_c, s.C, tn * BN, tm * BM);
        tma_store_commit();
        tr.event(EV_STORE_ISSUE, 0, 0, 0, 0, tile);
        tma_store_wait_read<0>();  // the copy engine has read the staging buffer
        tr.event(EV_STORE_DONE, 0, 0, 0, 0, tile);
        epi.consumer_release(acc);  // staging free for the next tile
        acc.advance();
      }
      tma_store_wait_all<0>();
      tr.finish();
    }
  } else {  // ── MMA CONSUMER (warpgroup 1) ──────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    Tracer tr(ROLE_CONSUMER, 1, threadIdx.x == 128);
    const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
    const EpilogueRing epi(s.mma2ld, BAR_MMA2LD, s.ld2mma, BAR_LD2MMA, tr);
    const bool warp_leader = lane_idx() == 0;
    auto st = PipelineState<DEPTH>::consumer();
    auto acc_st = PipelineState<1>::producer();  // fills the epilogue ring
    float acc[2][BN / 2];
    for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
      zero_acc(acc);
      PipelineState<DEPTH> prev = st;
      for (int kt = 0; kt < k_tiles; ++kt) {
        ops.consumer_wait(st, kt);  // stage landed?
        wgmma_fence();
        mma_ktile_128x128_sw128(acc, s.A[st.stage], s.B[st.stage]);
        wgmma_commit();
        tr.event(EV_MMA_ISSUE, 0, st.stage, st.phase, kt, tile);
        wgmma_wait<1>();  // k-tile kt-1 has retired: its stage goes back to the producer
        if (kt > 0) {
          tr.event(EV_MMA_DONE, 0, prev.stage, prev.phase, kt - 1, tile);
          if (warp_leader) ops.consumer_release(prev, kt - 1);
          prev.advance();
        }
        st.advance();
      }
      wgmma_wait<0>();
      tr.event(EV_MMA_DONE, 0, prev.stage, prev.phase, k_tiles - 1, tile);
      if (warp_leader) ops.consumer_release(prev, k_tiles - 1);

      epi.producer_acquire(acc_st);  // staging buffer free?
      tr.event(EV_EPI_BEGIN, 0, 0, 0, 0, tile);
      stage_tile_128<BN>(acc, s.C);
      fence_proxy_async_smem();  // each writer, before the hand-over
      // The warpgroup meets on its own named barrier — a __syncthreads here would wait for
      // producer and writeback threads that never come — then one thread commits the stage.
      named_barrier_sync(CONSUMER_SYNC_ID, CONSUMER_THREADS);
      tr.event(EV_EPI_END, 0, 0, 0, 0, tile);
      if (threadIdx.x == 128) epi.producer_commit(acc_st);
      acc_st.advance();
    }
    tr.finish();
  }
}
