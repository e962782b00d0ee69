// The fp8 family's kernel (families/fp8.py): ladder step 11's structure with the scales a library
// needs. C = (A @ B^T) scaled, A (M, K) and B (N, K) fp8 (e4m3, or e5m2 on one side), both
// K-major; C in bf16, fp16 or fp32; an optional bias per column. What it adds to step 11:
//   - scales per tensor, row-wise or block-wise (fp8_scales.cuh), read from device memory (no
//     host synchronisation to learn them);
//   - promotion (GL_FP8_PROMOTE > 0): each k-tile's MMAs write a partial sum that a consumer adds
//     into fp32 registers every GL_FP8_PROMOTE k-tiles (block scales: every k-tile, scaled on
//     the way), so the tensor core's narrow accumulation never carries a long sum; with
//     GL_FP8_PIECES = 2 a k-tile's MMAs run as two column pieces through one partial sum, so a
//     64 x 256 consumer tile fits its registers (128 for the sum, 64 for the partial);
//   - any tile width wgmma has for fp8 (64-256), fp32 output staged as 32-column chunks;
//   - split-K (GL_FP8_SPLIT, small M): a tile's k-tiles split over several CTAs, their fp32
//     partials summed by a second launch (1) or on chip by the cluster of a tile's splits (2)
//     (fp8_split.cuh).
// Without promotion the sum stays in the tensor core's accumulator from the first k-tile to the
// last (torch's use_fast_accum=True), and the mainloop is step 9's, MMA_LAG groups in flight.
#include "gl_warpspec.cuh"
#include "gl_wgmma_fp8_ops.cuh"
#include "fp8_scales.cuh"
#include "fp8_split.cuh"
#include "gl_cluster_reduce.cuh"
#include "fp8_pieces.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_EPI_STAGES) || !defined(GL_DYNAMIC_SMEM) || \
    !defined(GL_MMA_LAG) || !defined(GL_FP8_SCALE) || !defined(GL_FP8_PROMOTE) || !defined(GL_FP8_OUT) || \
    !defined(GL_FP8_BIAS) || !defined(GL_FP8_PIECES) || !defined(GL_FP8_SPLIT) || !defined(GL_FP8_REDUCE_BATCH)
#error "the fp8 kernel takes its configuration from its entry (families/fp8.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_EPI_STAGES, GL_DYNAMIC_SMEM, GL_MMA_LAG, GL_FP8_SCALE, GL_FP8_PROMOTE, GL_FP8_OUT, GL_FP8_BIAS, GL_FP8_PIECES, GL_FP8_SPLIT, GL_FP8_REDUCE_BATCH"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG, CONSUMERS = GL_CONSUMERS, EPI_STAGES = GL_EPI_STAGES;
constexpr int SCALE = GL_FP8_SCALE, PROMOTE = GL_FP8_PROMOTE, OUT = GL_FP8_OUT;
constexpr bool BIAS = GL_FP8_BIAS, SPLIT = GL_FP8_SPLIT != 0;  // split: partials out, scales in the reduction
constexpr bool SPLIT_CLUSTER = GL_FP8_SPLIT == 2;  // ... summed on chip by the tile's cluster (one unit per CTA)
constexpr int PROMOTE_EVERY = PROMOTE > 0 ? PROMOTE : 1;  // (a divisor even where unused)
constexpr int PIECES = GL_FP8_PIECES, PN = BN / PIECES;  // a promoted k-tile's column pieces
// Build variants of the promotion (defaults in gl_ablations.cuh, off: the loop as above):
//   GL_FP8_OVERLAP_KT: two partials, so k-tile kt + 1's MMAs run while kt's partial is promoted
//     (the FFMAs under this consumer's own MMAs, not only the other consumer's);
//   GL_FP8_OVERLAP_PIECES: two partials in turn over a k-tile's column pieces, so piece p + 1's
//     MMAs (or the next k-tile's first piece's) run while p's partial is promoted: the overlap
//     where two whole-tile partials do not fit (a 64 x 256 consumer tile: four 64-column pieces,
//     128 registers of sum and 2 x 32 of partials);
//   GL_FP8_SCALE_ROWS: the next k-tile's block scales read where they are (a k-tile ahead, before
//     the MMAs), from pointers set once per tile instead of indexed from the sizes each k-tile;
//   GL_FP8_LATE_SCALES: the next k-tile's block scales read after this k-tile's first MMAs are
//     issued, from pointers set once per tile (off the path from the stage's wait to the MMAs).
// (GL_FP8_OVERLAP_PIECES is read as the macro: a constant at namespace scope is a symbol in every
// build's cubin, and the other builds stay byte for byte as they were.)
constexpr bool OVERLAP_KT = GL_FP8_OVERLAP_KT, LATE_SCALES = GL_FP8_LATE_SCALES, SCALE_ROWS = GL_FP8_SCALE_ROWS;
constexpr bool FACTORS_EARLY = PIECES == 1 && !SPLIT;  // registers to hold the first chunk's epilogue factors
constexpr bool FACTORS_LATE = PIECES > 1 && !SPLIT;  // each chunk reads its own (split: none, the reduction scales)
// A staging chunk is always 128 bytes wide: 64 columns of a 16-bit C, 32 of an fp32 one (or partial).
constexpr bool STAGE_F32 = OUT == FP8_OUT_F32 || SPLIT;
constexpr int EPI_N = STAGE_F32 ? 32 : 64, CHUNKS = BN / EPI_N;
static_assert(BM == 64 * CONSUMERS && BK == 128, "each consumer owns 64 rows; a k-tile is 128 fp8 (128 bytes)");
static_assert(has_wgmma_fp8_n<BN> && BN % 64 == 0, "tile widths with an fp8 wgmma and whole 64-column chunks");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 or 2 CTAs along M");
static_assert(!SPLIT || (CLUSTER_M == 1 && PROMOTE == 1), "split-K: no multicast cluster (its CTAs share k-ranges), promoted");
static_assert(GL_FP8_SPLIT >= 0 && GL_FP8_SPLIT <= 2, "GL_FP8_SPLIT: 0 whole tiles, 1 planes and a second launch, 2 on chip");
static_assert(SCALE != FP8_SCALE_BLOCK || (PROMOTE == 1 && FP8_SCALE_BLOCK_K % PN == 0),
              "block scales change every k-block: promote every k-tile, each piece inside one n-block");
static_assert(!OVERLAP_KT || (PIECES == 1 && PROMOTE == 1), "overlap across k-tiles: one piece, promoted every k-tile");
static_assert(!GL_FP8_OVERLAP_PIECES || (!OVERLAP_KT && PROMOTE == 1 && PIECES % 2 == 0),
              "overlapped pieces: promoted every k-tile, an even number of pieces (piece h in partial h % 2)");
static_assert(PIECES == 1 || (PROMOTE == 1 && BN % PIECES == 0 && has_wgmma_fp8_n<PN>),
              "pieces share one partial sum: promote every k-tile");
static_assert(PROMOTE >= 0 && (GL_BF16 == (OUT == FP8_OUT_BF16)), "GL_BF16 follows the output type (pack2)");
// A stage's bytes (fp8: one per element): A's box rows (a_rows, from the host: BM, or M rounded up
// to 8 when C has one tile row of fewer rows) and B's BN rows of BK. The A stage's rows past the
// box keep what they held: wgmma computes garbage rows of C there, which no epilogue stores (TMA
// clips rows >= M). TMA writes a box's out-of-range rows as zeros one by one: at M = 64 a
// 128-row box fetched twice A's bytes (docs/perf-notes.md item 98).
GL_DEVICE u32 stage_bytes(int a_rows) { return (u32)(a_rows + BN) * BK; }
constexpr u32 CONSUMER_WARPS = 4, THREADS = 128 * (1 + CONSUMERS);
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH, CLUSTER_M>;
using EpiloguePipe = EpiloguePipeline<EPI_STAGES>;

struct SharedStorage {
  u8 A[DEPTH][BM * BK];
  u8 B[DEPTH][BN * BK];
  u16 C[EPI_STAGES][BM * 64];  // chunk slots of 128 x 128 bytes
  OperandPipe ops;
  EpiloguePipe epi;
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "Fp8Entry.dynamic_smem is too small");
// On-chip split-K: a tile's fp32 piece in the drained operand ring (A's stages, then B's).
static_assert(!SPLIT_CLUSTER || BM * piece_ld<BN>() * 4 <= DEPTH * (BM + BN) * BK, "the ring must hold a tile's piece");
constexpr u32 BAR_BOTH_CONSUMERS = 1 + CONSUMERS;  // named barrier: every consumer (1 + cw: consumer cw's own)

// One k-tile's MMAs of a consumer: its 64 rows of A against W rows of B (all of it, or a piece:
// whole 8-row groups, so a piece's descriptor starts on a 1024-byte group), k-slices of 32. The
// later slices' descriptors are advanced from the first (desc_advance): three uniform-datapath
// steps apiece instead of the five of building each from its address, and 0.5-2.7 % faster
// (docs/perf-notes.md item 97).
template <int W>
GL_DEVICE void issue_ktile(float (&d)[W / 2], const u8* a, const u8* b, u32 first_scale_d) {
  const u64 da = desc_sw128(a), db = desc_sw128(b);
#pragma unroll
  for (int kk = 0; kk < BK / 32; ++kk)
    wgmma_m64k32_fp8<W>(d, desc_advance(da, kk * 32), desc_advance(db, kk * 32), kk == 0 ? first_scale_d : 1u);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
fp8_gemm(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
         const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K, const float* __restrict__ scale_a,
         const float* __restrict__ scale_b, const void* __restrict__ bias, int splits, void* __restrict__ c_out,
         int a_rows) {
  // tmap_c: C, or with planes (GL_FP8_SPLIT 1) the (splits, M, N) fp32 workspace; c_out: C, written
  // directly by the on-chip split-K (GL_FP8_SPLIT 2); a_rows: the rows of A's box (stage_bytes)
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const TileWalk<CLUSTER_M> tiles(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const Fp8Work<CLUSTER_M> work{tiles, k_tiles, SPLIT ? splits : 1};
  const int warp = warp_idx();

  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);
  if (threadIdx.x == 0) {
    s.ops.init(1, CONSUMER_WARPS * CONSUMERS);
    s.epi.init(CONSUMERS, 1);
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      producer_loop<OperandPipe>(s.ops.bind(tr, stage_bytes(a_rows)), work, tiles, BM, BN,
                                 [&](int stage, u64* full, int kt, const auto& t) {
        load_stage<BM, BN, BK, CLUSTER_M, u8>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0,
                                              tiles.rank);
      });
      tr.finish();
    } else if (!SPLIT_CLUSTER && warp == 1 && elect_one()) {  // ── WRITEBACK ─────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      const auto epi = s.epi.bind(tr);
      auto chunk_st = EpiloguePipe::State::consumer();
      for (int u = tiles.first(); u < work.units(); u += tiles.stride()) {
        const auto w = work.unit(u);
        const auto t = tiles.at(w.ct, BM, BN);
        for (int c = 0; c < CHUNKS; ++c) {
          if constexpr (SPLIT) {  // split: the partial's chunk into plane w.split of the workspace
            epi.consumer_wait(chunk_st, c);
            tma_store_3d(&tmap_c, s.C[chunk_st.stage], t.n0 + c * EPI_N, t.m0, w.split);
            tma_store_commit();
            tma_store_wait_read<0>();
            epi.consumer_release(chunk_st, c);
          } else {
            store_staged<BM, 64>(epi, chunk_st, &tmap_c, s.C[chunk_st.stage], t.n0 + c * EPI_N, t.m0, c, t.id);
          }
          chunk_st.advance();
        }
      }
      tma_store_wait_exit();
      tr.finish();
    }
    // on-chip split-K: this warpgroup only meets the cluster's two barriers of the consumers' sum
    // (none in a cluster of one CTA, one split: there barrier.cluster becomes bar.sync 0, a CTA
    // barrier the roles would reach from different branches)
    if constexpr (SPLIT_CLUSTER) {
      if (cluster_size() > 1) {
        cluster_sync();
        cluster_sync();
      }
    }
  } else {  // ── MMA CONSUMERS ─────────────────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;
    const bool wg_leader = threadIdx.x % 128 == 0;
    Tracer tr(ROLE_CONSUMER, 1 + cw, wg_leader);
    const auto ops = s.ops.bind(tr);
    const auto epi = s.epi.bind(tr);
    const bool warp_leader = lane_idx() == 0;
    auto st = OperandPipe::State::consumer();
    auto chunk_st = EpiloguePipe::State::producer();
    const int k_blocks = ceil_div(K, FP8_SCALE_BLOCK_K);
    float acc[BN / 2];
    float* piece = reinterpret_cast<float*>(&s.A[0][0]);  // on-chip split-K: this CTA's partial of the tile
    int piece_m0 = 0, piece_n0 = 0;
    for (int u = tiles.first(); u < work.units(); u += tiles.stride()) {
      const auto w = work.unit(u);
      const auto t = tiles.at(w.ct, BM, BN);
      const int row0 = t.m0 + 64 * cw;  // this consumer's first row of C
      // the epilogue's factors of the first chunk, read now: their latency hides under the mainloop
      // (a sum and a partial of 64 x 256 leave no registers to hold them: each chunk reads its own)
      if constexpr (!SPLIT && (SCALE == FP8_SCALE_ROW || BIAS))
        if (cw == 0 && wg_leader)  // one thread: the columns are the whole CTA's
          prefetch_col_factors<BN, OUT == FP8_OUT_F32 ? 4 : 2>(SCALE == FP8_SCALE_ROW ? scale_b : nullptr,
                                                              BIAS ? bias : nullptr, N, t.n0);
      RowScales rows{1.f, 1.f};
      if constexpr (!SPLIT) rows = epilogue_row_scales<SCALE>(scale_a, scale_b, M, row0);
      ColFactors<SCALE, BIAS, EPI_N / 8> cols;
      if constexpr (FACTORS_EARLY) cols = load_col_factors<SCALE, BIAS, OUT, EPI_N / 8>(scale_b, bias, N, t.n0, 0);
      zero_acc(acc);
      const BlockScaleRows<PIECES, PN> scale_rows(scale_a, scale_b, M, k_blocks, fragment_row(row0), t.n0);
      if constexpr (PROMOTE > 0 && OVERLAP_KT) {
        // k-tile kt's partial retires (wait_group 1) once kt + 1's MMAs are in flight in the
        // other partial; the loop is unrolled by two so each partial is a fixed register set
        float part[2][PN / 2];
        BlockScales<PIECES> sc[2], pending = unit_scales<PIECES>();  // pending: the next k-tile's, read a k-tile ahead
        auto rel = st;  // the stage whose partial retires next (st: the next to issue)
        auto issue = [&](float (&p)[PN / 2], BlockScales<PIECES>& p_sc, int kt) {
          ops.consumer_wait(st, kt);
          ops.tr.event(EV_MMA_ISSUE, 0, st.stage, st.phase, kt, t.id);
          wgmma_fence();
          issue_ktile<PN>(p, s.A[st.stage] + cw * 64 * BK, s.B[st.stage], 0u);
          wgmma_commit();
          p_sc = pending;  // read under the previous k-tile's MMAs; the next one's now, under these
          if constexpr (SCALE == FP8_SCALE_BLOCK)
            if (kt + 1 < w.k1) pending = scale_rows.at(kt + 1);
          st.advance();
        };
        auto retire = [&](float (&p)[PN / 2], const BlockScales<PIECES>& p_sc, int kt) {
          fence_acc(p);
          ops.tr.event(EV_MMA_DONE, 0, rel.stage, rel.phase, kt, t.id);
          if (warp_leader) ops.consumer_release(rel, kt);
          rel.advance();
          fp8_promote(acc, 0, p, p_sc.lo * p_sc.b[0], p_sc.hi * p_sc.b[0]);
        };
        if constexpr (SCALE == FP8_SCALE_BLOCK) pending = scale_rows.at(w.k0);
        if (w.k0 < w.k1) {
          issue(part[0], sc[0], w.k0);
          int kt = w.k0;  // part[0] holds kt, in flight
          for (; kt + 2 < w.k1; kt += 2) {
            issue(part[1], sc[1], kt + 1);
            wgmma_wait<1>();
            retire(part[0], sc[0], kt);
            issue(part[0], sc[0], kt + 2);
            wgmma_wait<1>();
            retire(part[1], sc[1], kt + 1);
          }
          if (kt + 1 < w.k1) {  // the last two k-tiles
            issue(part[1], sc[1], kt + 1);
            wgmma_wait<1>();
            retire(part[0], sc[0], kt);
            wgmma_wait<0>();
            retire(part[1], sc[1], kt + 1);
          } else {
            wgmma_wait<0>();
            retire(part[0], sc[0], kt);
          }
        }
      } else if constexpr (PROMOTE > 0 && GL_FP8_OVERLAP_PIECES) {
        // piece h of every k-tile in partial h % 2, promoted while the next piece's MMAs run
        // (fp8_pieces.cuh: the order, and the shape of loop ptxas keeps unserialized)
        float part[2][PN / 2];
        // the block scales per 128-column n-block (a piece lies in one): the promoted k-tile's
        // factors, taken from `pending` as its first piece retires (after the previous k-tile's
        // last), when the next k-tile's scales are requested, a k-tile ahead of their use
        constexpr int N_BLOCKS = BN < FP8_SCALE_BLOCK_K ? 1 : BN / FP8_SCALE_BLOCK_K;
        const BlockScaleRows<N_BLOCKS, FP8_SCALE_BLOCK_K> block_rows(scale_a, scale_b, M, k_blocks,
                                                                     fragment_row(row0), t.n0);
        auto pending = unit_scales<N_BLOCKS>();
        PromoteFactors<N_BLOCKS> f;
        if constexpr (SCALE == FP8_SCALE_BLOCK) pending = block_rows.at<true>(w.k0);
        auto rel = st;  // the stage whose last piece retires next (st: the next to issue)
        auto issue = [&](int kt, int h) {
          if (h == 0) {
            ops.consumer_wait(st, kt);
            ops.tr.event(EV_MMA_ISSUE, 0, st.stage, st.phase, kt, t.id);
          }
          wgmma_fence();
          issue_ktile<PN>(part[h % 2], s.A[st.stage] + cw * 64 * BK, s.B[st.stage] + h * PN * BK, 0u);
          wgmma_commit();
          if (h + 1 == PIECES) st.advance();
        };
        auto retire = [&](int kt, int h) {
          fence_acc(part[h % 2]);
          if (h == 0) {
            f = promote_factors(pending);
            if constexpr (SCALE == FP8_SCALE_BLOCK)
              if (kt + 1 < w.k1) pending = block_rows.at<true>(kt + 1);
          }
          if (h + 1 == PIECES) {  // the stage's last reader: hand it back before the promotion
            ops.tr.event(EV_MMA_DONE, 0, rel.stage, rel.phase, kt, t.id);
            if (warp_leader) ops.consumer_release(rel, kt);
            rel.advance();
          }
          const int nb = h * PN / FP8_SCALE_BLOCK_K;
          fp8_promote(acc, h * PN / 2, part[h % 2], f.lo[nb], f.hi[nb]);
        };
        overlapped_pieces<PIECES>(w.k0, w.k1, issue, retire);
      } else if constexpr (PROMOTE > 0) {
        // promotion: a piece's partial sum retires (wait_group 0) before it is added in
        float part[PN / 2];
        auto next_sc = unit_scales<PIECES>();
        if constexpr (SCALE == FP8_SCALE_BLOCK)
          next_sc = LATE_SCALES ? scale_rows.at(w.k0)
                    : SCALE_ROWS ? scale_rows.at<true>(w.k0)
                                 : block_scales<PIECES, PN>(scale_a, scale_b, M, k_blocks, fragment_row(row0), t.n0, w.k0);
        for (int kt = w.k0; kt < w.k1; ++kt) {
          ops.consumer_wait(st, kt);
          const auto sc = next_sc;  // read a k-tile ahead: global latency exceeds a k-tile's MMAs
          if constexpr (SCALE == FP8_SCALE_BLOCK && !LATE_SCALES)
            if (kt + 1 < w.k1)
              next_sc = SCALE_ROWS ? scale_rows.at<true>(kt + 1)  // per-thread B (no uniform-register wait)
                                   : block_scales<PIECES, PN>(scale_a, scale_b, M, k_blocks, fragment_row(row0), t.n0, kt + 1);
          ops.tr.event(EV_MMA_ISSUE, 0, st.stage, st.phase, kt, t.id);
#pragma unroll
          for (int h = 0; h < PIECES; ++h) {
            wgmma_fence();
            issue_ktile<PN>(part, s.A[st.stage] + cw * 64 * BK, s.B[st.stage] + h * PN * BK,
                            (kt - w.k0) % PROMOTE_EVERY == 0 ? 0u : 1u);
            wgmma_commit();
            if constexpr (SCALE == FP8_SCALE_BLOCK && LATE_SCALES)
              if (h == 0 && kt + 1 < w.k1) next_sc = scale_rows.at(kt + 1);  // under this k-tile's MMAs
            wgmma_wait<0>();
            fence_acc(part);
            if (h + 1 == PIECES) {  // the stage's last reader: hand it back before the last promotion
              ops.tr.event(EV_MMA_DONE, 0, st.stage, st.phase, kt, t.id);
              if (warp_leader) ops.consumer_release(st, kt);
            }
            if ((kt - w.k0 + 1) % PROMOTE_EVERY == 0 || kt + 1 == w.k1)
              fp8_promote(acc, h * PN / 2, part, sc.lo * sc.b[h], sc.hi * sc.b[h]);
          }
          st.advance();
        }
      } else {  // the sum stays in the tensor core's accumulator (step 11's mainloop)
        const auto last = mma_mainloop<MMA_LAG>(ops, st, k_tiles, t.id, warp_leader, [&](int stage) {
          issue_ktile<BN>(acc, s.A[stage] + cw * 64 * BK, s.B[stage], 1u);
        });
        mma_drain<MMA_LAG>(ops, last, k_tiles, t.id, warp_leader);
      }
      if constexpr (SPLIT_CLUSTER) {  // the partial into the ring, once both consumers' MMAs have read it
        __syncwarp();  // the warp whole again after its leader's releases (bar.sync is warp-aligned)
        named_barrier_sync(BAR_BOTH_CONSUMERS, 128 * CONSUMERS);
        stage_piece<BN>(acc, piece, 64 * cw, M - row0);
        piece_m0 = t.m0, piece_n0 = t.n0;
      } else {
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c) {
          if constexpr (FACTORS_LATE) cols = load_col_factors<SCALE, BIAS, OUT, EPI_N / 8>(scale_b, bias, N, t.n0, c * EPI_N / 8);
          if constexpr (!SPLIT) fp8_epilogue_scale<BN, SCALE, BIAS, EPI_N / 8>(acc, rows, cols, c * EPI_N / 8);
          if (FACTORS_EARLY && c + 1 < CHUNKS)  // the next chunk's, read while this one is staged
            cols = load_col_factors<SCALE, BIAS, OUT, EPI_N / 8>(scale_b, bias, N, t.n0, (c + 1) * EPI_N / 8);
          stage_and_commit(epi, chunk_st, 1 + cw, wg_leader, c, t.id, [&] {
            if constexpr (STAGE_F32) stage_chunk_f32_sw128<BN, BM>(acc, s.C[chunk_st.stage], 64 * cw, c);
            else stage_chunk_sw128<BN, BM>(acc, s.C[chunk_st.stage], 64 * cw, c);
          });
          chunk_st.advance();
        }
      }
    }
    if constexpr (SPLIT_CLUSTER) {  // every thread of every CTA of the cluster meets both barriers
      const u32 pieces = cluster_size();
      if (pieces > 1) {
        cluster_sync();  // every split's piece staged and visible cluster-wide
      } else {  // one split: both consumers' halves staged
        __syncwarp();
        named_barrier_sync(BAR_BOTH_CONSUMERS, 128 * CONSUMERS);
      }
      reduce_slice<BN>(piece, min(BM, M - piece_m0), N - piece_n0, cluster_ctarank(), pieces,
                       threadIdx.x - 128, 128 * CONSUMERS, [&](int row, int col, float4 sum) {
        finish_quad<SCALE, BIAS, OUT>(sum, c_out, N, piece_m0 + row, piece_n0 + col, scale_a, scale_b, bias);
      });
      if (pieces > 1) cluster_sync();  // the peers have read this CTA's piece
    }
    tr.finish();
  }
  cluster_sync_before_exit();
}

// Split-K's second launch: the workspace's planes summed, scaled, biased, converted (fp8_split.cuh).
extern "C" __global__ void __launch_bounds__(256)
fp8_splitk_reduce(const float* __restrict__ ws, void* __restrict__ c, int M, int N, int splits,
                  const float* __restrict__ scale_a, const float* __restrict__ scale_b, const void* __restrict__ bias) {
  splitk_reduce<SCALE, BIAS, OUT>(ws, c, M, N, splits, scale_a, scale_b, bias);
}
