// Step 10 — ping-pong consumers. Forced move: the epilogue on the tensor core's critical path.
// In step 9 both consumers finish a tile together and write it out together: while they
// stage accumulators the tensor core has nothing to do. Here each consumer warpgroup owns
// whole tiles (128x128, two m64n128 halves, 128 fp32 per thread) and the two take turns:
// consumer 0 runs the mainloop of tile i while consumer 1 writes tile i-1 out, then they
// swap. A turn barrier per consumer orders the mainloops (turn[w] completes when the other
// consumer has issued its last MMAs), so the operand ring is still consumed in order; each
// consumer skips the k-tiles of the other's tile (PipelineState::advance_by). Each consumer
// has its own staging buffer and epilogue ring; the writeback stores tiles in order. The
// 2-CTA cluster and its multicast of B are step 8's. What step 10 adds to step 8, each
// marked "ping-pong:" below. Shape: as step 4.
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_epilogue.cuh"
#include "gl_pipeline.cuh"
#include "gl_scheduler.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_DYNAMIC_SMEM)
#error "step 10 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_DYNAMIC_SMEM"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int CONSUMERS = GL_CONSUMERS;
static_assert(BM == 128 && BK == 64 && BN == 128, "step 10's MMA and epilogue are written for 128x128x64");
static_assert(CONSUMERS == 2, "ping-pong: two consumers take turns");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (ablation) or 2 CTAs along M");
constexpr int B_SLICE = BN / CLUSTER_M;
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 CONSUMER_THREADS = 128;
constexpr u32 THREADS = 128 * (1 + CONSUMERS);
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandRing = Ring<DEPTH, CLUSTER_M>;
using EpilogueRing = Ring<1>;
using TurnRing = Ring<1>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];
  u16 C[CONSUMERS][BM * BN];  // ping-pong: one staging tile per consumer
  u64 tma2mma[DEPTH];
  u64 mma2tma[DEPTH];
  u64 mma2ld[CONSUMERS];  // ping-pong: an epilogue ring per consumer
  u64 ld2mma[CONSUMERS];
  u64 turn[CONSUMERS];    // ping-pong: "your mainloop may start"
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_step10_pingpong(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                     const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const int rank = CLUSTER_M == 1 ? 0 : (int)cluster_ctarank();
  const int cluster_id = blockIdx.x / CLUSTER_M, clusters = gridDim.x / CLUSTER_M;
  const TileScheduler sched(M, N, BM * CLUSTER_M, BN, max(1, GL_GROUP_M / CLUSTER_M));
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();

  if (threadIdx.x == 0) {
    OperandRing::init(s.tma2mma, 1, s.mma2tma, CONSUMER_WARPS * CLUSTER_M);  // one consumer per stage
    for (int w = 0; w < CONSUMERS; ++w) {
      EpilogueRing::init(&s.mma2ld[w], 1, &s.ld2mma[w], 1);
      TurnRing::init(&s.turn[w], CONSUMER_WARPS);  // the other consumer's warps
    }
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER (as step 8) ────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
      tma_prefetch_descriptor(&tmap_a);
      tma_prefetch_descriptor(&tmap_b);
      auto st = PipelineState<DEPTH>::producer();
      for (int ct = cluster_id; ct < sched.num_tiles(); ct += clusters) {
        int cm, tn;
        sched.coords(ct, cm, tn);
        const int tile = ct * CLUSTER_M + rank, m0 = (cm * CLUSTER_M + rank) * BM;
        for (int kt = 0; kt < k_tiles; ++kt) {
          ops.producer_acquire(st, kt);
          ops.producer_expect_tx(st, STAGE_BYTES);
          tma_load_2d(s.A[st.stage], &tmap_a, ops.full_bar(st), kt * BK, m0);
          u16* slice = s.B[st.stage] + rank * B_SLICE * BK;
          if (CLUSTER_M == 1)
            tma_load_2d(slice, &tmap_b, ops.full_bar(st), kt * BK, tn * BN);
          else
            tma_load_2d_multicast(slice, &tmap_b, ops.full_bar(st), kt * BK, tn * BN + rank * B_SLICE,
                                  (u16)((1u << CLUSTER_M) - 1));
          tr.event(EV_LOAD_ISSUE, BAR_TMA2MMA, st.stage, st.phase, kt, tile);
          st.advance();
        }
      }
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK: tiles in order, alternating ──
      Tracer tr(ROLE_WRITEBACK, 3, true);
      tma_prefetch_descriptor(&tmap_c);
      // Tile i belongs to consumer i % 2; its ring's phase flips every other tile. (Phase bits
      // in one register: an array of states indexed by w would live in local memory.)
      u32 phases = 0;
      int i = 0;
      for (int ct = cluster_id; ct < sched.num_tiles(); ct += clusters, ++i) {
        const int w = i % CONSUMERS;
        const EpilogueRing epi(&s.mma2ld[w], BAR_MMA2LD, &s.ld2mma[w], BAR_LD2MMA, tr);
        int cm, tn;
        sched.coords(ct, cm, tn);
        const int tile = ct * CLUSTER_M + rank;
        const PipelineState<1> acc((phases >> w) & 1u);
        epi.consumer_wait(acc);
        tma_store_tile<BM, BN>(&tmap_c, s.C[w], tn * BN, (cm * CLUSTER_M + rank) * BM);
        tma_store_commit();
        tr.event(EV_STORE_ISSUE, 0, w, 0, 0, tile);
        tma_store_wait_read<0>();
        tr.event(EV_STORE_DONE, 0, w, 0, 0, tile);
        epi.consumer_release(acc);
        phases ^= 1u << w;
      }
      tma_store_wait_all<0>();
      tr.finish();
    }
  } else {  // ── MMA CONSUMERS, taking turns ──────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int w = warpgroup_idx() - 1;
    const bool wg_leader = threadIdx.x % 128 == 0, warp_leader = lane_idx() == 0;
    Tracer tr(ROLE_CONSUMER, 1 + w, wg_leader);
    const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
    const EpilogueRing epi(&s.mma2ld[w], BAR_MMA2LD, &s.ld2mma[w], BAR_LD2MMA, tr);
    const TurnRing my_turn(&s.turn[w], BAR_TURN, nullptr, 0, tr);
    const TurnRing their_turn(&s.turn[1 - w], BAR_TURN, nullptr, 0, tr);
    // ping-pong: consumer 0 starts (its first wait passes, like a producer's), consumer 1
    // waits for consumer 0's first mainloop; each starts its ring walk at its first tile.
    auto turn = w == 0 ? PipelineState<1>::producer() : PipelineState<1>::consumer();
    auto st = PipelineState<DEPTH>::consumer();
    st.advance_by(w * k_tiles);
    auto acc_st = PipelineState<1>::producer();
    float acc[2][BN / 2];
    for (int ct = cluster_id + w * clusters; ct < sched.num_tiles(); ct += CONSUMERS * clusters) {
      const int tile = ct * CLUSTER_M + rank;
      zero_acc(acc);
      my_turn.consumer_wait(turn);  // ping-pong: the other consumer's mainloop is issued
      turn.advance();
      PipelineState<DEPTH> prev = st;
      for (int kt = 0; kt < k_tiles; ++kt) {
        ops.consumer_wait(st, kt);
        wgmma_fence();
        mma_ktile_128x128_sw128(acc, s.A[st.stage], s.B[st.stage]);
        wgmma_commit();
        tr.event(EV_MMA_ISSUE, 0, st.stage, st.phase, kt, tile);
        wgmma_wait<1>();
        if (kt > 0) {
          tr.event(EV_MMA_DONE, 0, prev.stage, prev.phase, kt - 1, tile);
          if (warp_leader) ops.consumer_release(prev, kt - 1);
          prev.advance();
        }
        st.advance();
      }
      // ping-pong: every MMA of this tile is queued: the other consumer may start issuing.
      if (warp_leader) their_turn.producer_commit(turn);
      wgmma_wait<0>();
      tr.event(EV_MMA_DONE, 0, prev.stage, prev.phase, k_tiles - 1, tile);
      if (warp_leader) ops.consumer_release(prev, k_tiles - 1);
      st.advance_by(k_tiles);  // ping-pong: the other consumer's tile

      epi.producer_acquire(acc_st);  // this consumer's staging free?
      tr.event(EV_EPI_BEGIN, 0, w, 0, 0, tile);
      stage_tile_128<BN>(acc, s.C[w]);
      fence_proxy_async_smem();
      named_barrier_sync(1 + w, CONSUMER_THREADS);
      tr.event(EV_EPI_END, 0, w, 0, 0, tile);
      if (wg_leader) epi.producer_commit(acc_st);
      acc_st.advance();
    }
    tr.finish();
  }
  cluster_sync();
}
