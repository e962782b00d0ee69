// Step 9 — two consumer warpgroups. Forced move: one consumer can't feed the tensor cores.
// One warpgroup issuing m64n128 leaves the tensor core idle between its k-tiles, and every
// 128x128 tile pays A's and B's bytes for only 128x128 outputs. Now two consumer warpgroups
// share each staged B tile: the CTA tile grows to 128x256, each consumer owns 64x256 of it
// (wgmma m64n256k16, 128 fp32 accumulators per thread), and the 2-CTA cluster of step 8
// multicasts the 256-wide B, so a cluster covers 256x256. What step 9 adds to step 8, each
// marked "two consumers:" below:
//   - three warpgroups: producer/writeback (setmaxnreg down to 40), consumers 0 and 1 (up
//     to 232 each: 128 x 40 + 256 x 232 <= 64K registers);
//   - mma2tma[s] counts the consumer warps of both consumers in both CTAs;
//   - the chunked epilogue (EPI_N = 64): accumulators leave in 64-column chunks through a
//     ring of EPI_STAGES 128x64 swizzled staging buffers (mma2ld/ld2mma per slot). Both
//     consumers stage their 64 rows of a chunk (stmatrix), each commits after its own named
//     barrier; the writeback stores the chunk with TMA while the consumers stage the next
//     one, and frees the slot once cp.async.bulk.wait_group.read says it was read. No thread
//     holds a whole staged tile, and the staging needs 32 KB instead of 64.
// Layouts: besides K-major A and B, this kernel reads an M-major A (GL_A_MN) and an N-major B
// (GL_B_MN, B given as a row-major (K, N) matrix): TMA then loads 64-wide MN blocks of k-rows
// and wgmma reads them through its transpose bits, so no operand is ever copied.
// Shape: as step 4 (with an MN-major operand, its M or N a multiple of 8 instead of K).
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_epilogue.cuh"
#include "gl_pipeline.cuh"
#include "gl_scheduler.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_EPI_STAGES) || !defined(GL_DYNAMIC_SMEM)
#error "step 9 takes its configuration from its Step (steps.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_EPI_STAGES, GL_DYNAMIC_SMEM"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int CONSUMERS = GL_CONSUMERS, EPI_STAGES = GL_EPI_STAGES, EPI_N = 64;
static_assert(BK == 64 && BN == 256 && BM == 64 * CONSUMERS, "step 9: each consumer owns 64 x 256 (m64n256k16)");
static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (ablation) or 2 CTAs along M");
static_assert(EPI_STAGES >= 1 && BN % EPI_N == 0, "the epilogue ring needs a staging slot");
constexpr int B_SLICE = BN / CLUSTER_M;
constexpr bool A_MN = GL_A_MN, B_MN = GL_B_MN;
constexpr int MN_BLOCK = 64;                        // MN-major operands: 64-element blocks (128 B rows)
constexpr u32 MN_BLOCK_BYTES = MN_BLOCK * BK * 2;  // one block of k-rows
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 CONSUMER_THREADS = 128;
constexpr u32 THREADS = 128 * (1 + CONSUMERS);
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandRing = Ring<DEPTH, CLUSTER_M>;
using EpilogueRing = Ring<EPI_STAGES>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];          // rows 64c.. of each stage feed consumer c
  u16 B[DEPTH][BN * BK];          // shared by both consumers (and, sliced, by both CTAs)
  u16 C[EPI_STAGES][BM * EPI_N];  // two consumers: chunk slots, 16 KB each
  u64 tma2mma[DEPTH];
  u64 mma2tma[DEPTH];
  u64 mma2ld[EPI_STAGES];
  u64 ld2mma[EPI_STAGES];
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Step.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_step9_multi_consumer(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                          const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const int rank = CLUSTER_M == 1 ? 0 : (int)cluster_ctarank();
  const int cluster_id = blockIdx.x / CLUSTER_M, clusters = gridDim.x / CLUSTER_M;
  const TileScheduler sched(M, N, BM * CLUSTER_M, BN, max(1, GL_GROUP_M / CLUSTER_M));
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();

  if (threadIdx.x == 0) {
    OperandRing::init(s.tma2mma, 1,
                      s.mma2tma, CONSUMER_WARPS * CONSUMERS * CLUSTER_M);  // two consumers: all warps
    EpilogueRing::init(s.mma2ld, CONSUMERS,  // two consumers: one thread of each
                       s.ld2mma, 1);
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
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
          if (A_MN) {  // BM/64 blocks of (BK k-rows x 64 m)
#pragma unroll
            for (int j = 0; j < BM / MN_BLOCK; ++j)
              tma_load_2d(s.A[st.stage] + j * MN_BLOCK * BK, &tmap_a, ops.full_bar(st), m0 + j * MN_BLOCK, kt * BK);
          } else {
            tma_load_2d(s.A[st.stage], &tmap_a, ops.full_bar(st), kt * BK, m0);
          }
          // Either layout: this CTA's B slice is B_SLICE rows of the N-major tile order, i.e.
          // the same bytes of the stage buffer (B_SLICE / 64 blocks when N-major).
          u16* slice = s.B[st.stage] + rank * B_SLICE * BK;
          const int n0 = tn * BN + rank * B_SLICE;
#pragma unroll
          for (int j = 0; j < (B_MN ? B_SLICE / MN_BLOCK : 1); ++j) {
            u16* dst = slice + j * MN_BLOCK * BK;
            const int x = B_MN ? n0 + j * MN_BLOCK : kt * BK, y = B_MN ? kt * BK : n0;
            if (CLUSTER_M == 1)
              tma_load_2d(dst, &tmap_b, ops.full_bar(st), x, y);
            else
              tma_load_2d_multicast(dst, &tmap_b, ops.full_bar(st), x, y, (u16)((1u << CLUSTER_M) - 1));
          }
          tr.event(EV_LOAD_ISSUE, BAR_TMA2MMA, st.stage, st.phase, kt, tile);
          st.advance();
        }
      }
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK ─────────────────────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      const EpilogueRing epi(s.mma2ld, BAR_MMA2LD, s.ld2mma, BAR_LD2MMA, tr);
      tma_prefetch_descriptor(&tmap_c);
      auto chunk_st = PipelineState<EPI_STAGES>::consumer();
      for (int ct = cluster_id; ct < sched.num_tiles(); ct += clusters) {
        int cm, tn;
        sched.coords(ct, cm, tn);
        const int tile = ct * CLUSTER_M + rank, m0 = (cm * CLUSTER_M + rank) * BM;
        for (int c = 0; c < BN / EPI_N; ++c) {  // two consumers: one 128x64 chunk at a time
          epi.consumer_wait(chunk_st, c);
          tma_store_2d(&tmap_c, s.C[chunk_st.stage], tn * BN + c * EPI_N, m0);
          tma_store_commit();
          tr.event(EV_STORE_ISSUE, 0, chunk_st.stage, chunk_st.phase, c, tile);
          tma_store_wait_read<0>();  // the copy engine has read the slot
          tr.event(EV_STORE_DONE, 0, chunk_st.stage, chunk_st.phase, c, tile);
          epi.consumer_release(chunk_st, c);
          chunk_st.advance();
        }
      }
      tma_store_wait_all<0>();
      tr.finish();
    }
  } else {  // ── MMA CONSUMERS (warpgroups 1 .. CONSUMERS) ────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;  // two consumers: which 64 rows of the tile
    const bool wg_leader = threadIdx.x % 128 == 0, warp_leader = lane_idx() == 0;
    Tracer tr(ROLE_CONSUMER, 1 + cw, wg_leader);
    const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
    const EpilogueRing epi(s.mma2ld, BAR_MMA2LD, s.ld2mma, BAR_LD2MMA, tr);
    auto st = PipelineState<DEPTH>::consumer();
    auto chunk_st = PipelineState<EPI_STAGES>::producer();
    float acc[BN / 2];
    for (int ct = cluster_id; ct < sched.num_tiles(); ct += clusters) {
      const int tile = ct * CLUSTER_M + rank;
      zero_acc(acc);
      PipelineState<DEPTH> prev = st;
      for (int kt = 0; kt < k_tiles; ++kt) {
        ops.consumer_wait(st, kt);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {  // a 16-wide k slice: +32 bytes K-major, +16 rows MN-major
          const u16* a = s.A[st.stage] + cw * 64 * BK;
          const u64 da = A_MN ? desc_sw128_mn(a + kk * 16 * MN_BLOCK, MN_BLOCK_BYTES) : desc_sw128(a + kk * 16);
          const u64 db = B_MN ? desc_sw128_mn(s.B[st.stage] + kk * 16 * MN_BLOCK, MN_BLOCK_BYTES)
                              : desc_sw128(s.B[st.stage] + kk * 16);
          wgmma_m64n256k16<A_MN, B_MN>(acc, da, db, 1);
        }
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
      wgmma_wait<0>();
      tr.event(EV_MMA_DONE, 0, prev.stage, prev.phase, k_tiles - 1, tile);
      if (warp_leader) ops.consumer_release(prev, k_tiles - 1);

      // two consumers: the chunked epilogue; each consumer stages its 64 rows of the chunk.
#pragma unroll
      for (int c = 0; c < BN / EPI_N; ++c) {
        epi.producer_acquire(chunk_st, c);  // slot read by the previous store?
        tr.event(EV_EPI_BEGIN, 0, chunk_st.stage, chunk_st.phase, c, tile);
        stage_chunk_sw128<BN, BM>(acc, s.C[chunk_st.stage], 64 * cw, c);
        fence_proxy_async_smem();
        named_barrier_sync(1 + cw, CONSUMER_THREADS);  // this consumer's own barrier
        tr.event(EV_EPI_END, 0, chunk_st.stage, chunk_st.phase, c, tile);
        if (wg_leader) epi.producer_commit(chunk_st, c);
        chunk_st.advance();
      }
    }
    tr.finish();
  }
  cluster_sync();  // as step 8: nobody leaves while the peer may still write into it
}
