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
#include "gl_warpspec.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_DYNAMIC_SMEM) || !defined(GL_MMA_LAG)
#error "step 7 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_DYNAMIC_SMEM, GL_MMA_LAG"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
static_assert(BM == 128 && BK == 64 && BN == 128, "step 7's MMA and epilogue are written for 128x128x64");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 CONSUMER_SYNC_ID = 1;  // named barrier of the consumer warpgroup (0 is __syncthreads')
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH>;
using EpiloguePipe = EpiloguePipeline<1>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];
  u16 C[BM * BN];
  OperandPipe ops;   // tma2mma[s]: stage s landed; mma2tma[s]: stage s may be refilled
  EpiloguePipe epi;  // mma2ld: accumulators staged; ld2mma: staging may be reused
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(256, 1)
gemm_step7_warp_specialized(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                            const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const TileWalk<1> tiles(M, N, BM, BN, GL_GROUP_M);  // persistent, grouped order as step 6
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();

  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);  // overlaps the set-up (gl_tma.cuh)
  if (threadIdx.x == 0) {
    s.ops.init(1,                // the producer's arrive.expect_tx
               CONSUMER_WARPS);  // one arrive per consumer warp
    s.epi.init(1,                // one consumer thread, after a named barrier
               1);               // the writeback thread
    fence_barrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: from here on the roles run apart

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      producer_loop<OperandPipe>(s.ops.bind(tr, STAGE_BYTES), WholeTiles<1>{tiles, k_tiles}, tiles, BM, BN,
                                 [&](int stage, u64* full, int kt, const auto& t) {
        load_stage<BM, BN, BK, 1>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0, 0);
      });
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK ─────────────────────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      const auto epi = s.epi.bind(tr);
      auto acc = EpiloguePipe::State::consumer();  // drains the epilogue ring
      for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
        const auto t = tiles.at(ct, BM, BN);
        store_staged<BM, BN>(epi, acc, &tmap_c, s.C, t.n0, t.m0, 0, t.id);
        acc.advance();
      }
      tma_store_wait_exit();
      tr.finish();
    }
  } else {  // ── MMA CONSUMER (warpgroup 1) ──────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    Tracer tr(ROLE_CONSUMER, 1, threadIdx.x == 128);
    const auto ops = s.ops.bind(tr);
    const auto epi = s.epi.bind(tr);
    const bool warp_leader = lane_idx() == 0;
    auto st = OperandPipe::State::consumer();
    auto acc_st = EpiloguePipe::State::producer();  // fills the epilogue ring
    float acc[2][BN / 2];
    for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
      const auto t = tiles.at(ct, BM, BN);
      zero_acc(acc);
      const auto last = mma_mainloop<MMA_LAG>(ops, st, k_tiles, t.id, warp_leader, [&](int stage) {
        mma_ktile_128x128_sw128(acc, s.A[stage], s.B[stage]);
      });
      mma_drain<MMA_LAG>(ops, last, k_tiles, t.id, warp_leader);
      stage_and_commit(epi, acc_st, CONSUMER_SYNC_ID, threadIdx.x == 128, 0, t.id,
                       [&] { stage_tile_128<BN>(acc, s.C); });
      acc_st.advance();
    }
    tr.finish();
  }
}
