// Small M, split K: a family beside the ladder, for decode-like shapes (M <= 128-256).
// Forced move: at small M the ladder's tiles leave the machine idle. A 128-row tile wastes
// most of each MMA (7/8 at M = 16), and C has too few tiles for 132 SMs: at 16 x 4096 a
// 128x128 grid is 32 CTAs, so the weights B (N x K), which are nearly all the bytes, stream
// through a quarter of the SMs. At M <= 16 the problem is memory-bound; what matters is that
// every SM streams B at its share of HBM bandwidth.
//
// So: the tile is BM = 64 x CONSUMERS rows (one m64 row block per consumer warpgroup; when M
// is under a tile only its rows are loaded, see stage_bytes) by BN = 32, 64, 128 or 256 (m64nBNk16), and the work is split
// along K, stream-K style: the (tile, k-tile) units, tile-major (tiles column-major over C,
// so CTAs that run together share B's tiles), are dealt out in equal contiguous runs of
// `units` to the CTAs of a one-dimensional grid, so every CTA streams the
// same number of k-tiles whatever the tile count (no ragged last wave). A CTA's run crosses
// tile boundaries; each piece of a tile it computes is a segment. A segment covering a whole
// tile is rounded to 16 bits into C directly; any other is written in fp32 (plain stores
// straight from the accumulator fragment) to plane j of a workspace ws[plane][M][N], j being
// the CTA's place among the CTAs sharing that tile. A second kernel (gemm_smallm_reduce,
// smallm_reduce.cuh) sums a split tile's planes in order 0, 1, 2, ... and rounds once: no
// atomics, so the same inputs give bit-identical outputs. When `units` is a multiple of the
// k-tiles per tile no tile is split and the second pass is skipped.
// With GL_FIXUP (one wave of CTAs, all resident at once) there is no workspace of planes and
// no second pass: a run's pieces are summed in the kernel, stream-K's "fixup". Runs are
// contiguous and tile-major, so only a CTA's first segment can start inside a tile (k0 > 0):
// it stores that piece in fp32 to its own slot and raises its flag; the CTA holding the
// tile's first k-tiles (the "owner", whose piece is the last segment of its run, computed
// last) waits for the flags of the CTAs after it that share the tile, adds their slots in
// CTA order (deterministic) and writes C. The owner waits only at the end of its run, for
// pieces computed at the start of the others', so in one resident wave nobody waits long
// and nothing can deadlock. Runs crossing many tiles would scatter the CTAs over C (each
// reading its own A and B panels: L2 thrashes at large M), so a fixup grid of G CTAs first
// takes floor(tiles / G) rounds of whole tiles, data-parallel (CTA c: tiles c, c + G, ...,
// neighbours at once), and deals only the remaining tiles' units in runs of `units`, as
// CUTLASS's data-parallel + stream-K hybrid does. Flags reset themselves (the owner lowers them after reading), so
// a zeroed buffer stays valid launch after launch on one stream.
// Launched as clusters of P CTAs (P = 2, 4 or 8 pieces per tile, runs of k_tiles / P: each
// cluster one tile), the pieces never leave the chip: each CTA stages its fp32 piece in its
// own shared memory (the drained operand ring), and after a cluster barrier CTA r sums
// column slice r of the tile over the P CTAs' shared memory (DSMEM), in rank order 0, 1, ...
// (deterministic), and writes C. No workspace, no second launch.
//
// With GL_MULTICAST = 2 (large M, whole tiles only), the grid is clusters of two CTAs along M:
// the pair takes two vertically adjacent tiles of one column of C (column-major over C, as the
// deal), and each CTA's producer loads half of the shared B tile and multicasts it into both
// CTAs' stages, as step 8 does: each CTA fetches 64 + BN / 2 rows per k-tile instead of 64 + BN.
// Each full barrier expects the whole stage (its A + all of B); a stage is refilled only when
// the consumers of both CTAs have released it (the empty barriers count both, the peer's
// arriving remotely); barrier init is published, and the exit held, by cluster barriers. A
// pair's second tile past C (odd row blocks) loads zeros and stores nothing.
//
// With GL_SHARE_A = NA (2 or 4; split pieces or whole tiles, every tile in the same number of
// pieces, given as `units`), the grid is clusters of NA CTAs along N: a cluster runs the same piece (the
// same k-tiles) of NA horizontally adjacent tiles of one row block (shared_cta), so all its CTAs
// read the same A rows. Each CTA's producer loads BM / NA of those rows and multicasts them into
// every CTA's stage, and loads its own B: each CTA fetches BM / NA + BN rows per k-tile instead
// of BM + BN (128 x 64 tiles in fours: 48 rows instead of 192). The ring is shared as under
// multicast pairs (each full barrier expects the whole stage; a stage is refilled only when the
// consumers of all NA CTAs have released it). With GL_SHARE_B = MB as well, the cluster is NA x MB:
// MB row blocks by NA column blocks, and B is shared the same way along M (each CTA loads BN / MB
// of its column block's B rows into the CTAs of its column, its slice of A into those of its
// row). cuBLAS's long-K kernels at M = 128 and its small squares run 64 x 64 tiles in clusters
// of 4 x 2 sharing both operands (docs/perf-notes.md item 106).
//
// With GL_K_ALTERNATE (whole tiles, one 64-row block): two consumer warpgroups share the
// tile, the first taking k-tiles 0, 2, 4, ..., the second 1, 3, 5, ..., each into its own
// accumulator; at the end the second hands its sum over through the drained ring and the first
// adds it and stores C. A lone consumer of a 64 x 64 tile issues a k-tile every ~150 ns with no
// loads at all (4 wgmmas of ~16 ns at peak: its wait, issue, retire and release set the pace);
// two alternating ones ~112 ns, so the loads, not the consumer, set the pace (256 x 2048 x 4096:
// 17.2 -> 15.8 us at depth 14, cuBLAS 14.8; docs/perf-notes.md item 104). With shared loads too:
// the cluster's CTAs run the same k-tiles, so every multicast into this CTA has landed once its
// consumers are done, and the drained ring is as free as without a cluster.
//
// Organisation as step 7 (the operand loads of gemm_mainloop.cuh, the consumer's k-loop of gl_warpspec.cuh), without
// its writeback role (the epilogue is a register -> global store): warpgroup 0 gives
// registers away (setmaxnreg.dec), its warp 0 is the TMA producer; warpgroups 1..CONSUMERS
// take them (setmaxnreg.inc) and issue wgmma, each on its 64 rows of the staged A and all of
// the staged B (two consumers: B is loaded once for 128 rows). One DEPTH-stage operand ring:
//   tma2mma[s]  producer -> consumers  "stage s has landed"
//   mma2tma[s]  consumers -> producer  "stage s may be refilled" (every consumer warp arrives)
// Not persistent over tiles: one run of units per CTA (the grid is sized to about one wave).
// A whole tile leaves through shared memory and TMA (STAGED_C): the consumers keep the stage of
// their last k-tile instead of releasing it, stage the accumulators in it (stmatrix, 128B
// swizzle, 64 x 64 chunks over the stage's A and B), and one thread per consumer stores them
// with TMA (tmap_c); the stage goes back to the producer once the copy engine has read it.
// Register-to-global stores (4 bytes per thread, eight rows per instruction) cost ~1.5 us of a
// small problem's 3-4 us: a 64 x 128 tile at 256^2 x 64 ran in 4.1 us with them, 2.5 us with
// the stores left out (docs/perf-notes.md, item 36). Pieces (fp32) still go straight to memory.
// Shape: K and N multiples of 8 (TMA row strides; 8-byte workspace stores), any M. B K-major
// (N, K) or, with GL_B_MN, N-major (K, N).
#include "gl_common.cuh"
#include "gl_fixup.cuh"
#include "gl_cluster_reduce.cuh"
#include "gemm_mainloop.cuh"  // the production GEMM's operand loads (either major order)

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_CONSUMERS) || \
    !defined(GL_DYNAMIC_SMEM) || !defined(GL_FIXUP) || !defined(GL_MULTICAST) || !defined(GL_PREFETCH_KT) || \
    !defined(GL_K_ALTERNATE) || !defined(GL_B_EARLY) || !defined(GL_SHARE_A) || !defined(GL_SHARE_B) || \
    !defined(GL_REDUCE_BATCH) || !defined(GL_MMA_LAG)
#error "smallm_splitk takes its configuration from its family entry (families/smallm.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_CONSUMERS, GL_DYNAMIC_SMEM, GL_FIXUP, GL_MULTICAST, GL_PREFETCH_KT, GL_K_ALTERNATE, GL_B_EARLY, GL_SHARE_A, GL_SHARE_B, GL_REDUCE_BATCH, GL_MMA_LAG"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH, CONSUMERS = GL_CONSUMERS;
constexpr bool FIXUP = GL_FIXUP;
constexpr int MC = GL_MULTICAST;  // CTAs along M of a cluster sharing each B tile (1: no cluster)
constexpr int NA = GL_SHARE_A;    // CTAs along N of a cluster sharing each A stage (1: A not shared)
constexpr int MB = GL_SHARE_B;    // CTAs along M of a cluster sharing each B stage (1: B not shared)
static_assert((NA == 1 || NA == 2 || NA == 4) && (MB == 1 || MB == 2 || MB == 4) && NA * MB <= 8,
              "shared loads: clusters of NA x MB CTAs, each 1, 2 or 4, at most 8 (a portable cluster)");
static_assert(NA * MB == 1 || (MC == 1 && !GL_FIXUP && BM % (8 * NA) == 0 && BN % (8 * MB) == 0),
              "shared loads: no multicast pairs, no fixup, slices of whole 8-row swizzle atoms");
constexpr int SHARING = MC * NA * MB;  // CTAs whose consumers release each stage (the cluster, or 1)
// B may also be given N-major (a row-major (K, N) matrix, the usual x @ W): TMA loads it as
// 64-wide blocks of k-rows and wgmma reads it through its transpose bit, as the production GEMM does. A
// (the activations, M <= a few hundred rows) is always K-major.
constexpr bool B_MN = GL_B_MN;
constexpr int MN_BLOCK = 64;                        // an N-major B: 64-element blocks (128 B rows)
// A k-tile (one stage, one full barrier, one release) is BK = 64 or 128 wide: K_BLOCKS blocks of
// KB = 64, each loaded and read as a 64-wide k-tile's stage (smallm_loads.cuh). 128: half the
// barrier round trips per byte, in stages twice as large.
constexpr int KB = 64, K_BLOCKS = BK / KB;
constexpr u32 MN_BLOCK_BYTES = MN_BLOCK * KB * 2;  // one block of k-rows
static_assert(!GL_A_MN, "the small-M family reads A K-major");
static_assert(BM == 64 * CONSUMERS && (BK == 64 || BK == 128) && (BN == 32 || BN == 64 || BN == 128 || BN == 256),
              "small M: one m64 row block per consumer, BN 32, 64, 128 or 256, BK 64 or 128");
static_assert(!(B_MN && BN < MN_BLOCK), "an N-major B is loaded in 64-column blocks: BN >= 64");
static_assert(!B_MN || (BN / MB) % MN_BLOCK == 0, "a shared N-major B travels in 64-column blocks");
static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
static_assert(DEPTH >= 2, "the consumer keeps one k-tile in flight while the producer fills the next");
// wgmma groups a consumer keeps in flight (GL_MMA_LAG): each k-tile waits for the group MMA_LAG
// back to retire before releasing its stage. 1 in every entry: four measured 0.92-1.02x as fast
// as one, two 0.96-1.04x, at the small squares and the long-K rows (docs/perf-notes.md item 119).
constexpr int MMA_LAG = GL_MMA_LAG;
static_assert(MMA_LAG >= 1 && MMA_LAG < DEPTH, "the groups held in flight must leave the producer a stage");
// A stage's bytes: the A box's rows (a_rows, from the host: BM, or M rounded up to 8 when the
// problem has fewer rows than a tile) and B's BN rows of BK. Rows of the A stage past the box
// keep whatever they held: wgmma computes garbage rows of C there, which no epilogue stores
// (rows >= M are clipped or masked). TMA fills a box's out-of-range rows with zeros one by one:
// at M = 72 a 128-row box took ~20 % longer per k-tile than at M = 112 (docs/perf-notes.md, item 39).
GL_DEVICE u32 stage_bytes(int a_rows) { return (u32)(a_rows + BN) * BK * 2; }
constexpr u32 CONSUMER_WARPS = 4;
// K_ALTERNATE: two MMA warpgroups on the one 64-row block, alternating k-tiles (header)
constexpr bool K_ALTERNATE = GL_K_ALTERNATE;
constexpr u32 MMA_WARPGROUPS = CONSUMERS * (K_ALTERNATE ? 2 : 1);
constexpr u32 THREADS = 128 * (1 + MMA_WARPGROUPS);
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandPipe = Pipeline<DEPTH, SHARING>;  // multicast, shared loads: releases go to every CTA's empty barriers
// The staged epilogue: 64 x 64 chunks (8 KB, 128B-swizzled), BN / 64 per consumer, over the
// held stage's first k-block's A (one chunk per consumer) and B (BN / 64 chunks); two consumers
// of a 256-wide tile would need 8 of its 6, and keep the register stores; so does a 32-wide
// tile (no chunk).
constexpr int C_CHUNKS = BN / 64;
constexpr bool STAGED_C = C_CHUNKS > 0 && CONSUMERS * C_CHUNKS <= CONSUMERS + C_CHUNKS;
static_assert(MC == 1 || (MC == 2 && !FIXUP && STAGED_C), "multicast pairs: whole tiles with the staged epilogue");
static_assert(!K_ALTERNATE || (CONSUMERS == 1 && MC == 1 && !FIXUP && STAGED_C && C_CHUNKS == 1 && MMA_LAG == 1),
              "alternating k-tiles: whole 64 x 64 tiles, one per CTA, with the staged epilogue, one group in flight");
static_assert(MC == 1 || !B_MN || (BN / MC) % MN_BLOCK == 0, "an N-major B's half travels in 64-column blocks");
constexpr u32 BAR_BOTH_CONSUMERS = 1, BAR_CONSUMER = 2;  // named barriers: all consumers; consumer cw's own (+cw)

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];
  OperandPipe ops;  // tma2mma / mma2tma per stage
};
// Chunk q of the staged epilogue in stage `stage`: its first k-block's A chunks, then B's.
GL_DEVICE u16* c_chunk(SharedStorage& s, int stage, int q) {
  return q < CONSUMERS ? s.A[stage] + q * 64 * KB : s.B[stage] + (q - CONSUMERS) * 64 * KB;
}

// Cluster reduction (gl_cluster_reduce.cuh): the piece, BM x BN fp32 over the drained ring.
static_assert(BM * piece_ld<BN>() * 4 <= DEPTH * (BM + BN) * BK * 2, "the ring must hold a tile's fp32 piece");
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "the family's dynamic_smem is too small");

// Programmatic dependent launch (sm_90): with the launch attribute set on the reduction, it
// may be scheduled once every CTA of the split-K grid has signalled, and it parks its CTAs
// on free SM space until the split-K grid has ended and its stores are visible. Without the
// attribute both are no-ops. The main kernel is launched so too (a chain of GEMMs: the next
// one's launch and set-up overlap this one's tail, and the reduction signals at its start):
// its producer waits for the previous grid before its first load, every later read and write
// of the CTA follows that load, and before the wait it only brings its first PREFETCH_KT
// k-tiles of B into L2 (the weights: a prefetch is a hint, never a stale read).
constexpr int PREFETCH_KT = GL_PREFETCH_KT;
// B_EARLY (the caller's promise that no grid before this one writes B: weights): before the
// wait the producer also issues B of its first DEPTH stages into the ring, each stage's full
// barrier announcing A's bytes too, so no consumer reads a stage before its A, loaded after
// the wait, has landed.
constexpr bool B_EARLY = GL_B_EARLY;
static_assert(!B_EARLY || SHARING == 1, "B issued early: no cluster (a multicast peer's ring may not exist yet)");
static_assert(PREFETCH_KT == 0 || MB == 1, "prefetch_b_l2 fetches whole B tiles or multicast pairs' slices, not shared-B slices");
GL_DEVICE void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
GL_DEVICE void pdl_wait_for_previous() { asm volatile("griddepcontrol.wait;" ::: "memory"); }


// A consumer's 64 x BN accumulator fragment (gl_epilogue.cuh) at rows m0.. -> global memory,
// rows >= M and columns >= N masked. DIRECT: rounded to 16 bits into C; else fp32 into
// workspace plane `plane`. Each 4-lane group writes 32 contiguous bytes of a row (8 bytes
// each): whole sectors.
template <bool DIRECT>
GL_DEVICE void store_tile(const float (&acc)[BN / 2], float* ws, u16* c, int M, int N, int m0, int n0, int plane) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = m0 + 16 * w + l / 4 + 8 * half;
    if (row >= M) continue;
    const long long base = ((long long)plane * M + row) * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = n0 + 8 * j + 2 * (l % 4);
      if (col >= N) continue;  // N is even: col < N means col + 1 < N
      const float x = acc[4 * j + 2 * half], y = acc[4 * j + 2 * half + 1];
      if (DIRECT) {
        *reinterpret_cast<u32*>(c + (long long)row * N + col) = pack2(x, y);
      } else {
        asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(ws + base + col), "f"(x), "f"(y) : "memory");
      }
    }
  }
}

// The staged epilogue (STAGED_C): consumer cw's 64 x BN accumulators, rows m0.. and columns
// n0.. of C, staged as chunks cw * C_CHUNKS.. of stage `stage` (c_chunk); one thread stores them
// with TMA and waits until the copy engine has read them. True on that thread (its trace event).
GL_DEVICE bool store_staged_tile(SharedStorage& s, const float (&acc)[BN / 2], const CUtensorMap* tmap_c, int stage,
                                 int cw, int M, int m0, int n0) {
#pragma unroll
  for (int ch = 0; ch < C_CHUNKS; ++ch) stage_chunk_sw128<BN, 64>(acc, c_chunk(s, stage, cw * C_CHUNKS + ch), 0, ch);
  fence_proxy_async_smem();  // each writer, before the copy engine reads
  named_barrier_sync(BAR_CONSUMER + cw, 128);
  if (threadIdx.x % 128 == 0 && m0 < M) {  // rows past M (and columns past N) are clipped by TMA
#pragma unroll
    for (int ch = 0; ch < C_CHUNKS; ++ch) tma_store_2d(tmap_c, c_chunk(s, stage, cw * C_CHUNKS + ch), n0 + 64 * ch, m0);
    tma_store_commit();
    tma_store_wait_read<0>();
    return true;
  }
  return false;
}

// Cluster reduction, step 2's store: 4 summed columns rounded to 16 bits into C.
// Not inlined: the batched sum's code inlined into the kernel cost its whole-tile deals 1-3 % (640^3:
// 7.92 -> 8.10 us bf16, docs/perf-notes.md item 121), though they never run it.
__device__ __noinline__ void reduce_slice_into_c(const float* piece, u16* c, int M, int N, int m0, int n0, u32 rank,
                                                 u32 pieces) {
  reduce_slice<BN>(piece, min(BM, M - m0), N - n0, rank, pieces, threadIdx.x - 128, 128 * CONSUMERS,
                   [=](int row, int col, float4 sum) {  // N is a multiple of 8: col < N means col + 3 < N
    const u32 lo = pack2(sum.x, sum.y), hi = pack2(sum.z, sum.w);
    u16* dst = c + (long long)(m0 + row) * N + n0 + col;
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(dst), "r"(lo), "r"(hi) : "memory");
  });
}

// Fixup (GL_FIXUP): slots and flags as gl_fixup.cuh lays them out.
using Fixup = FixupSlots<BM, BN, CONSUMERS>;

#include "smallm_walks.cuh"  // Segments, PairWalk, make_walk: which work this CTA runs
#include "smallm_loads.cuh"  // load_ktile and its parts: how the producer fills a stage

// A consumer's wgmma group for one k-tile: rows 64 * row_block .. of the staged A, all of B,
// block after block (the same MMAs in the same order as 64-wide k-tiles: the same sums).
GL_DEVICE void issue_ktile(SharedStorage& s, int stage, int row_block, float (&acc)[BN / 2]) {
#pragma unroll
  for (int j = 0; j < K_BLOCKS; ++j) {  // block j: BM x KB of A, BN x KB of B (smallm_loads.cuh)
    const u16* a = s.A[stage] + row_block * 64 * KB + j * BM * KB;
    const u16* b = s.B[stage] + j * BN * KB;
#pragma unroll
    for (int kk = 0; kk < KB / 16; ++kk) {  // a 16-wide k slice: +32 bytes K-major, +16 rows N-major
      const u64 db = B_MN ? desc_sw128_mn(b + kk * 16 * MN_BLOCK, MN_BLOCK_BYTES) : desc_sw128(b + kk * 16);
      wgmma_m64k16<BN, false, B_MN>(acc, desc_sw128(a + kk * 16), db, 1);
    }
  }
}

// K_ALTERNATE: consumer warpgroup `cw` (0 or 1) of the CTA's one whole tile: k-tiles cw, cw + 2,
// ... of `count`, from ring position `st`, into its own accumulator (mma_mainloop with a stride
// of 2). Then the second warpgroup's sum goes to the first through the drained ring (every
// load has landed and been read: one tile per CTA), the first adds it, stages C in the first
// stage and stores it with TMA.
template <class Port, class State>
GL_DEVICE void alternate_tile(SharedStorage& s, const Port& ops, State st, const CUtensorMap* tmap_c, int M, int m0,
                              int n0, int count, int tile, int cw) {
  static_assert(DEPTH >= 3 && BM * BN * 4 <= 2 * BM * BK * 2, "the hand-over: 64 x 64 fp32 from A's stage 1 on");
  const bool warp_leader = lane_idx() == 0;
  float acc[BN / 2];
  zero_acc(acc);
  const State last = mma_mainloop<1, 2>(ops, st, count, tile, warp_leader,
                                        [&](int stage) { issue_ktile(s, stage, 0, acc); }, cw);
  wgmma_wait<0>();
  fence_acc(acc);
  if (cw < count) {  // this warpgroup's last k-tile (with one k-tile the second has none)
    const int kt = count - 1 - (count - 1 - cw) % 2;
    ops.tr.event(EV_MMA_DONE, 0, last.stage, last.phase, kt, tile);
    if (warp_leader) ops.consumer_release(last, kt);
  }
  named_barrier_sync(BAR_BOTH_CONSUMERS, 256);  // both warpgroups' MMAs have read the ring: it is free
  float* handover = reinterpret_cast<float*>(s.A[1]);
  const int t = threadIdx.x % 128;
  if (cw == 1) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) handover[i * 128 + t] = acc[i];
  }
  named_barrier_sync(BAR_BOTH_CONSUMERS, 256);
  if (cw == 1) return;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] += handover[i * 128 + t];  // one order: the same bits every run
  store_staged_tile(s, acc, tmap_c, 0, 0, M, m0, n0);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_smallm_splitk(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                   const __grid_constant__ CUtensorMap tmap_c,  // C, box 64 x 64: the staged epilogue
                   float* __restrict__ ws, u16* __restrict__ c, int M, int N, int K, int units, int a_rows) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const int m_tiles = ceil_div(M, BM), n_tiles = ceil_div(N, BN), k_tiles = ceil_div(K, BK);
  const int warp = warp_idx();
  const u32 pieces = SHARING > 1 ? 1 : cluster_size();  // > 1: a cluster per tile, reduced through DSMEM
  float* piece = reinterpret_cast<float*>(&s.A[0][0]);
  if constexpr (NA * MB > 1) {  // shared loads: a launch outside the host's deal (SmallM.shape_problems,
    // Deal.shared) would leave C's rows unwritten or a full barrier waiting for bytes no peer sends:
    // every CTA stops at once, before any barrier (the test is the same in all of them)
    if (a_rows != BM || m_tiles % MB != 0 || n_tiles % NA != 0 || units < 1 || units > k_tiles ||
        (long long)gridDim.x != (long long)m_tiles * n_tiles * units)
      asm volatile("trap;");
  }

  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_a, &tmap_b, &tmap_c);  // overlaps the set-up (gl_tma.cuh)
  if (threadIdx.x == 0) {
    s.ops.init(1, CONSUMER_WARPS * CONSUMERS);  // the producer's arrive.expect_tx; every consumer warp (of every CTA)
    fence_barrier_init();
  }
  // the only CTA-wide barrier: from here on the roles run apart (multicast: the peer's
  // barriers are initialised before any load lands in them or any release arrives)
  if constexpr (SHARING > 1) cluster_sync();
  else __syncthreads();
  if (threadIdx.x == 0) pdl_launch_dependents();  // the reduction may be scheduled (it waits for us)

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      // out-of-range rows/columns land as zeros and count too; multicast: B's other half comes from the
      // peer; shared loads: the other slices come from the peers
      const auto ops = s.ops.bind(tr, stage_bytes(a_rows));
      auto st = OperandPipe::State::producer();
      const u32 rank = MC > 1 ? cluster_ctarank() : 0;  // B's slice (multicast pairs)
      if constexpr (PREFETCH_KT > 0) {  // while the previous grid may still run: B only, into L2
        const auto first = make_walk(m_tiles, n_tiles, k_tiles, units, pieces > 1);
        if (first.more())
          for (int kt = first.k0(); kt < min(first.k1(), first.k0() + PREFETCH_KT); ++kt)
            prefetch_ktile_b(&tmap_b, kt, first.n_block(m_tiles) * BN, rank);
      }
      int early = 0;  // B_EARLY: k-tiles of the first segment whose B is on its way before the wait
      if constexpr (B_EARLY) {
        const auto first = make_walk(m_tiles, n_tiles, k_tiles, units, pieces > 1);
        if (first.more()) early = min(first.k1() - first.k0(), DEPTH);
        for (int i = 0; i < early; ++i) {  // the ring's first pass: every stage is free
          ops.producer_acquire(st, first.k0() + i);
          load_ktile_b(s.B[st.stage], &tmap_b, ops.producer_barrier(st), first.k0() + i, first.n_block(m_tiles) * BN);
          st.advance();
        }
      }
      pdl_wait_for_previous();  // what the previous grid wrote (A, C, the workspace) is complete and visible
      auto sa = OperandPipe::State::producer();  // B_EARLY: the early stages again, for their A
      for (auto seg = make_walk(m_tiles, n_tiles, k_tiles, units, pieces > 1); seg.more(); seg.next()) {  // the ring runs on across segments
        const int t = seg.tile(), m0 = seg.m_block(m_tiles) * BM, n0 = seg.n_block(m_tiles) * BN;
        for (int kt = seg.k0(); kt < seg.k1(); ++kt) {
          if (B_EARLY && early > 0) {  // acquired and announced before the wait
            load_ktile_a(s.A[sa.stage], &tmap_a, ops.producer_barrier(sa), kt, m0);
            tr.event(EV_LOAD_ISSUE, BAR_TMA2MMA, sa.stage, sa.phase, kt, t);
            sa.advance();
            --early;
            continue;
          }
          ops.producer_acquire(st, kt);
          if constexpr (NA * MB > 1) {  // slices into the CTAs of its row (A) and column (B)
            load_shared_stage(s, st.stage, &tmap_a, &tmap_b, ops.producer_barrier(st), kt, m0, n0);
          } else {
            load_ktile(s.A[st.stage], s.B[st.stage], &tmap_a, &tmap_b, ops.producer_barrier(st), kt, m0, n0, rank);
          }
          tr.event(EV_LOAD_ISSUE, BAR_TMA2MMA, st.stage, st.phase, kt, t);
          st.advance();
        }
      }
      tr.finish();
    }
    // Cluster reduction: this warpgroup only meets the cluster barriers (the consumers' two
    // below). In their own branch: code after the roles join would be held to this
    // warpgroup's 40 registers.
    if (pieces > 1) {
      cluster_sync();
      cluster_sync();
    }
  } else {  // ── MMA CONSUMERS (warpgroups 1 .. CONSUMERS) ────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;  // which 64 rows of the tile (K_ALTERNATE: which k-tiles)
    Tracer tr(ROLE_CONSUMER, 1 + cw, threadIdx.x % 128 == 0);
    const auto ops = s.ops.bind(tr);
    const bool warp_leader = lane_idx() == 0;
    auto st = OperandPipe::State::consumer();
    float acc[BN / 2];
    // A piece of a split tile (the deal's Segments only): a generic lambda, so that under
    // multicast (whole tiles, PairWalk) its body, which names the Segments' members, is never
    // instantiated.
    auto store_piece = [&](const auto& seg, int m0, int n0) {
      if constexpr (MC == 1) {
        if (FIXUP && seg.k0() > 0) {  // a later piece: to this CTA's slot, then the flag
          publish_slot(acc, Fixup{ws}, seg.cta, cw, BAR_CONSUMER + cw);
        } else if (FIXUP) {  // the owner: the later pieces in CTA order, then C
          fixup_collect(acc, Fixup{ws}, seg.cta, seg.last_cta(), cw, BAR_CONSUMER + cw);
          store_tile<true>(acc, ws, c, M, N, m0, n0, 0);
        } else {
          store_tile<false>(acc, ws, c, M, N, m0, n0, seg.plane());
        }
      }
    };
    if constexpr (K_ALTERNATE) {  // one whole tile per CTA: the family deals no other way
      const auto seg = make_walk(m_tiles, n_tiles, k_tiles, units, false);
      alternate_tile(s, ops, st, &tmap_c, M, seg.m_block(m_tiles) * BM, seg.n_block(m_tiles) * BN,
                     seg.k1() - seg.k0(), seg.tile(), cw);
    } else {
      for (auto seg = make_walk(m_tiles, n_tiles, k_tiles, units, pieces > 1); seg.more(); seg.next()) {
        const int t = seg.tile(), m0 = seg.m_block(m_tiles) * BM + 64 * cw, n0 = seg.n_block(m_tiles) * BN;
        const int count = seg.k1() - seg.k0();
        zero_acc(acc);
        auto last = mma_mainloop<MMA_LAG>(ops, st, count, t, warp_leader,
                                          [&](int stage) { issue_ktile(s, stage, cw, acc); });
        if (STAGED_C && pieces == 1 && seg.whole()) {  // the staged epilogue in the last k-tile's stage
          wgmma_wait<0>();
          if constexpr (MMA_LAG > 1) {  // the k-tiles still held but the last: retired now, their stages go back
            for (int kt = max(count - MMA_LAG, 0); kt < count - 1; ++kt) {
              if (warp_leader) ops.consumer_release(last, kt);
              last.advance();
            }
          }
          fence_acc(acc);
          tr.event(EV_MMA_DONE, 0, last.stage, last.phase, count - 1, t);
          if (CONSUMERS > 1)  // the other consumer's last wgmma has read the stage too
            named_barrier_sync(BAR_BOTH_CONSUMERS, 128 * CONSUMERS);
          tr.event(EV_EPI_BEGIN, 0, last.stage, last.phase, 0, t);
          if (store_staged_tile(s, acc, &tmap_c, last.stage, cw, M, m0, n0))
            tr.event(EV_STORE_DONE, 0, last.stage, last.phase, 0, t);
          named_barrier_sync(BAR_CONSUMER + cw, 128);  // staging read: the stage may be refilled
          if (warp_leader) ops.consumer_release(last, count - 1);
          tr.event(EV_EPI_END, 0, 0, 0, 0, t);
          continue;
        }
        mma_drain<MMA_LAG>(ops, last, count, t, warp_leader);  // a segment has >= 1 k-tile
        fence_acc(acc);  // the epilogue reads the accumulators only after the last group retired
        tr.event(EV_EPI_BEGIN, 0, 0, 0, 0, t);
        if (pieces > 1) {  // cluster reduction (one segment per CTA): the piece over the drained ring
          named_barrier_sync(BAR_BOTH_CONSUMERS, 128 * CONSUMERS);  // every consumer's wgmma has read its last stage
          stage_piece<BN>(acc, piece, 64 * cw, M - m0);
        } else if (seg.whole()) {
          store_tile<true>(acc, ws, c, M, N, m0, n0, 0);
        } else {
          store_piece(seg, m0, n0);
        }
        tr.event(EV_EPI_END, 0, 0, 0, 0, t);
      }
      if (pieces > 1) {  // every thread of every CTA of the cluster takes part in both barriers
        tr.event(EV_WAIT_BEGIN, BAR_CLUSTER, 0, 0, 0);
        cluster_sync();  // all pieces staged and visible cluster-wide
        tr.event(EV_WAIT_END, BAR_CLUSTER, 0, 0, 0);
        const int t = blockIdx.x / (int)pieces;  // clustered: a tile's pieces are consecutive blocks
        reduce_slice_into_c(piece, c, M, N, t % m_tiles * BM, t / m_tiles * BN, cluster_ctarank(), pieces);
        tr.event(EV_WAIT_BEGIN, BAR_CLUSTER, 1, 0, 0);
        cluster_sync();  // the peers have read this CTA's piece: it may exit
        tr.event(EV_WAIT_END, BAR_CLUSTER, 1, 0, 0);
      }
    }
    tr.finish();
  }
  // multicast, shared loads: no CTA leaves while a peer may still multicast into it or arrive on its barriers
  if constexpr (SHARING > 1) cluster_sync_before_exit();
}

#include "smallm_reduce.cuh"  // the second pass: gemm_smallm_reduce
