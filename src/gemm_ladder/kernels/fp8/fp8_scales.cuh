// fp8_scales.cuh — what an fp8 GEMM does with its scales, and the fp32 output's staging.
//
// The scales are dequantization multipliers (x = x_fp8 * scale), as torch._scaled_mm takes them:
//   GL_FP8_SCALE 0, per tensor: one scale for A, one for B;
//   GL_FP8_SCALE 1, row-wise:   A per row (M,), B per column of C (N,);
//   GL_FP8_SCALE 2, block-wise: A per row and 128-wide k-block (M, ceil(K/128)), B per 128 x 128
//                               block (ceil(N/128), ceil(K/128)) — DeepGEMM's layout.
// Per-tensor and row-wise scales multiply the finished sum (the epilogue); block scales change
// with k, so each k-block's partial sum is scaled as it is promoted (fp8_promote below).
//
// Accumulator fragment (gl_epilogue.cuh): thread (warp w, lane l) holds, per 8-column block j,
// row 16w + l/4 (d[4j], d[4j+1]) and the row 8 below (d[4j+2], d[4j+3]), columns
// 8j + 2(l%4) + {0, 1}.
#pragma once
#include "gl_common.cuh"
#include "gl_epilogue.cuh"

constexpr int FP8_SCALE_TENSOR = 0, FP8_SCALE_ROW = 1, FP8_SCALE_BLOCK = 2;
constexpr int FP8_OUT_BF16 = 0, FP8_OUT_F16 = 1, FP8_OUT_F32 = 2;
constexpr int FP8_SCALE_BLOCK_K = 128;  // the block scales' k-block (and B's n-block)

// This thread's two accumulator rows (the fragment's l/4 and l/4 + 8) of an m64 slice at row0.
GL_DEVICE int fragment_row(int row0) { return row0 + 16 * ((threadIdx.x % 128) / 32) + lane_idx() / 4; }
GL_DEVICE int fragment_col(int col0, int j) { return col0 + 8 * j + 2 * (lane_idx() % 4); }

// Global scale reads: read-only for the whole kernel, through the non-coherent cache.
GL_DEVICE float load_scale(const float* p) { return __ldg(p); }

// Block scales of one k-block for this thread's two rows: A's (zero past M, whose rows TMA
// zero-filled anyway), and B's for each of the tile's PIECES column pieces of PN columns (a piece
// lies inside one 128-wide n-block).
template <int PIECES>
struct BlockScales {
  float lo, hi;
  float b[PIECES];
};
template <int PIECES, int PN>
GL_DEVICE BlockScales<PIECES> block_scales(const float* sa, const float* sb, int M, int k_blocks, int row, int n0,
                                           int kb) {
  BlockScales<PIECES> s;
#if GL_ABLATE_FP8_UNIT_SA
  s.lo = row < M ? 1.f : 0.f;
  s.hi = row + 8 < M ? 1.f : 0.f;
#else
  s.lo = row < M ? load_scale(sa + (long long)row * k_blocks + kb) : 0.f;
  s.hi = row + 8 < M ? load_scale(sa + (long long)(row + 8) * k_blocks + kb) : 0.f;
#endif
#pragma unroll
  for (int h = 0; h < PIECES; ++h)
    s.b[h] = GL_ABLATE_FP8_UNIT_SB ? 1.f : load_scale(sb + ((n0 + h * PN) / FP8_SCALE_BLOCK_K) * k_blocks + kb);
  return s;
}
// The same scales from pointers set once per tile (GL_FP8_LATE_SCALES): A's two rows of this
// thread (null past M: scale 0) and B's n-block row of each piece, so a k-block's scales are
// loads at offset kb, without the index arithmetic block_scales repeats every k-tile.
template <int PIECES, int PN>
struct BlockScaleRows {
  const float *lo, *hi, *b[PIECES];
  GL_DEVICE BlockScaleRows(const float* sa, const float* sb, int M, int k_blocks, int row, int n0)
      : lo(row < M ? sa + (long long)row * k_blocks : nullptr),
        hi(row + 8 < M ? sa + (long long)(row + 8) * k_blocks : nullptr) {
#pragma unroll
    for (int h = 0; h < PIECES; ++h) b[h] = sb + (long long)((n0 + h * PN) / FP8_SCALE_BLOCK_K) * k_blocks;
  }
  // PREDICATED_B: B's scales read only by threads whose first row is in M (the others' factors
  // are 0 through A's), which makes them per-thread values. Read by every thread, the value is
  // warp-uniform, and ptxas moves it into a uniform register (R2UR) right after the load is
  // issued: the warp waits there for the load it meant to read a k-tile later.
  template <bool PREDICATED_B = false>
  GL_DEVICE BlockScales<PIECES> at(int kb) const {
    BlockScales<PIECES> s;
#if GL_ABLATE_FP8_UNIT_SA
    s.lo = lo ? 1.f : 0.f;
    s.hi = hi ? 1.f : 0.f;
#else
    s.lo = lo ? load_scale(lo + kb) : 0.f;
    s.hi = hi ? load_scale(hi + kb) : 0.f;
#endif
#pragma unroll
    for (int h = 0; h < PIECES; ++h)
      s.b[h] = GL_ABLATE_FP8_UNIT_SB ? 1.f : !PREDICATED_B || lo ? load_scale(b[h] + kb) : 0.f;
    return s;
  }
};
// A tile's row-wise column scales and bias fetched into L2 as the tile starts (unless
// GL_ABLATE_FP8_NO_SCALE_PREFETCH): after the L2 has been flushed their first loads, in the
// epilogue, go to HBM (the caller's one thread; the lines of BN columns).
template <int BN, int OUT_BYTES>
GL_DEVICE void prefetch_col_factors(const float* sb, const void* bias, int ncols, int n0) {
  if (GL_ABLATE_FP8_NO_SCALE_PREFETCH) return;
  for (int c = 0; c < BN; c += 32) {  // 32 floats per line: the scales'; a 16-bit bias's lines span 64
    if (n0 + c >= ncols) break;
    if (sb) prefetch_l2(sb + n0 + c);
    if (bias && c % (128 / OUT_BYTES) == 0) prefetch_l2(static_cast<const char*>(bias) + (long long)(n0 + c) * OUT_BYTES);
  }
}
template <int PIECES>
GL_DEVICE BlockScales<PIECES> unit_scales() {
  BlockScales<PIECES> s;
  s.lo = s.hi = 1.f;
#pragma unroll
  for (int h = 0; h < PIECES; ++h) s.b[h] = 1.f;
  return s;
}

// A k-tile's promotion factors, row x n-block (lo * b[n], hi * b[n]): multiplied once per
// k-tile, where a piece's partial is scaled by one pair of them.
template <int NB>
struct PromoteFactors {
  float lo[NB], hi[NB];
};
template <int NB>
GL_DEVICE PromoteFactors<NB> promote_factors(const BlockScales<NB>& s) {
  PromoteFactors<NB> f;
#pragma unroll
  for (int n = 0; n < NB; ++n) f.lo[n] = s.lo * s.b[n], f.hi[n] = s.hi * s.b[n];
  return f;
}

// Promotion: the tensor core's partial sum of some k-tiles over one column piece, added into
// the fp32 registers that hold the tile's sum (from register `first` on), scaled on the way (1
// unless block scales). fp8 wgmma accumulates in a narrower format than fp32; doing the long
// sum here keeps the error from growing with K. `first` must be a compile-time constant after
// unrolling (it indexes registers).
template <int RA, int RP>
GL_DEVICE void fp8_promote(float (&acc)[RA], int first, const float (&part)[RP], float lo, float hi) {
#pragma unroll
  for (int j = 0; j < RP / 4; ++j) {
    acc[first + 4 * j + 0] += part[4 * j + 0] * lo;
    acc[first + 4 * j + 1] += part[4 * j + 1] * lo;
    acc[first + 4 * j + 2] += part[4 * j + 2] * hi;
    acc[first + 4 * j + 3] += part[4 * j + 3] * hi;
  }
}

// The epilogue's scales and bias on the 8-column blocks [J0, J0 + JN) of a finished N-wide
// accumulator of the m64 slice at (row0, n0) — one staging chunk at a time, so the scales and
// bias of only that chunk are live: per tensor, row-wise (A's per row, B's per column) or none
// (block scales were applied while promoting); then bias (N,) in the output's type, per column.
// Columns past N are not read (N is a multiple of the 16-byte output row: their pairs are
// wholly past it). The row scales are read before the mainloop, the column factors a chunk ahead.
struct RowScales {
  float lo, hi;
};
template <int SCALE>
GL_DEVICE RowScales epilogue_row_scales(const float* sa, const float* sb, int M, int row0) {
  const int row = fragment_row(row0);
  if constexpr (SCALE == FP8_SCALE_TENSOR) {
    const float s = load_scale(sa) * load_scale(sb);
    return {s, s};
  } else if constexpr (SCALE == FP8_SCALE_ROW) {
    return {row < M ? load_scale(sa + row) : 0.f, row + 8 < M ? load_scale(sa + row + 8) : 0.f};
  }
  return {1.f, 1.f};
}
// j0 must be a compile-time constant after unrolling (it indexes registers), as a chunk's is.
// A chunk's column factors: B's row-wise scale and the bias, per 8-column block of this
// thread's fragment (loaded a chunk ahead, so global latency hides under the previous chunk's
// staging or, for the first chunk, under the mainloop).
template <int SCALE, bool BIAS, int JN>
struct ColFactors {
  float2 s[SCALE == FP8_SCALE_ROW ? JN : 1];
  float2 b[BIAS ? JN : 1];
};
template <int SCALE, bool BIAS, int OUT, int JN>
GL_DEVICE ColFactors<SCALE, BIAS, JN> load_col_factors(const float* sb, const void* bias, int ncols, int n0, int j0) {
  ColFactors<SCALE, BIAS, JN> f{};
#pragma unroll
  for (int j = 0; j < JN; ++j) {
    const int col = fragment_col(n0, j0 + j);
    const bool in = col < ncols;
    if constexpr (SCALE == FP8_SCALE_ROW)
      f.s[j] = in ? __ldg(reinterpret_cast<const float2*>(sb + col)) : make_float2(0.f, 0.f);
    if constexpr (BIAS && OUT == FP8_OUT_F32) {
      f.b[j] = in ? __ldg(reinterpret_cast<const float2*>(static_cast<const float*>(bias) + col)) : make_float2(0.f, 0.f);
    } else if constexpr (BIAS) {
      const u32 b = in ? __ldg(reinterpret_cast<const unsigned int*>(static_cast<const u16*>(bias) + col)) : 0u;
      f.b[j] = make_float2(to_float((u16)(b & 0xffffu)), to_float((u16)(b >> 16)));
    }
  }
  return f;
}
// j0 must be a compile-time constant after unrolling (it indexes registers), as a chunk's is.
template <int N, int SCALE, bool BIAS, int JN>
GL_DEVICE void fp8_epilogue_scale(float (&d)[N / 2], RowScales r, const ColFactors<SCALE, BIAS, JN>& f, int j0) {
  constexpr int APPLY = SCALE == FP8_SCALE_BLOCK && !BIAS ? 0 : JN;  // block scales were applied while promoting
#pragma unroll
  for (int i = 0; i < APPLY; ++i) {
    const int j = j0 + i;
    const float c0 = SCALE == FP8_SCALE_ROW ? f.s[i].x : 1.f, c1 = SCALE == FP8_SCALE_ROW ? f.s[i].y : 1.f;
    const float b0 = BIAS ? f.b[i].x : 0.f, b1 = BIAS ? f.b[i].y : 0.f;
    d[4 * j + 0] = d[4 * j + 0] * r.lo * c0 + b0;
    d[4 * j + 1] = d[4 * j + 1] * r.lo * c1 + b1;
    d[4 * j + 2] = d[4 * j + 2] * r.hi * c0 + b0;
    d[4 * j + 3] = d[4 * j + 3] * r.hi * c1 + b1;
  }
}

// fp32 output: columns [32 chunk, 32 chunk + 32) of an N-wide accumulator -> a ROWS x 32 fp32
// staging buffer in the 128B-swizzled layout (rows of 128 bytes, 16-byte unit u of row r at
// u ^ (r % 8)) that a TMA store of a 32-wide fp32 box reads. Each thread writes float2s.
template <int N, int ROWS>
GL_DEVICE void stage_chunk_f32_sw128(const float (&d)[N / 2], void* staging, int row0, int chunk) {
  const u32 base = smem_u32(staging);
  const int row = fragment_row(row0);
#pragma unroll
  for (int g = 0; g < 4; ++g) {  // the chunk's four 8-column blocks
    const int j = 4 * chunk + g, col = fragment_col(0, g);  // column inside the chunk
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row + 8 * half;
      const u32 addr = base + r * 128 + (((col / 4) ^ (r % 8)) * 16) + (col % 4) * 4;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(d[4 * j + 2 * half]),
                   "f"(d[4 * j + 2 * half + 1]) : "memory");
    }
  }
}
