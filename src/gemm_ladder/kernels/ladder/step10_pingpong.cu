// Step 10 — ping-pong consumers. Forced move: the epilogue on the tensor core's critical path.
// In step 9 both consumers finish a tile together and write it out together: while they
// stage accumulators the tensor core has nothing to do. Here each consumer warpgroup owns
// whole tiles (64x256: the same m64n256k16 and 128 fp32 accumulators per thread as in step 9)
// and the two take turns: consumer 0 runs the mainloop of tile i while consumer 1 writes tile
// i-1 out, then they swap (CUTLASS's "ping-pong"). What step 10 changes in step 9, each marked
// "ping-pong:" below:
//   - an ordered barrier (gl_pipeline.cuh) orders the mainloops: a consumer's turn comes when
//     the other has issued its tile's last MMAs, so the operand ring is still consumed in
//     order; each consumer skips the stages of the other's tiles (PipelineState::advance_by);
//   - a stage feeds one consumer: mma2tma[s] counts one consumer's warps (in both CTAs);
//   - each consumer has its own epilogue ring of chunk slots (64x64), and the writeback
//     stores the tiles in order, alternating between the two rings.
// The tile is half step 9's, so a stage carries B for half the outputs: the tensor core's
// idle time moves from the epilogue to the operand traffic (the ladder table says which wins).
// Shape: as step 4.
#include "gl_warpspec.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_EPI_STAGES) || !defined(GL_DYNAMIC_SMEM) || \
    !defined(GL_MMA_LAG)
#error "step 10 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_EPI_STAGES, GL_DYNAMIC_SMEM, GL_MMA_LAG"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
constexpr int CONSUMERS = GL_CONSUMERS, EPI_STAGES = GL_EPI_STAGES, EPI_N = 64;
static_assert(BM == 64 && BK == 64 && BN == 256 && CONSUMERS == 2, "ping-pong: two consumers, each a whole 64 x 256 tile");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (the ablation 10:c1) or 2 CTAs along M");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;  // cluster: what lands in THIS CTA per stage
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 THREADS = 128 * (1 + CONSUMERS);  // two consumers: three warpgroups
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH, CLUSTER_M>;  // cluster: releases reach every CTA's producer
using EpiloguePipe = EpiloguePipeline<EPI_STAGES>;  // ping-pong: one ring of chunk slots per consumer
constexpr int CHUNKS = BN / EPI_N;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];  // ping-pong: a stage holds one consumer's tile
  u16 B[DEPTH][BN * BK];  // cluster: slice r written by CTA r's producer
  u16 C[CONSUMERS][EPI_STAGES][BM * EPI_N];  // ping-pong: each consumer's chunk slots, 8 KB each
  OperandPipe ops;              // tma2mma[s]: stage s landed; mma2tma[s]: stage s may be refilled
  EpiloguePipe epi[CONSUMERS];  // mma2ld[c]: chunk staged in slot c; ld2mma[c]: slot c may be reused
  OrderedBarrier<CONSUMERS> order;  // ping-pong: turn[w]: consumer w's mainloop may start
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_step10_pingpong(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
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
               CONSUMER_WARPS);  // ping-pong: one consumer's warps (cluster: of each CTA)
    for (int w = 0; w < CONSUMERS; ++w)
      s.epi[w].init(1,          // ping-pong: one thread of consumer w, after its named barrier
                    1);         // the writeback thread
    s.order.init(CONSUMER_WARPS);  // ping-pong: the passing consumer's warps
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
      // ping-pong: tile i belongs to consumer i % 2; both rings advance alike, CHUNKS slots per
      // pair of tiles, so one state serves both.
      auto chunk_st = EpiloguePipe::State::consumer();  // drains the epilogue rings
      int w = 0;
      for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
        const auto t = tiles.at(ct, BM, BN);
        const auto epi = s.epi[w].bind(tr, 0, w * EPI_STAGES);  // traces name slot w * EPI_STAGES + s
        auto st = chunk_st;
        for (int c = 0; c < CHUNKS; ++c) {  // one 64x64 chunk at a time
          store_staged<BM, EPI_N>(epi, st, &tmap_c, s.C[w][st.stage], t.n0 + c * EPI_N, t.m0, c, t.id);
          st.advance();
        }
        if (w == CONSUMERS - 1) chunk_st = st;
        w = w == CONSUMERS - 1 ? 0 : w + 1;
      }
      tma_store_wait_exit();
      tr.finish();
    }
  } else {  // ── MMA CONSUMERS (warpgroups 1 .. CONSUMERS) ────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;  // ping-pong: which of the tiles
    const bool wg_leader = threadIdx.x % 128 == 0;
    Tracer tr(ROLE_CONSUMER, 1 + cw, wg_leader);
    const auto ops = s.ops.bind(tr);  // cluster: releases reach both
    const auto epi = s.epi[cw].bind(tr, 0, cw * EPI_STAGES);
    auto turn = s.order.member(cw, tr);  // ping-pong: consumer 0's first turn is free
    const bool warp_leader = lane_idx() == 0;
    auto st = OperandPipe::State::consumer();
    st.advance_by(cw * k_tiles);  // ping-pong: consumer 1's first tile follows consumer 0's
    auto chunk_st = EpiloguePipe::State::producer();  // fills the epilogue ring
    float acc[BN / 2];
    for (int ct = tiles.first(cw); tiles.valid(ct); ct += tiles.stride(CONSUMERS)) {
      const auto t = tiles.at(ct, BM, BN);
      zero_acc(acc);
      turn.wait_turn();  // ping-pong: the other consumer's mainloop is issued
      const auto last = mma_mainloop<MMA_LAG>(ops, st, k_tiles, t.id, warp_leader, [&](int stage) {
        const u16* a = s.A[stage];  // ping-pong: the stage is this consumer's tile
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          wgmma_m64k16<BN>(acc, desc_sw128(a + kk * 16), desc_sw128(s.B[stage] + kk * 16), 1);
      });
      turn.pass_turn(warp_leader);  // ping-pong: every MMA of this tile is queued: the other may start
      mma_drain<MMA_LAG>(ops, last, k_tiles, t.id, warp_leader);
      st.advance_by(k_tiles);  // ping-pong: the other consumer's tile
      // the chunked epilogue, under the other consumer's mainloop
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
        stage_and_commit(epi, chunk_st, 1 + cw, wg_leader, c, t.id,
                         [&] { stage_chunk_sw128<BN, BM>(acc, s.C[cw][chunk_st.stage], 0, c); });
        chunk_st.advance();
      }
    }
    tr.finish();
  }
  cluster_sync_before_exit();  // cluster: the peer may still write into this CTA until its last k-tile
}
