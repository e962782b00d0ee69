// Step 11 — fp8. Forced move: the tensor core's fp16 rate is half of what it can do.
// Hopper's wgmma multiplies e4m3 (and e5m2) operands at twice the fp16 rate, and each operand
// byte carries one element instead of half of one, so a stage of the same bytes holds twice
// the k. Step 9's machinery carries over unchanged; what step 11 changes, each marked "fp8:":
//   - A and B in fp8, both K-major (fp8 wgmma has no transpose bits); a k-tile is 128 elements
//     (still one 128-byte swizzle row), a k-slice 32 (wgmma m64n256k32: same 32 bytes);
//   - the values were scaled into fp8's narrow range when they were quantized: the epilogue
//     multiplies the fp32 sum by the product of the two tensors' scales (read from device
//     memory: no host synchronisation) before rounding to bf16 or fp16.
// The sum stays in the tensor core's accumulator for the whole K (torch's use_fast_accum):
// fp8 wgmma accumulates in a narrower format than fp32, and the library's kernel
// (kernels/fp8/fp8_gemm.cu) promotes partial sums into fp32 registers instead, and takes
// row-wise and block-wise scales. Shape: as step 4, K a multiple of 16.
#include "gl_warpspec.cuh"
#include "gl_wgmma_fp8_ops.cuh"  // fp8: m64nNk32 on e4m3

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_EPI_STAGES) || !defined(GL_DYNAMIC_SMEM) || \
    !defined(GL_MMA_LAG)
#error "step 11 takes its configuration from its entry (families/fp8.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_EPI_STAGES, GL_DYNAMIC_SMEM, GL_MMA_LAG"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
constexpr int CONSUMERS = GL_CONSUMERS, EPI_STAGES = GL_EPI_STAGES, EPI_N = 64;
static_assert(BM == 64 * CONSUMERS && BK == 128 && BN == 256, "fp8: a k-tile of 128 bytes; each consumer 64 x 256 (m64n256k32)");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (the ablation 9:c1) or 2 CTAs along M");
constexpr u32 STAGE_BYTES = (BM + BN) * BK;  // fp8: one byte per element (the bytes of step 9's stage)
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 THREADS = 128 * (1 + CONSUMERS);  // two consumers: three warpgroups
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH, CLUSTER_M>;  // cluster: releases reach every CTA's producer
using EpiloguePipe = EpiloguePipeline<EPI_STAGES>;  // two consumers: a ring of chunk slots
constexpr int CHUNKS = BN / EPI_N;

struct SharedStorage {
  u8 A[DEPTH][BM * BK];  // fp8  // two consumers: rows 64c.. of each stage feed consumer c
  u8 B[DEPTH][BN * BK];  // fp8  // shared by both consumers (cluster: slice r written by CTA r's producer)
  u16 C[EPI_STAGES][BM * EPI_N];  // two consumers: chunk slots, 16 KB each
  OperandPipe ops;   // tma2mma[s]: stage s landed; mma2tma[s]: stage s may be refilled
  EpiloguePipe epi;  // mma2ld[c]: chunk staged in slot c; ld2mma[c]: slot c may be reused
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Fp8Entry.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_step11_fp8(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K,
                const float* __restrict__ scale_a, const float* __restrict__ scale_b) {  // fp8: the tensors' scales
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
        load_stage<BM, BN, BK, CLUSTER_M, u8>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0, tiles.rank);
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
        const u8* a = s.A[stage] + cw * 64 * BK;  // two consumers: this one's 64 rows, all of B
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk)  // fp8: k-slices of 32 elements, 32 bytes
          wgmma_m64k32_fp8<BN>(acc, desc_sw128(a + kk * 32), desc_sw128(s.B[stage] + kk * 32), 1);
      });
      mma_drain<MMA_LAG>(ops, last, k_tiles, t.id, warp_leader);
      const float scale = __ldg(scale_a) * __ldg(scale_b);  // fp8: the dequantization, once per tile
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] *= scale;
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
