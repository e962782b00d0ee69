// Small M, split K: a family beside the ladder, for decode-like shapes (M <= 128).
// Forced move: at small M the ladder's tiles leave the machine idle. A 128-row tile wastes
// most of each MMA (7/8 at M = 16), and C has too few tiles for 132 SMs: at 16 x 4096 a
// 128x128 grid is 32 CTAs, so the weights B (N x K), which are nearly all the bytes, stream
// through a quarter of the SMs. At M <= 16 the problem is memory-bound; what matters is that
// every SM streams B at its share of HBM bandwidth.
//
// So: the tile is one wgmma row block, BM = 64 (rows >= M arrive as zeros from TMA), by
// BN = 128 or 256 (m64nBNk16), and the K dimension is split over the grid's z: CTA
// (x, y, z) computes the 64 x BN tile (y, x) over k-tiles [z * kt_per_split, ...), so
// n_tiles x m_tiles x splits CTAs cover the SMs. Each writes its fp32 partial tile to a
// workspace ws[split][M][N] with plain stores straight from the accumulator fragment, and a
// second kernel (gemm_smallm_reduce, below) sums the splits in order 0, 1, 2, ... and rounds
// once to 16 bits: no atomics, so the same inputs give bit-identical outputs. With one split
// the main kernel writes the 16-bit C itself and the second pass is skipped.
//
// Organisation as step 7 (load_stage and the consumer's k-loop from gl_warpspec.cuh), without
// its writeback role (the epilogue is a register -> global store): warpgroup 0 gives
// registers away (setmaxnreg.dec), its warp 0 is the TMA producer; warpgroup 1 takes them
// (setmaxnreg.inc) and issues wgmma. One DEPTH-stage operand ring:
//   tma2mma[s]  producer -> consumer  "stage s has landed"
//   mma2tma[s]  consumer -> producer  "stage s may be refilled"
// Not persistent: one tile and one K range per CTA (the grid is sized to about one wave).
// Shape: K and N multiples of 8 (TMA row strides; 8-byte workspace stores), any M.
#include "gl_common.cuh"
#include "gl_warpspec.cuh"

#if !defined(GL_BM) || !defined(GL_BN) || !defined(GL_BK) || !defined(GL_DEPTH) || !defined(GL_DYNAMIC_SMEM)
#error "smallm_splitk takes its configuration from its family entry (runtime/smallm.py): GL_BM, GL_BN, GL_BK, GL_DEPTH, GL_DYNAMIC_SMEM"
#endif
constexpr int BM = GL_BM, BN = GL_BN, BK = GL_BK, DEPTH = GL_DEPTH;
static_assert(BM == 64 && BK == 64 && (BN == 128 || BN == 256), "small M: one m64 row block, BN 128 or 256, BK 64");
static_assert(DEPTH >= 2, "the consumer keeps one k-tile in flight while the producer fills the next");
constexpr u32 STAGE_BYTES = (BM + BN) * BK * 2;
constexpr u32 CONSUMER_WARPS = 4;
constexpr u32 PRODUCER_REGS = 40, CONSUMER_REGS = 232;
using OperandRing = Ring<DEPTH>;

struct SharedStorage {
  u16 A[DEPTH][BM * BK];
  u16 B[DEPTH][BN * BK];
  u64 tma2mma[DEPTH];
  u64 mma2tma[DEPTH];
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "the family's dynamic_smem is too small");

// Programmatic dependent launch (sm_90): with the launch attribute set on the reduction, it
// may be scheduled once every CTA of the split-K grid has signalled, and it parks its CTAs
// on free SM space until the split-K grid has ended and its stores are visible. Without the
// attribute both are no-ops.
GL_DEVICE void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
GL_DEVICE void pdl_wait_for_previous() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// One 16-wide k slice of the 64 x BN tile: the generated wrapper of that width.
template <int N> GL_DEVICE void mma_k16(float (&d)[N / 2], u64 da, u64 db);
template <> GL_DEVICE void mma_k16<128>(float (&d)[64], u64 da, u64 db) { wgmma_m64n128k16(d, da, db, 1); }
template <> GL_DEVICE void mma_k16<256>(float (&d)[128], u64 da, u64 db) { wgmma_m64n256k16(d, da, db, 1); }

// The accumulator fragment (gl_epilogue.cuh) -> global memory, rows >= M and columns >= N
// masked. DIRECT: rounded to 16 bits into C; else fp32 into this split's workspace plane.
// Each 4-lane group writes 32 contiguous bytes of a row (8 bytes each): whole sectors.
template <bool DIRECT>
GL_DEVICE void store_tile(const float (&acc)[BN / 2], float* ws, u16* c, int M, int N, int m0, int n0, int split) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = m0 + 16 * w + l / 4 + 8 * half;
    if (row >= M) continue;
    const long long base = ((long long)split * M + row) * N;
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

extern "C" __global__ void __launch_bounds__(256, 1)
gemm_smallm_splitk(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                   float* __restrict__ ws, u16* __restrict__ c, int M, int N, int K, int kt_per_split) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM, split = blockIdx.z;
  const int kt0 = split * kt_per_split;
  const int kt_count = min(ceil_div(K, BK) - kt0, kt_per_split);  // the last split may be shorter
  const int warp = warp_idx();

  if (threadIdx.x == 0) {
    OperandRing::init(s.tma2mma, 1,                // the producer's arrive.expect_tx
                      s.mma2tma, CONSUMER_WARPS);  // one arrive per consumer warp
    fence_barrier_init();
  }
  __syncthreads();  // the only CTA-wide barrier: from here on the roles run apart
  if (threadIdx.x == 0) pdl_launch_dependents();  // the reduction may be scheduled (it waits for us)

  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0 && elect_one()) {  // ── TMA PRODUCER ──────────────────────────────
      Tracer tr(ROLE_PRODUCER, 0, true);
      const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
      tma_prefetch_descriptor(&tmap_a);
      tma_prefetch_descriptor(&tmap_b);
      auto st = PipelineState<DEPTH>::producer();
      for (int i = 0; i < kt_count; ++i) {  // one tile, this split's K range
        ops.producer_acquire(st, i);
        ops.producer_expect_tx(st, STAGE_BYTES);  // out-of-range rows/columns land as zeros and count too
        load_stage<BM, BN, BK, 1>(s.A[st.stage], s.B[st.stage], &tmap_a, &tmap_b, ops.full_bar(st), kt0 + i,
                                  m0, n0, 0);
        tr.event(EV_LOAD_ISSUE, BAR_TMA2MMA, st.stage, st.phase, i, split);
        st.advance();
      }
      tr.finish();
    }
  } else {  // ── MMA CONSUMER (warpgroup 1) ──────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    Tracer tr(ROLE_CONSUMER, 1, threadIdx.x == 128);
    const OperandRing ops(s.tma2mma, BAR_TMA2MMA, s.mma2tma, BAR_MMA2TMA, tr);
    const bool warp_leader = lane_idx() == 0;
    auto st = PipelineState<DEPTH>::consumer();
    float acc[BN / 2];
    zero_acc(acc);
    const auto last = mma_mainloop(ops, st, kt_count, split, warp_leader, [&](int stage) {
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk)  // +32 bytes per 16-wide k slice
        mma_k16<BN>(acc, desc_sw128(s.A[stage] + kk * 16), desc_sw128(s.B[stage] + kk * 16));
    });
    if (kt_count > 0) mma_drain(ops, last, kt_count, split, warp_leader);
    fence_acc(acc);  // the epilogue reads the accumulators only after the last group retired
    tr.event(EV_EPI_BEGIN, 0, 0, 0, 0, split);
    if (gridDim.z == 1)
      store_tile<true>(acc, ws, c, M, N, m0, n0, split);
    else
      store_tile<false>(acc, ws, c, M, N, m0, n0, split);
    tr.event(EV_EPI_END, 0, 0, 0, 0, split);
    tr.finish();
  }
}

// The second pass: C = round16(ws[0] + ws[1] + ... + ws[splits-1]), summed in that order in
// fp32 (a fixed order: deterministic). One thread per 4 consecutive elements of C (N is a
// multiple of 8): 16-byte loads from each split plane, one 8-byte store. 128-thread blocks of
// <= 40 registers fit beside a split-K CTA (232 x 256 of the SM's 64K registers), so with
// programmatic launch they wait on the SMs rather than launch after the split-K grid ends.
extern "C" __global__ void __launch_bounds__(128)
gemm_smallm_reduce(const float* __restrict__ ws, u16* __restrict__ c, int M, int N, int splits) {
  const long long plane = (long long)M * N / 4;  // float4s per split
  const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  pdl_wait_for_previous();  // the partials are complete and visible
  if (q >= plane) return;
  const float4* p = reinterpret_cast<const float4*>(ws) + q;
  float4 sum = p[0];
#pragma unroll 4
  for (int z = 1; z < splits; ++z) {
    const float4 v = p[z * plane];
    sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
  }
  const u32 lo = pack2(sum.x, sum.y), hi = pack2(sum.z, sum.w);
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(c + 4 * q), "r"(lo), "r"(hi) : "memory");
}
