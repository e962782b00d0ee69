// Step 8 — a 2-CTA cluster. Forced move: each CTA fetching its own copy of B.
// Two CTAs of a thread-block cluster compute vertically adjacent 128x128 tiles (tile rows
// 2c and 2c+1, the same tile column), so they need the same B k-tiles. Each CTA's producer
// loads half of the B tile and multicasts it into both CTAs' shared memory; A stays per CTA.
// B's bytes leave L2 once for two SMs. Everything else is step 7 at depth 4. What the
// cluster adds, each marked "cluster:" below:
//   - tma2mma[s] of every CTA expects the bytes that land in ITS shared memory: its A plus
//     the whole B tile, half of which the peer sends (the course's expect_tx x CTA_GROUP);
//   - a stage may be refilled only when the consumers of BOTH CTAs have released it, since
//     the refill writes into both: mma2tma[s] counts the consumer warps of both CTAs, the
//     peer's arriving remotely (mapa + mbarrier.arrive.shared::cluster) — the pipeline's
//     cluster size says so (gl_pipeline.cuh);
//   - barrier initialisation is published cluster-wide (fence.mbarrier_init + cluster
//     barrier) before any multicast can target it, and no CTA exits before its peer is done
//     writing into it and arriving on it (a cluster barrier at the end).
// Hopper has no cooperative 2-SM MMA (the course's cta_group::2): each CTA still multiplies
// its own 128x128 tile; the cluster's win is the shared operand traffic.
// Persistent: a cluster walks cluster tiles (256 x 128: two tile rows, one tile column) in a
// grouped order. When the tile rows are odd, the second CTA of the last pair computes a tile
// entirely below C (TMA zero-fills its A and clips its store), so both CTAs keep the same
// barrier schedule. Shape: as step 4.
#include "gl_warpspec.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_DYNAMIC_SMEM) || !defined(GL_MMA_LAG)
#error "step 8 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_DYNAMIC_SMEM, GL_MMA_LAG"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
static_assert(BM == 128 && BK == 64 && BN == 128, "step 8's MMA and epilogue are written for 128x128x64");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (the ablation 8:c1) or 2 CTAs along M");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;  // cluster: what lands in THIS CTA per stage
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 CONSUMER_SYNC_ID = 1;  // named barrier of the consumer warpgroup (0 is __syncthreads')
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH, CLUSTER_M>;  // cluster: releases reach every CTA's producer
using EpiloguePipe = EpiloguePipeline<1>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];  // cluster: slice r of each stage is written by the producer of CTA r
  u16 C[BM * BN];
  OperandPipe ops;   // tma2mma[s]: stage s landed; mma2tma[s]: stage s may be refilled
  EpiloguePipe epi;  // mma2ld: accumulators staged; ld2mma: staging may be reused
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(256, 1)
gemm_step8_cluster(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                   const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  // cluster: the schedule hands out cluster tiles; CTA `rank` takes tile row 2c + rank.
  const TileWalk<CLUSTER_M> tiles(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();

  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);  // overlaps the set-up (gl_tma.cuh)
  if (threadIdx.x == 0) {
    s.ops.init(1,                // this CTA's producer's arrive.expect_tx
               CONSUMER_WARPS);  // one arrive per consumer warp (cluster: of each CTA)
    s.epi.init(1,                // one consumer thread, after a named barrier
               1);               // the writeback thread
    fence_barrier_init();
  }
  cluster_sync();  // cluster: the peer's barriers exist before anything can target them

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      // cluster: each stage is free only once both CTAs' consumers released it; its A, and
      // BN / 2 rows of B multicast to the same offset (and barrier offset) in both CTAs
      producer_loop<OperandPipe>(s.ops.bind(tr, STAGE_BYTES), WholeTiles<CLUSTER_M>{tiles, k_tiles}, tiles, BM, BN,
                                 [&](int stage, u64* full, int kt, const auto& t) {
        load_stage<BM, BN, BK, CLUSTER_M>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0, tiles.rank);
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
    const auto ops = s.ops.bind(tr);  // cluster: releases reach both
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
  cluster_sync_before_exit();  // cluster: the peer may still write into this CTA until its last k-tile
}
