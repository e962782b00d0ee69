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

#define BM 128
#define BN 128
#define BK 64
#ifndef GL_DEPTH
#define GL_DEPTH 2
#endif
#ifndef GL_GROUP_M
#define GL_GROUP_M 8
#endif
#define STAGE_BYTES ((BM + BN) * BK * 2)
#define CONSUMER_WARPS 4
#define CONSUMER_THREADS 128
#define CONSUMER_SYNC_ID 1  // named barrier of the consumer warpgroup (0 is __syncthreads')
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232

struct SharedStorage {
  u16 A[GL_DEPTH][BM * BK];
  u16 B[GL_DEPTH][BN * BK];
  u16 C[BM * BN];
  u64 tma2mma[GL_DEPTH];
  u64 mma2tma[GL_DEPTH];
  u64 mma2ld;
  u64 ld2mma;
};

extern "C" __global__ void __launch_bounds__(256, 1)
gemm_step7_warp_specialized(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                            const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const TileScheduler sched(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();

  if (threadIdx.x == 0) {
    for (int i = 0; i < GL_DEPTH; ++i) {
      mbar_init(&s.tma2mma[i], 1);               // the producer's arrive.expect_tx
      mbar_init(&s.mma2tma[i], CONSUMER_WARPS);  // one arrive per consumer warp
    }
    mbar_init(&s.mma2ld, 1);                     // one consumer thread, after a named barrier
    mbar_init(&s.ld2mma, 1);                     // the writeback thread
    fence_barrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: from here on the roles run apart

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      tma_prefetch_descriptor(&tmap_a);
      tma_prefetch_descriptor(&tmap_b);
      PipelineState<GL_DEPTH> st(GL_PRODUCER_START_PHASE);
      for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
        int tm, tn;
        sched.coords(tile, tm, tn);
        for (int kt = 0; kt < k_tiles; ++kt) {
          producer_acquire(tr, s.mma2tma, st, BAR_MMA2TMA, kt);  // buffer free to refill?
          producer_expect(s.tma2mma, st, STAGE_BYTES);
          tma_load_2d(s.A[st.stage], &tmap_a, &s.tma2mma[st.stage], kt * BK, tm * BM);
          tma_load_2d(s.B[st.stage], &tmap_b, &s.tma2mma[st.stage], kt * BK, tn * BN);
          tr.event(EV_LOAD_ISSUE, BAR_TMA2MMA, st.stage, st.phase, kt, tile);
          st.advance();
        }
      }
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK ─────────────────────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      tma_prefetch_descriptor(&tmap_c);
      PipelineState<1> acc(GL_CONSUMER_START_PHASE);  // drains the epilogue ring
      for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
        int tm, tn;
        sched.coords(tile, tm, tn);
        consumer_wait(tr, &s.mma2ld, acc, BAR_MMA2LD, 0);  // accumulators staged?
        tma_store_tile<BM, BN>(&tmap_c, s.C, tn * BN, tm * BM);
        tma_store_commit();
        tr.event(EV_STORE_ISSUE, 0, 0, 0, 0, tile);
        tma_store_wait_read<0>();  // the copy engine has read the staging buffer
        tr.event(EV_STORE_DONE, 0, 0, 0, 0, tile);
        consumer_release(tr, &s.ld2mma, acc, BAR_LD2MMA);  // staging free for the next tile
        acc.advance();
      }
      tma_store_wait_all<0>();
      tr.finish();
    }
  } else {  // ── MMA CONSUMER (warpgroup 1) ──────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    Tracer tr(ROLE_CONSUMER, 1, threadIdx.x == 128);
    const bool warp_leader = lane_idx() == 0;
    PipelineState<GL_DEPTH> st(GL_CONSUMER_START_PHASE);
    PipelineState<1> acc_st(GL_PRODUCER_START_PHASE);  // fills the epilogue ring
    float acc[2][BN / 2];
    for (int tile = blockIdx.x; tile < sched.num_tiles(); tile += gridDim.x) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[h][j] = 0.f;
      PipelineState<GL_DEPTH> prev = st;
      for (int kt = 0; kt < k_tiles; ++kt) {
        consumer_wait(tr, s.tma2mma, st, BAR_TMA2MMA, kt);  // stage landed?
        wgmma_fence();
        mma_ktile_128x128_sw128(acc, s.A[st.stage], s.B[st.stage]);
        wgmma_commit();
        tr.event(EV_MMA_ISSUE, 0, st.stage, st.phase, kt, tile);
        wgmma_wait<1>();  // k-tile kt-1 has retired: its stage goes back to the producer
        if (kt > 0) {
          tr.event(EV_MMA_DONE, 0, prev.stage, prev.phase, kt - 1, tile);
          if (warp_leader) consumer_release(tr, s.mma2tma, prev, BAR_MMA2TMA, kt - 1);
          prev.advance();
        }
        st.advance();
      }
      wgmma_wait<0>();
      tr.event(EV_MMA_DONE, 0, prev.stage, prev.phase, k_tiles - 1, tile);
      if (warp_leader) consumer_release(tr, s.mma2tma, prev, BAR_MMA2TMA, k_tiles - 1);

      producer_acquire(tr, &s.ld2mma, acc_st, BAR_LD2MMA, 0);  // staging buffer free?
      tr.event(EV_EPI_BEGIN, 0, 0, 0, 0, tile);
      stage_tile_128<BN>(acc, s.C);
      fence_proxy_async_smem();  // each writer, before the hand-over
      // The warpgroup meets on its own named barrier — a __syncthreads here would wait for
      // producer and writeback threads that never come — then one thread hands over.
      named_barrier_sync(CONSUMER_SYNC_ID, CONSUMER_THREADS);
      tr.event(EV_EPI_END, 0, 0, 0, 0, tile);
      if (threadIdx.x == 128) consumer_release(tr, &s.mma2ld, acc_st, BAR_MMA2LD, 0);
      acc_st.advance();
    }
    tr.finish();
  }
}
