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
#include "gl_warpspec.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_DYNAMIC_SMEM) || !defined(GL_MMA_LAG)
#error "step 10 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_DYNAMIC_SMEM, GL_MMA_LAG"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
constexpr int CONSUMERS = GL_CONSUMERS;
static_assert(BM == 128 && BK == 64 && BN == 128, "step 10's MMA and epilogue are written for 128x128x64");
static_assert(CONSUMERS == 2, "ping-pong: two consumers take turns");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (ablation) or 2 CTAs along M");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
constexpr u32 CONSUMER_WARPS = 4;
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
  const TileWalk<CLUSTER_M> tiles(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();

  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);  // overlaps the set-up (gl_tma.cuh)
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
      producer_loop(ops, tiles, BM, BN, k_tiles, STAGE_BYTES, [&](int stage, u64* full, int kt, const auto& t) {
        load_stage<BM, BN, BK, CLUSTER_M>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0, tiles.rank);
      });
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK: tiles in order, alternating ──
      Tracer tr(ROLE_WRITEBACK, 3, true);
      // Tile i belongs to consumer i % 2; its ring's phase flips every other tile. (Phase bits
      // in one register: an array of states indexed by w would live in local memory.)
      u32 phases = 0;
      int i = 0;
      for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride(), ++i) {
        const int w = i % CONSUMERS;
        const auto t = tiles.at(ct, BM, BN);
        const EpilogueRing epi(&s.mma2ld[w], BAR_MMA2LD, &s.ld2mma[w], BAR_LD2MMA, tr);
        store_staged<BM, BN>(epi, PipelineState<1>((phases >> w) & 1u), &tmap_c, s.C[w], t.n0, t.m0, w, t.id);
        phases ^= 1u << w;
      }
      tma_store_wait_exit();
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
    for (int ct = tiles.first(w); tiles.valid(ct); ct += tiles.stride(CONSUMERS)) {
      const auto t = tiles.at(ct, BM, BN);
      zero_acc(acc);
      my_turn.consumer_wait(turn);  // ping-pong: the other consumer's mainloop is issued
      turn.advance();
      const auto last = mma_mainloop<MMA_LAG>(ops, st, k_tiles, t.id, warp_leader, [&](int stage) {
        mma_ktile_128x128_sw128(acc, s.A[stage], s.B[stage]);
      });
      // ping-pong: every MMA of this tile is queued: the other consumer may start issuing.
      if (warp_leader) their_turn.producer_commit(turn);
      mma_drain<MMA_LAG>(ops, last, k_tiles, t.id, warp_leader);
      st.advance_by(k_tiles);  // ping-pong: the other consumer's tile
      stage_and_commit(epi, acc_st, 1 + w, wg_leader, w, t.id, [&] { stage_tile_128<BN>(acc, s.C[w]); });
      acc_st.advance();
    }
    tr.finish();
  }
  cluster_sync();
}
