// attn_common.cuh — what every fused attention step (A2-A5) shares: the tile types, the two
// MMAs, the online softmax on the accumulator's registers, and the output. The step files
// differ only in who loads, who computes and in what order.
//
// O = softmax(scale * Q K^T) V per (batch, head), Q (Sq, D), K and V (Sk, D), read in place
// by TMA through 4-D maps (D, S, H, B) in the tensors' own strides; K and V heads are shared
// by `group` query heads (GQA). Causal is top-left aligned, as torch's SDPA: query i sees
// keys j <= i.
#pragma once
#include "gl_common.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"
#include "gl_trace.cuh"

#if !defined(GL_ATTN_D) || !defined(GL_ATTN_BN) || !defined(GL_ATTN_DEPTH) || !defined(GL_ATTN_CAUSAL) || \
    !defined(GL_DYNAMIC_SMEM)
#error "an attention step takes its configuration from families/attention.py: GL_ATTN_D, GL_ATTN_BN, GL_ATTN_DEPTH, GL_ATTN_CAUSAL, GL_DYNAMIC_SMEM"
#endif
constexpr int HEAD_D = GL_ATTN_D;    // head dim: the first MMA's K and the second's N
constexpr int BN = GL_ATTN_BN;       // keys per block: the first MMA's N and the second's K
constexpr int DEPTH = GL_ATTN_DEPTH; // K/V blocks in flight
constexpr bool CAUSAL = GL_ATTN_CAUSAL;
constexpr int WG_ROWS = 64;          // query rows per consumer warpgroup (wgmma's M)
constexpr int D_CHUNKS = HEAD_D / 64;  // 128-byte swizzle rows per head row
static_assert(HEAD_D == 64 || HEAD_D == 128 || HEAD_D == 256, "head dims 64, 128, 256");
#define NEG_INF (-__int_as_float(0x7f800000))  // -inf (no math headers under NVRTC)
static_assert(BN % 16 == 0 && BN >= 64 && BN <= 256, "a key block is whole k-slices of the second MMA");

// A (ROWS x HEAD_D) tile as TMA writes it: HEAD_D / 64 column chunks, each ROWS rows of 128
// swizzled bytes (1024-byte aligned). Q and K read it K-major (the head dim is the first MMA's
// K); V reads it MN-major (the head dim is the second MMA's N, the key index its K).
template <int ROWS>
struct HeadTile {
  static_assert(ROWS % 8 == 0, "whole 1024-byte swizzle atoms");
  static constexpr u32 BYTES = ROWS * HEAD_D * 2;
  static constexpr u32 CHUNK_BYTES = ROWS * 128;
  alignas(1024) u16 chunk[D_CHUNKS][ROWS * 64];

  // Rows [row0, row0 + ROWS) of head `head`, batch `batch`, credited to `bar`.
  GL_DEVICE void load(const CUtensorMap* map, u64* bar, int row0, int head, int batch) {
#pragma unroll
    for (int c = 0; c < D_CHUNKS; ++c) tma_load_4d(chunk[c], map, bar, c * 64, row0, head, batch);
  }
};
using QTile = HeadTile<WG_ROWS>;
using KvTile = HeadTile<BN>;

// Which query rows, head and batch a tile is, and how many key blocks it visits.
struct AttnTile {
  int index;  // the tile's number (>= the tile count: none, the walk's end)
  int q0, head, batch, kv_head, blocks;
};
// Tile i of Sq / bm query blocks x Hq heads x B batches. The (batch, head) pairs are taken in
// sections of `section` pairs; inside a section, query blocks outermost, heads fastest. One
// pair per section (the ladder's order): a head's query blocks one after another, so the CTAs
// running at once share their heads' K and V in L2. Causal: the longest rows first (the last
// query rows see the most keys), so the short ones fill the last wave; with wider sections the
// longest tiles of every head in the section come before the shorter ones (the dynamic walk's
// order, attn_warpspec.cuh). Keys past the tile's last row are skipped whole.
GL_DEVICE AttnTile attn_tile(int i, int bm, int Sq, int Sk, int Hq, int group, int section = 1, int pairs = 1) {
  const int m_blocks = ceil_div(Sq, bm), per_section = section * m_blocks;
  const int sec = i / per_section, r = i % per_section;
  // the last section may hold fewer of the `pairs` (batch x head) in all
  const int sec_pairs = section > 1 && pairs - sec * section < section ? pairs - sec * section : section;
  const int mb_idx = r / sec_pairs, hb = sec * section + r % sec_pairs;
  const int mb = CAUSAL ? m_blocks - 1 - mb_idx : mb_idx;
  AttnTile t;
  t.index = i;
  t.q0 = mb * bm;
  t.head = hb % Hq;
  t.batch = hb / Hq;
  t.kv_head = t.head / group;
  const int kv_end = CAUSAL ? (Sk < t.q0 + bm ? Sk : t.q0 + bm) : Sk;
  t.blocks = ceil_div(kv_end, BN);
  return t;
}

// S (64 x BN) = Q (64 x D) K (BN x D)^T: D / 16 k-slices, both operands K-major; the first
// slice overwrites S.
GL_DEVICE void mma_qk(float (&s)[BN / 2], const QTile& q, const KvTile& k) {
#pragma unroll
  for (int kk = 0; kk < HEAD_D / 16; ++kk) {
    const int c = kk / 4, off = (kk % 4) * 16;  // +32 bytes per 16-wide slice inside a chunk
    wgmma_m64k16<BN>(s, desc_sw128(q.chunk[c] + off), desc_sw128(k.chunk[c] + off), kk > 0 ? 1u : 0u);
  }
}

// O (64 x D) += P (64 x BN, registers) V (BN x D): BN / 16 k-slices of 16 key rows (2048 bytes
// each); V is MN-major, its 64-wide head-dim chunks CHUNK_BYTES apart.
GL_DEVICE void mma_pv(float (&o)[HEAD_D / 2], const u32 (&p)[BN / 16][4], const KvTile& v) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
    wgmma_m64k16_rs<HEAD_D, 1>(o, p[kk], desc_sw128_mn(v.chunk[0] + kk * 16 * 64, KvTile::CHUNK_BYTES), 1u);
}

GL_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
GL_DEVICE float fast_log2(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
GL_DEVICE float row_max4(float x) {  // the 4 threads holding one accumulator row
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
GL_DEVICE float row_sum4(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The online softmax of one consumer warpgroup. Each thread holds two rows of the m64
// accumulator (r and r + 8) and, per 8-column group j, two adjacent columns of each:
// acc[4j], acc[4j+1] in row r, acc[4j+2], acc[4j+3] in row r + 8. Scores stay raw; the
// scale (times log2 e) is folded into exp2's argument. `sum` is this thread's share of the
// row sums, reduced across the row's 4 threads only at the end.
struct OnlineSoftmax {
  float max[2], sum[2];
  int row[2];        // the thread's two query rows
  int col_lane;      // the thread's first column within an 8-column group

  GL_DEVICE explicit OnlineSoftmax(int row0) {
    const int lane = lane_idx(), warp_in_wg = (threadIdx.x / 32) % 4;
    row[0] = row0 + warp_in_wg * 16 + lane / 4;
    row[1] = row[0] + 8;
    col_lane = 2 * (lane % 4);
    max[0] = max[1] = NEG_INF;
    sum[0] = sum[1] = 0.f;
  }

  // Whether a block of keys starting at `col0` has any score to hide from rows `rows0`..+63.
  static GL_DEVICE bool needs_mask(int col0, int rows0, int Sk) {
    return col0 + BN > Sk || (CAUSAL && col0 + BN - 1 > rows0);
  }

  // Block of scores s (keys col0..col0+BN-1) -> probabilities in place; returns in `corr` the
  // factor each row's O must be rescaled by (exp2 of the max's move).
  template <bool MASK>
  GL_DEVICE void update(float (&s)[BN / 2], int col0, int Sk, float scale_log2, float (&corr)[2]) {
    float m[2] = {max[0], max[1]};
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float& x = s[4 * j + e];
        if constexpr (MASK) {
          const int col = col0 + 8 * j + col_lane + (e & 1), r = row[e >> 1];
          if (col >= Sk || (CAUSAL && col > r)) x = NEG_INF;
        }
        m[e >> 1] = fmaxf(m[e >> 1], x);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = row_max4(m[h]);
      // A row whose scores are all hidden so far keeps -inf; exp2 of it stays finite with 0.
      const float m_use = m[h] == NEG_INF ? 0.f : m[h];
      corr[h] = fast_exp2((max[h] - m_use) * scale_log2);
      max[h] = m[h];
      sum[h] *= corr[h];
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const float mh = max[h] == NEG_INF ? 0.f : max[h];
        const float p = fast_exp2(fmaf(s[4 * j + e], scale_log2, -mh * scale_log2));
        s[4 * j + e] = p;
        sum[h] += p;
      }
  }
};

// Traced builds record each consumer's softmax and MMA spans, except at head dim 256, where O
// holds 128 registers and the recorder's stores would spill: those record the rings only.
constexpr bool TRACE_SPANS = HEAD_D < 256;

// The softmax step of one block for a warpgroup's rows (masked only where a key is hidden).
GL_DEVICE void softmax_step(OnlineSoftmax& sm, float (&sc)[BN / 2], int j, int rows0, int Sk, float scale_log2,
                            float (&corr)[2]) {
  if (OnlineSoftmax::needs_mask(j * BN, rows0, Sk)) sm.update<true>(sc, j * BN, Sk, scale_log2, corr);
  else sm.update<false>(sc, j * BN, Sk, scale_log2, corr);
}
// The same, recorded as a span on its tracer (GL_TRACE builds).
GL_DEVICE void softmax_block(OnlineSoftmax& sm, float (&sc)[BN / 2], int j, int rows0, int Sk, float scale_log2,
                             float (&corr)[2], Tracer& tr) {
  if constexpr (TRACE_SPANS) tr.event(EV_SOFTMAX_BEGIN, 0, 0, 0, j);
  softmax_step(sm, sc, j, rows0, Sk, scale_log2, corr);
  if constexpr (TRACE_SPANS) tr.event(EV_SOFTMAX_END, 0, 0, 0, j);
}

// Tracing: an MMA issued or retired, named by the barrier of the operand it reads (BAR_K_FULL:
// Q K^T of block j, BAR_V_FULL: P V of block j).
GL_DEVICE void trace_mma(Tracer& tr, u32 kind, u32 which, int j) {
  if constexpr (TRACE_SPANS) tr.event(kind, which, 0, 0, j);
}

// O's rows scaled by the softmax's correction (before the next P V accumulates into it).
GL_DEVICE void rescale_o(float (&o)[HEAD_D / 2], const float (&corr)[2]) {
  if constexpr (GL_ABLATE_NO_RESCALE) return;  // the what-if: blocks summed at different scales
#pragma unroll
  for (int j = 0; j < HEAD_D / 8; ++j) {
    o[4 * j] *= corr[0];
    o[4 * j + 1] *= corr[0];
    o[4 * j + 2] *= corr[1];
    o[4 * j + 3] *= corr[1];
  }
}

// Probabilities (fp32 accumulator layout) -> the second MMA's register A operand: slice kk
// (keys 16kk..16kk+15) is accumulator groups 2kk and 2kk+1, so no data moves between threads.
GL_DEVICE void to_operand(u32 (&p)[BN / 16][4], const float (&s)[BN / 2]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    p[kk][0] = pack2(s[8 * kk], s[8 * kk + 1]);
    p[kk][1] = pack2(s[8 * kk + 2], s[8 * kk + 3]);
    p[kk][2] = pack2(s[8 * kk + 4], s[8 * kk + 5]);
    p[kk][3] = pack2(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

// The end of a warpgroup's rows: O / rowsum, written to o (B, Hq, Sq, D) contiguous; the
// log-sum-exp (natural log of the scaled scores' sum) to lse (B, Hq, Sq) when given. Rows past
// Sq are not written.
GL_DEVICE void store_rows(const float (&o)[HEAD_D / 2], OnlineSoftmax& sm, float scale_log2, u16* out, float* lse,
                          int Sq, int Hq, const AttnTile& t) {
  const u64 head_row0 = ((u64)t.batch * Hq + t.head) * (u64)Sq;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = row_sum4(sm.sum[h]);
    const float inv = 1.f / total;
    const int r = sm.row[h];
    if (r >= Sq) continue;
    u32* dst = reinterpret_cast<u32*>(out + (head_row0 + r) * HEAD_D + sm.col_lane);
#pragma unroll
    for (int j = 0; j < HEAD_D / 8; ++j) dst[4 * j] = pack2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
    if (lse != nullptr && sm.col_lane == 0)
      lse[head_row0 + r] = (sm.max[h] * scale_log2 + fast_log2(total)) * 0.69314718055994531f;
  }
}
