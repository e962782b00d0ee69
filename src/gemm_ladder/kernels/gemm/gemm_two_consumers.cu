// The library's GEMM, two consumer warpgroups (CUTLASS's "cooperative"): ladder step 9's
// structure (kernels/ladder/step9_multi_consumer.cu: a producer/writeback warpgroup, two
// consumers sharing each staged B, the chunked epilogue, an optional 2-CTA cluster multicasting
// B) with everything the library needs beyond the lesson. Its pieces: the mainloop
// (gemm_mainloop.cuh: MN-major operands, early loads), the epilogue (gemm_epilogue.cuh: the
// borrowed stage; narrow last chunks), the tile scheduler (gemm_scheduler.cuh: stream-K). Its
// configuration comes from its family entry (families/gemm.py), which also launches it.
// Layouts: besides K-major A and B, this kernel reads an M-major A (GL_A_MN) and an N-major B
// (GL_B_MN, B given as a row-major (K, N) matrix): TMA then loads 64-wide MN blocks of k-rows
// and wgmma reads them through its transpose bits, so no operand is ever copied.
// Tile width: 256, or 192 in the gemm:128x192 entry (m64n192k16, three epilogue chunks), which
// the selection takes where 256-wide tiles leave a ragged last wave (3072^3: 288 tiles of
// 128x256 are 2.2 waves of 132 CTAs, 384 of 128x192 are 2.9), or 176 in gemm:128x176 (512 x 11008:
// 252 tiles of 128x176 are two full waves, 232 of 128x192 leave the second one 3/4 full);
// and 168, 224, 232 or 240 where one of those fills the waves best (3000 x 5000: 528
// tiles of 128 x 232 are four full waves; 128 x 192 needs 648 tiles, five waves); 144 and 104
// are experiments (one full wave at 1536^3 and 1280^3).
// A width that is not a multiple of 64 leaves a narrower last chunk (TAIL columns): it is
// staged unswizzled, TAIL x 2 bytes per row, and stored through a second C map whose box is
// that narrow (tmap_c_tail), so no store reaches into the next tile. An N-major B still
// travels in whole 64-wide blocks (the last one partly unused: wgmma reads BN columns).
// Stream-K (GL_STREAM_K, the gemm:128x256sk entry, no cluster): the last wave of whole tiles is ragged
// where the tile count is not a multiple of the CTAs (512 x 11008: 172 tiles of 128 x 256 on
// 132 SMs are 1.3 waves). The host names the last `sk_tiles` tiles of the order (the
// remainder) and the sk_ctas = P x sk_tiles CTAs that share them: P pieces of equal k-ranges
// per tile, after the whole tiles (for_each_segment). A split tile is summed in the kernel in
// column slices (gl_fixup.cuh): piece j writes chunks [j C / P, (j + 1) C / P) of the tile's C =
// BN / 64 chunks; it publishes its other chunks to its fp32 slot, adds the other pieces' parts
// of its own (in piece order) and runs the usual epilogue on them; the writeback stores them.
// Borrowed stage (GL_EPI_BORROW, the family's borrow_stage): with two 16 KB slots a tile's 4 chunks
// wait twice for the copy engine to read a slot before they can be staged, while the tensor
// core idles. But the operand stage that held the tile's last k-tile is drained when the
// epilogue starts (wgmma.wait_group 0), and the producer has already filled the other stages
// with the next tile's first k-tiles. So the consumers keep it instead of releasing it: its A
// part and B part take the first LENT chunks (each signalled on lent_full[c]; the B part only
// once both consumers' MMAs are done with it), the ring the rest; the writeback stores them
// and, once the copy engine has read them, releases the stage to the producer(s) with the
// consumers' arrivals. Needs k_tiles >= DEPTH (the next tile's mainloop then cannot end
// before the stage came back, so lent_full[c] completes one phase per tile); shorter K stages
// every chunk through the ring. (docs/perf-notes.md item 62: +0.8 % over the suite's shapes
// that ran this kernel, up to +8 % at short K.)
// Early loads (the family's early_loads; GL_EARLY_LOADS, gemm_mainloop.cuh): without a cluster (every
// entry but gemm:128x256c2), thread 0 starts the first stages of its first tile right after the barrier
// init, while the CTA sets up: +0.8 % at 2048^3, +1 % at 1024^3 (docs/perf-notes.md, item 74).
// Shape: as step 4 (with an MN-major operand, its M or N a multiple of 8 instead of K).
#include "gl_fixup.cuh"
#include "gemm_epilogue.cuh"
#include "gemm_mainloop.cuh"
#include "gemm_scheduler.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_GROUP_M) || \
    !defined(GL_CLUSTER_M) || !defined(GL_CONSUMERS) || !defined(GL_EPI_STAGES) || !defined(GL_DYNAMIC_SMEM) || \
    !defined(GL_STREAM_K) || !defined(GL_MMA_LAG) || !defined(GL_EPI_BORROW) || !defined(GL_EPI_LENT) || \
    !defined(GL_EARLY_LOADS)
#error "gemm_two_consumers takes its configuration from its family entry (families/gemm.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_GROUP_M, GL_CLUSTER_M, GL_CONSUMERS, GL_EPI_STAGES, GL_DYNAMIC_SMEM, GL_STREAM_K, GL_MMA_LAG, GL_EPI_BORROW, GL_EPI_LENT, GL_EARLY_LOADS"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CLUSTER_M = GL_CLUSTER_M;
constexpr int MMA_LAG = GL_MMA_LAG;  // wgmma groups kept in flight by a consumer (gl_warpspec.cuh)
constexpr int CONSUMERS = GL_CONSUMERS, EPI_STAGES = GL_EPI_STAGES, EPI_N = 64;
static_assert(BK == 64 && BN >= 104 && BN <= 256 && has_wgmma_n<BN> && BM == 64 * CONSUMERS,
              "each consumer owns 64 x BN: BN 104 .. 256 (m64nBNk16)");
static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 (ablation) or 2 CTAs along M");
static_assert(EPI_STAGES >= 1, "the epilogue ring needs a staging slot");
constexpr int TAIL = BN % EPI_N;  // columns of a narrower last chunk (0: every chunk is 64 wide)
static_assert(TAIL % 8 == 0 && (TAIL == 0 || CLUSTER_M == 1), "a narrow last chunk: 8-column blocks, no cluster");
constexpr bool A_MN = GL_A_MN, B_MN = GL_B_MN, STREAM_K = GL_STREAM_K;
static_assert(!STREAM_K || CLUSTER_M == 1, "stream-K runs without a cluster");
static_assert(!B_MN || CLUSTER_M == 1 || (BN / CLUSTER_M) % 64 == 0, "an N-major B travels in 64-wide blocks per CTA");
constexpr int MN_BLOCK = 64;                        // MN-major operands: 64-element blocks (128 B rows)
constexpr u32 MN_BLOCK_BYTES = MN_BLOCK * BK * 2;  // one block of k-rows
constexpr int BN_SMEM = (BN + MN_BLOCK - 1) / MN_BLOCK * MN_BLOCK;  // B rows a stage holds (the family's stage_bytes)
constexpr u32 STAGE_BYTES = (BM + (B_MN ? BN_SMEM : BN)) * BK * 2;  // what lands per stage (whole N-major blocks)
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 THREADS = 128 * (1 + CONSUMERS);
// setmaxnreg moves registers inside the CTA's launch allocation (168 per thread at 384 threads):
// what the producer warpgroup gives up is all the consumers can take, or their inc never
// returns. The traced build's writeback holds its recorder besides the borrowed stage's state,
// so it keeps 56 and the consumers take 224 (ptxas' report: their code fits either way).
constexpr bool TRACED_BORROW = GL_TRACE && GL_EPI_BORROW;
constexpr u32 PRODUCER_REGS = TRACED_BORROW ? 56 : 40, CONSUMER_REGS = TRACED_BORROW ? 224 : 232;
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * CONSUMERS <= 65536 / THREADS / 8 * 8 * THREADS,
              "setmaxnreg: the consumers would wait for registers the CTA does not have");
using OperandPipe = Pipeline<DEPTH, CLUSTER_M>;
using EpiloguePipe = EpiloguePipeline<EPI_STAGES>;
using Fixup = FixupSlots<BM, BN, CONSUMERS>;
constexpr u32 BAR_CONSUMERS = 3;  // named barrier of both consumer warpgroups (1 + cw: each its own)
constexpr int CHUNKS = (BN + EPI_N - 1) / EPI_N;  // the last one TAIL wide when TAIL > 0
static_assert(!STREAM_K || BN % EPI_N == 0, "stream-K slices are whole 64-column chunks");
constexpr bool BORROW = GL_EPI_BORROW;
static_assert(!BORROW || (!STREAM_K && MMA_LAG == 1), "the borrowed stage: whole tiles, one wgmma group in flight");
// Chunks staged in the borrowed stage (the family's borrowed_chunks); they must fit: one in its A part
// (BM x BK = BM x EPI_N), the rest in its B part (the last of them may be the narrow TAIL chunk,
// staged plain: at BN 104 both chunks are lent and none goes through the epilogue ring).
constexpr int LENT = GL_EPI_LENT, LENT_ROOM = 1 + BN_SMEM * BK / (BM * EPI_N);
static_assert(BORROW == (LENT > 0) && LENT <= CHUNKS && LENT <= LENT_ROOM, "the borrowed stage holds LENT chunks");
// The chunks of each tile staged in the borrowed stage: LENT, or none when K has fewer than
// DEPTH k-tiles (the header comment says why). Consumers and writeback both ask here.
GL_DEVICE int lent_chunks(int k_tiles) { return k_tiles >= DEPTH ? LENT : 0; }
// Stream-K: the chunks [c0, c1) that piece j of a split tile's p writes (p <= CHUNKS).
GL_DEVICE void slice_of(int j, int p, int& c0, int& c1) {
  c0 = j * CHUNKS / p;
  c1 = (j + 1) * CHUNKS / p;
}

struct SharedStorage {
  u16 A[DEPTH][BM * BK];          // rows 64c.. of each stage feed consumer c
  u16 B[DEPTH][BN_SMEM * BK];     // shared by both consumers (and, sliced, by both CTAs)
  // (stream-K: the drained A and B stages, contiguous, hold the fixup's reads)
  u16 C[EPI_STAGES][BM * EPI_N];  // two consumers: chunk slots, 16 KB each
  OperandPipe ops;                          // tma2mma / mma2tma per stage
  EpiloguePipe epi;                         // mma2ld / ld2mma per chunk slot
  Signals<(LENT > 0 ? LENT : 1), BAR_LENT_FULL> lent;// borrowed stage: chunk c staged (count: the consumers)
};
// Chunk slot c (< LENT) of operand stage `stage`: 1024-byte aligned, as a swizzled chunk needs (a plain
// TAIL chunk needs 128).
GL_DEVICE u16* lent_slot(SharedStorage& s, int stage, int c) {
  return c == 0 ? s.A[stage] : s.B[stage] + (c - 1) * BM * EPI_N;
}
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "the family's dynamic_smem is too small");
static_assert(!STREAM_K || DEPTH * (BM + BN) * BK * 2 >= CONSUMERS * 64 * BN * 4, "the ring holds a slot per consumer");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_two_consumers(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                   const __grid_constant__ CUtensorMap tmap_c,
#if GL_BN % 64
                   const __grid_constant__ CUtensorMap tmap_c_tail,  // box: TAIL columns, unswizzled
#endif
                   int M, int N, int K
#if GL_STREAM_K
                   , float* __restrict__ ws, int sk_tiles, int sk_ctas  // stream-K: flags + slots, the split
#endif
) {
#if !GL_STREAM_K
  constexpr int sk_tiles = 0, sk_ctas = 1;
  float* ws = nullptr;
#endif
  const int pieces = sk_ctas / max(sk_tiles, 1);  // stream-K: the CTAs sharing each split tile
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const TileWalk<CLUSTER_M> tiles(M, N, BM, BN, GL_GROUP_M);
  const int k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();
  const int early = early_k_tiles<DEPTH, STREAM_K>(tiles, k_tiles);  // GL_EARLY_LOADS (gl_warpspec.cuh)

  // the maps' descriptors fetched while thread 0 initialises the barriers (gl_tma.cuh)
#if GL_BN % 64
  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c, &tmap_c_tail);
#else
  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);
#endif
  if (threadIdx.x == 0) {
    s.ops.init(1, CONSUMER_WARPS * CONSUMERS);  // the producer's arrive.expect_tx; every consumer warp
    s.epi.init(CONSUMERS, 1);                  // one thread of each consumer; the writeback thread
    if (LENT > 0) s.lent.init(CONSUMERS);
    fence_barrier_init();
  }
  cluster_arrive();
  if (threadIdx.x == 0) {  // after its arrive: a first copy may wait for its map's descriptor, the others need not
    Tracer untraced(ROLE_PRODUCER, 0, false);  // a traced build has no early loads
    early_loads<OperandPipe, BM, BN, BK, CLUSTER_M, A_MN, B_MN>(early, s.ops.bind(untraced, STAGE_BYTES), s.A[0],
                                                                s.B[0], BM * BK, BN_SMEM * BK, &tmap_a, &tmap_b, tiles);
  }
  cluster_wait();

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      const Segments<STREAM_K, CLUSTER_M> work{tiles, k_tiles, sk_tiles, sk_ctas};
      producer_loop<OperandPipe>(s.ops.bind(tr, STAGE_BYTES), work, tiles, BM, BN,
                                 [&](int stage, u64* full, int kt, const auto& t) {
        load_operands<BM, BN, BK, CLUSTER_M, A_MN, B_MN>(s.A[stage], s.B[stage], &tmap_a, &tmap_b, full, kt, t.m0, t.n0,
                                                         tiles.rank);
      }, early);
      tr.finish();
    } else if (warp == 1 && elect_one()) {  // ── WRITEBACK ─────────────────────────
      Tracer tr(ROLE_WRITEBACK, 3, true);
      const auto epi = s.epi.bind(tr);
      const auto lent_chunks_staged = s.lent.bind(tr);
      auto chunk_st = EpiloguePipe::State::consumer();
      const int lent = lent_chunks(k_tiles);  // chunks [0, lent): the borrowed stage
      u32 tiles_done = 0;  // borrowed stage: its place in the operand ring follows (whole tiles of k_tiles)
      auto c_map = [&](int c) {
#if GL_BN % 64
        return c == CHUNKS - 1 ? &tmap_c_tail : &tmap_c;  // the narrow last chunk
#else
        (void)c;
        return &tmap_c;
#endif
      };
      for_each_segment<STREAM_K>(tiles, k_tiles, sk_tiles, sk_ctas, [&](int ct, int k0, int k1) {
        const auto t = tiles.at(ct, BM, BN);
        int c0 = 0, c1 = CHUNKS;  // stream-K: a split tile's piece stores its slice of chunks
        if (STREAM_K && k1 - k0 < k_tiles) slice_of(tiles.cluster_id % pieces, pieces, c0, c1);
        if constexpr (BORROW) {
          if (lent) {  // borrowed stage: store its chunks, and once they are read, give it back
            const u32 last_k = tiles_done * k_tiles + k_tiles - 1, phase = tiles_done & 1u;
            const auto op_st = OperandPipe::State::consumer_at(last_k);  // the stage of the tile's last k-tile
            for (int c = 0; c < lent; ++c)
              store_signalled<BM, EPI_N>(lent_chunks_staged, c, phase, c_map(c), lent_slot(s, op_st.stage, c),
                                         t.n0 + c * EPI_N, t.m0, c, t.id);
            tma_store_wait_read<0>();
            for (int c = 0; c < lent; ++c) tr.event(EV_STORE_DONE, BAR_LENT_FULL, c, phase, c, t.id);
            s.ops.bind(tr).consumer_release_for(op_st, CONSUMER_WARPS * CONSUMERS, k1 - 1);
            ++tiles_done;
            c0 = lent;
          }
        }
        for (int c = c0; c < c1; ++c) {  // two consumers: one 128x64 chunk at a time
          store_staged<BM, EPI_N>(epi, chunk_st, c_map(c), s.C[chunk_st.stage], t.n0 + c * EPI_N, t.m0, c, t.id);
          chunk_st.advance();
        }
      });
      tma_store_wait_exit();
      tr.finish();
    }
  } else {  // ── MMA CONSUMERS (warpgroups 1 .. CONSUMERS) ────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;  // two consumers: which 64 rows of the tile
    const bool wg_leader = threadIdx.x % 128 == 0, warp_leader = lane_idx() == 0;
    Tracer tr(ROLE_CONSUMER, 1 + cw, wg_leader);
    const auto ops = s.ops.bind(tr);
    const auto epi = s.epi.bind(tr);
    const auto lent_chunks_staged = s.lent.bind(tr);
    auto st = OperandPipe::State::consumer();
    auto chunk_st = EpiloguePipe::State::producer();
    float acc[BN / 2];
    for_each_segment<STREAM_K>(tiles, k_tiles, sk_tiles, sk_ctas, [&](int ct, int k0, int k1) {
      const auto t = tiles.at(ct, BM, BN);
      const int count = k1 - k0;  // >= 1
      zero_acc(acc);
      const auto last = mma_mainloop<MMA_LAG>(ops, st, count, t.id, warp_leader, [&](int stage) {
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {  // a 16-wide k slice: +32 bytes K-major, +16 rows MN-major
          const u16* a = s.A[stage] + cw * 64 * BK;
          const u64 da = A_MN ? desc_sw128_mn(a + kk * 16 * MN_BLOCK, MN_BLOCK_BYTES) : desc_sw128(a + kk * 16);
          const u64 db = B_MN ? desc_sw128_mn(s.B[stage] + kk * 16 * MN_BLOCK, MN_BLOCK_BYTES)
                              : desc_sw128(s.B[stage] + kk * 16);
          wgmma_m64k16<BN, A_MN, B_MN>(acc, da, db, 1);
        }
      });
      const bool lend = lent_chunks(k_tiles) > 0;  // borrowed stage: keep the last k-tile's stage
      mma_drain<MMA_LAG>(ops, last, count, t.id, warp_leader && !lend);
      int c0 = 0, c1 = CHUNKS;  // the chunks this CTA writes: all, or its slice of a split tile
      if (STREAM_K && count < k_tiles) {  // stream-K: a split tile's piece
        fence_acc(acc);
        const int cta = tiles.cluster_id, p = pieces, j = cta % p;
        slice_of(j, p, c0, c1);
        publish_slot(acc, Fixup{ws}, cta, cw, 1 + cw, c0, c1);
        tr.event(EV_ARRIVE, BAR_FIXUP, 0, 1, k0, t.id);  // the other chunks published
        // The piece is the last segment of its run: no loads follow, and once both consumers
        // have drained, the operand ring is idle shared memory to read the others' parts through.
        named_barrier_sync(BAR_CONSUMERS, 128 * CONSUMERS);
        tr.event(EV_WAIT_BEGIN, BAR_FIXUP, 0, 1, k1, t.id);
        float* stage = reinterpret_cast<float*>(s.A) + cw * 64 * BN;
        for (int i = 0; i < p; ++i)  // piece order: the same sum every run
          if (i != j) slice_gather(acc, Fixup{ws}, cta - j + i, cw, 1 + cw, c0, c1, p - 1, stage);
        tr.event(EV_WAIT_END, BAR_FIXUP, 0, 1, k1, t.id);
      }
      // two consumers: the chunked epilogue; each consumer stages its 64 rows of the chunk.
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
        if (c < c0 || c >= c1) continue;
        if (lend && c < LENT) {  // borrowed stage: chunk c into its slot there (st is one past it)
          // Chunk 0 lands in the stage's A part, each consumer's 64 rows on the very bytes of its
          // own A rows; the B part is read by both consumers' MMAs, so before chunk 1 goes there
          // both must be done with it (a consumer that finishes early would overwrite the B
          // its partner's last wgmma still reads).
          if (c == 1 && !GL_ABLATE_BORROW_NO_SYNC) named_barrier_sync(BAR_CONSUMERS, 128 * CONSUMERS);
          stage_and_signal(lent_chunks_staged, 1 + cw, wg_leader, c, c, t.id, [&] {
            u16* slot = lent_slot(s, (st.stage + DEPTH - 1) % DEPTH, c);
            if constexpr (TAIL > 0) {
              if (c == CHUNKS - 1) return stage_chunk_plain<BN, TAIL>(acc, slot, 64 * cw, c);
            }
            stage_chunk_sw128<BN, BM>(acc, slot, 64 * cw, c);
          });
          continue;
        }
        stage_and_commit(epi, chunk_st, 1 + cw, wg_leader, c, t.id, [&] {
          if constexpr (TAIL > 0) {
            if (c == CHUNKS - 1) return stage_chunk_plain<BN, TAIL>(acc, s.C[chunk_st.stage], 64 * cw, c);
          }
          stage_chunk_sw128<BN, BM>(acc, s.C[chunk_st.stage], 64 * cw, c);
        });
        chunk_st.advance();
      }
    });
    tr.finish();
  }
  cluster_sync_before_exit();  // as step 8: nobody leaves while the peer may still write into it
}
