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
//     peer's arriving remotely (mapa + mbarrier.arrive.shared::cluster);
//   - barrier initialisation is published cluster-wide (fence.mbarrier_init + cluster
//     barrier) before any multicast can target it, and no CTA exits before its peer is done
//     writing into it and arriving on it (a cluster barrier at the end).
// Hopper has no cooperative 2-SM MMA (the course's cta_group::2): each CTA still multiplies
// its own 128x128 tile; the cluster's win is the shared operand traffic.
// Without the cluster (8:c1) the first stages start right after the barrier init (Step.early_loads).
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
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (ablation) or 2 CTAs along M");
constexpr int B_SLICE = BN / CLUSTER_M;                  // rows of B each CTA loads and multicasts
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;          // cluster: what lands in THIS CTA per stage
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 CONSUMER_SYNC_ID = 1;
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandRing = Ring<DEPTH, CLUSTER_M>;  // cluster: releases reach every CTA's producer
using EpilogueRing = Ring<1>;

// The course's exercises, as ablations (what-ifs; never in a normal build):
//   GL_ABLATE_LOCAL_EMPTY=1  mma2tma counts and hears only this CTA's consumers
//   GL_ABLATE_LOCAL_TX=1     tma2mma expects only the bytes this CTA's producer issued
//   GL_ABLATE_NO_EXIT_SYNC=1 no cluster barrier before exit
//   GL_ABLATE_SKEW_NS=<ns>   the rank-1 consumer sleeps this long per k-tile, so the two CTAs
//                            drift apart and a race the ablations open is lost every time
#ifndef GL_ABLATE_LOCAL_EMPTY
#define GL_ABLATE_LOCAL_EMPTY 0
#endif
#ifndef GL_ABLATE_LOCAL_TX
#define GL_ABLATE_LOCAL_TX 0
#endif
#ifndef GL_ABLATE_NO_EXIT_SYNC
#define GL_ABLATE_NO_EXIT_SYNC 0
#endif
#ifndef GL_ABLATE_SKEW_NS
#define GL_ABLATE_SKEW_NS 0
#endif
using ReleaseRing = Ring<DEPTH, GL_ABLATE_LOCAL_EMPTY ? 1 : CLUSTER_M>;
constexpr u32 EXPECTED_BYTES = GL_ABLATE_LOCAL_TX ? (BM + B_SLICE) * BK * 2 : STAGE_BYTES;
constexpr u32 EMPTY_ARRIVALS = CONSUMER_WARPS * (GL_ABLATE_LOCAL_EMPTY ? 1 : CLUSTER_M);

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];  // cluster: slice r of each stage is written by the producer of CTA r
  u16 C[BM * BN];
  u64 tma2mma[DEPTH];
  u64 mma2tma[DEPTH];
  u64 mma2ld[1];
  u64 ld2mma[1];
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
  const int early = early_k_tiles<DEPTH>(tiles, k_tiles);  // GL_EARLY_LOADS (gl_warpspec.cuh)

  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);  // overlaps the set-up (gl_tma.cuh)
  if (threadIdx.x == 0) {
    OperandRing::init(s.tma2mma, 1,                // this CTA's producer's arrive.expect_tx
                      s.mma2tma, EMPTY_ARRIVALS);  // cluster: consumer warps of both CTAs
    EpilogueRing::init(s.mma2ld, 1, s.ld2mma, 1);
    fence_barrier_init();
  }
  cluster_arrive();  // cluster: the peer's barriers exist before anything can target them
  if (threadIdx.x == 0)  // after its arrive: a first copy may wait for its map's descriptor, the others need not
    early_loads<BM, BN, BK, CLUSTER_M>(early, s.A[0], s.B[0], BM * BK, BN * BK, s.tma2mma, STAGE_BYTES, &tmap_a,
                                       &tmap_b, tiles);
  cluster_wait();

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
      // cluster: each stage is free only once both CTAs' consumers released it; its A, and
      // B_SLICE rows of B multicast to the same offset (and barrier offset) in both CTAs
      producer_loop(ops, tiles, BM, BN, k_tiles, EXPECTED_BYTES, [&](int stage, u64* full, int kt, const auto& t) {
        load_stage<BM, BN, BK, CLUSTER_M>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0, tiles.rank);
      }, 0, 1, early);
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK ─────────────────────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      const EpilogueRing epi(s.mma2ld, BAR_MMA2LD, s.ld2mma, BAR_LD2MMA, tr);
      auto acc = PipelineState<1>::consumer();
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
    const ReleaseRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);  // cluster: releases reach both
    const EpilogueRing epi(s.mma2ld, BAR_MMA2LD, s.ld2mma, BAR_LD2MMA, tr);
    const bool warp_leader = lane_idx() == 0;
    auto st = PipelineState<DEPTH>::consumer();
    auto acc_st = PipelineState<1>::producer();
    float acc[2][BN / 2];
    for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
      const auto t = tiles.at(ct, BM, BN);
      zero_acc(acc);
      const auto last = mma_mainloop<MMA_LAG>(ops, st, k_tiles, t.id, warp_leader, [&](int stage) {
        if (GL_ABLATE_SKEW_NS && tiles.rank == 1) __nanosleep(GL_ABLATE_SKEW_NS);
        mma_ktile_128x128_sw128(acc, s.A[stage], s.B[stage]);
      });
      mma_drain<MMA_LAG>(ops, last, k_tiles, t.id, warp_leader);
      stage_and_commit(epi, acc_st, CONSUMER_SYNC_ID, threadIdx.x == 128, 0, t.id,
                       [&] { stage_tile_128<BN>(acc, s.C); });
      acc_st.advance();
    }
    tr.finish();
  }
  // cluster: the peer may still multicast into this CTA's buffers or arrive on its barriers
  // until its last k-tile; nobody leaves before everybody is done.
  if (!GL_ABLATE_NO_EXIT_SYNC) cluster_sync();
}
