// Step 9 — two consumer warpgroups. Forced move: one consumer can't feed the tensor cores.
// One warpgroup issuing m64n128 leaves the tensor core idle between its k-tiles, and every
// 128x128 tile pays A's and B's bytes for only 128x128 outputs. Now two consumer warpgroups
// share each staged B tile: the CTA tile grows to 128x256, each consumer owns 64x256 of it
// (wgmma m64n256k16, 128 fp32 accumulators per thread), and the 2-CTA cluster of step 8
// multicasts the 256-wide B, so a cluster covers 256x256. What step 9 adds to step 8, each
// marked "two consumers:" below:
//   - three warpgroups: producer/writeback (setmaxnreg down to 40), consumers 0 and 1 (up
//     to 232 each: 128 x 40 + 256 x 232 <= 64K registers);
//   - mma2tma[s] counts the consumer warps of both consumers (in both CTAs);
//   - the chunked epilogue (EPI_N = 64): accumulators leave in 64-column chunks through a
//     ring of EPI_STAGES 128x64 swizzled staging buffers (mma2ld/ld2mma per slot). Both
//     consumers stage their 64 rows of a chunk (stmatrix), each commits after its own named
//     barrier; the writeback stores the chunk with TMA while the consumers stage the next
//     one, and frees the slot once cp.async.bulk.wait_group.read says it was read. No thread
//     holds a whole staged tile, and the staging needs 32 KB instead of 64.
// The library's kernel (kernels/gemm/gemm_two_consumers.cu) is this structure with the tunings
// a lesson does not need: other tile widths, stream-K, MN-major operands, a borrowed stage,
// early loads. Shape: as step 4.
#include "gl_warpspec.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_EPI_STAGES) || !defined(GL_DYNAMIC_SMEM) || \
    !defined(GL_MMA_LAG)
#error "step 9 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_EPI_STAGES, GL_DYNAMIC_SMEM, GL_MMA_LAG"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
constexpr int CONSUMERS = GL_CONSUMERS, EPI_STAGES = GL_EPI_STAGES, EPI_N = 64;
static_assert(BM == 64 * CONSUMERS && BK == 64 && BN == 256, "two consumers: each owns 64 x 256 (m64n256k16)");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (the ablation 9:c1) or 2 CTAs along M");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;  // cluster: what lands in THIS CTA per stage
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 THREADS = 128 * (1 + CONSUMERS);  // two consumers: three warpgroups
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH, CLUSTER_M>;  // cluster: releases reach every CTA's producer
using EpiloguePipe = EpiloguePipeline<EPI_STAGES>;  // two consumers: a ring of chunk slots
constexpr int CHUNKS = BN / EPI_N;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];  // two consumers: rows 64c.. of each stage feed consumer c
  u16 B[DEPTH][BN * BK];  // shared by both consumers (cluster: slice r written by CTA r's producer)
  u16 C[EPI_STAGES][BM * EPI_N];  // two consumers: chunk slots, 16 KB each
  OperandPipe ops;   // tma2mma[s]: stage s landed; mma2tma[s]: stage s may be refilled
  EpiloguePipe epi;  // mma2ld[c]: chunk staged in slot c; ld2mma[c]: slot c may be reused
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_step9_multi_consumer(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
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
               CONSUMER_WARPS * CONSUMERS);  // two consumers: all their warps (cluster: of each CTA)
    s.epi.init(CONSUMERS,        // two consumers: one thread of each, after its named barrier
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
      auto chunk_st = EpiloguePipe::State::consumer();  // drains the epilogue ring
      for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
        const auto t = tiles.at(ct, BM, BN);
        for (int c = 0; c < CHUNKS; ++c) {  // two consumers: one 128x64 chunk at a time
          store_staged<BM, EPI_N>(epi, chunk_st, &tmap_c, s.C[chunk_st.stage], t.n0 + c * EPI_N, t.m0, c, t.id);
          chunk_st.advance();
        }
      }
      tma_store_wait_exit();
      tr.finish();
    }
  } else {  // ── MMA CONSUMERS (warpgroups 1 .. CONSUMERS) ────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;  // two consumers: which 64 rows of the tile
    const bool wg_leader = threadIdx.x % 128 == 0;
    Tracer tr(ROLE_CONSUMER, 1 + cw, wg_leader);
    const auto ops = s.ops.bind(tr);  // cluster: releases reach both
    const auto epi = s.epi.bind(tr);
    const bool warp_leader = lane_idx() == 0;
    auto st = OperandPipe::State::consumer();
    auto chunk_st = EpiloguePipe::State::producer();  // fills the epilogue ring
    float acc[BN / 2];
    for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
      const auto t = tiles.at(ct, BM, BN);
      zero_acc(acc);
      const auto last = mma_mainloop<MMA_LAG>(ops, st, k_tiles, t.id, warp_leader, [&](int stage) {
        const u16* a = s.A[stage] + cw * 64 * BK;  // two consumers: this one's 64 rows, all of B
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          wgmma_m64k16<BN>(acc, desc_sw128(a + kk * 16), desc_sw128(s.B[stage] + kk * 16), 1);
      });
      mma_drain<MMA_LAG>(ops, last, k_tiles, t.id, warp_leader);
      // two consumers: the chunked epilogue; each consumer stages its 64 rows of the chunk.
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
        stage_and_commit(epi, chunk_st, 1 + cw, wg_leader, c, t.id,
                         [&] { stage_chunk_sw128<BN, BM>(acc, s.C[chunk_st.stage], 64 * cw, c); });
        chunk_st.advance();
      }
    }
    tr.finish();
  }
  cluster_sync_before_exit();  // cluster: the peer may still write into this CTA until its last k-tile
}
