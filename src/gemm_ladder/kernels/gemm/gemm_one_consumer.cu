// The library's GEMM, one consumer warpgroup on 128 x 128 tiles: ladder step 8's structure
// (kernels/ladder/step8_cluster.cu: a TMA producer warp, a writeback warp, one consumer
// warpgroup issuing two m64n128 halves, an optional 2-CTA cluster multicasting B) with the
// library's early loads (gemm_mainloop.cuh). The selection runs it where a 128 x 128 tile
// with one MMA issuer fills the SMs better than the two-consumer kernel's 128 x BN tiles
// (measured 1-6 % ahead of step 7 at depth 4 at every M = 128 .. 2048 suite shape,
// docs/perf-notes.md item 21). Its configuration comes from its family entry
// (families/gemm.py). Shape: any M, N; K and N multiples of 8.
#include "gemm_mainloop.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_DYNAMIC_SMEM) || !defined(GL_MMA_LAG) || !defined(GL_EARLY_LOADS)
#error "gemm_one_consumer takes its configuration from its family entry (families/gemm.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_DYNAMIC_SMEM, GL_MMA_LAG, GL_EARLY_LOADS"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
static_assert(BM == 128 && BK == 64 && BN == 128, "the MMA and epilogue are written for 128x128x64");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 or 2 CTAs along M");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;          // cluster: what lands in THIS CTA per stage
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 CONSUMER_SYNC_ID = 1;
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH, CLUSTER_M>;  // cluster: releases reach every CTA's producer
using EpiloguePipe = EpiloguePipeline<1>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];  // cluster: slice r of each stage is written by the producer of CTA r
  u16 C[BM * BN];
  OperandPipe ops;   // tma2mma / mma2tma per stage
  EpiloguePipe epi;  // mma2ld / ld2mma
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "the family's dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(256, 1)
gemm_one_consumer(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                  const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  // cluster: the schedule hands out cluster tiles; CTA `rank` takes tile row 2c + rank.
  const TileWalk<CLUSTER_M> tiles(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();
  const int early = early_k_tiles<DEPTH>(tiles, k_tiles);  // GL_EARLY_LOADS (gemm_mainloop.cuh)

  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);  // overlaps the set-up (gl_tma.cuh)
  if (threadIdx.x == 0) {
    s.ops.init(1, CONSUMER_WARPS);  // this CTA's producer's arrive.expect_tx; cluster: consumer warps of both CTAs
    s.epi.init(1, 1);
    fence_barrier_init();
  }
  cluster_arrive();  // cluster: the peer's barriers exist before anything can target them
  if (threadIdx.x == 0) {  // after its arrive: a first copy may wait for its map's descriptor, the others need not
    Tracer untraced(ROLE_PRODUCER, 0, false);  // a traced build has no early loads
    early_loads<OperandPipe, BM, BN, BK, CLUSTER_M>(early, s.ops.bind(untraced, STAGE_BYTES), s.A[0], s.B[0], BM * BK,
                                                    BN * BK, &tmap_a, &tmap_b, tiles);
  }
  cluster_wait();

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      // cluster: each stage is free only once both CTAs' consumers released it; its A, and
      // BN / CLUSTER_M rows of B multicast to the same offset (and barrier offset) in both CTAs
      producer_loop<OperandPipe>(s.ops.bind(tr, STAGE_BYTES), WholeTiles<CLUSTER_M>{tiles, k_tiles}, tiles, BM, BN,
                                 [&](int stage, u64* full, int kt, const auto& t) {
        load_stage<BM, BN, BK, CLUSTER_M>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0, tiles.rank);
      }, early);
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK ─────────────────────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      const auto epi = s.epi.bind(tr);
      auto acc = EpiloguePipe::State::consumer();
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
    auto acc_st = EpiloguePipe::State::producer();
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
