// gl_epilogue.cuh — getting fp32 accumulators of an m64nN wgmma out of registers.
//
// Accumulator fragment (per warpgroup thread t, warp w = (t/32)%4, lane l = t%32): for each
// 8-column block j, d[4j+0..1] hold row 16w + l/4, columns 8j + 2(l%4) + {0,1}, and
// d[4j+2..3] the same columns 8 rows further down. A pair of neighbours packs into one
// 32-bit register: exactly the fragment of an 8x8 matrix that stmatrix stores.
#pragma once
#include "gl_common.cuh"
#include "gl_tma.cuh"

// Straight from registers to global memory (steps 2-3): 4-byte stores, C row-major, ldc
// elements per row. (row0, col0): the tile corner of this m64 slice.
template <int N>
GL_DEVICE void store_acc_global(const float (&d)[N / 2], u16* C, int ldc, int row0, int col0) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + 16 * w + l / 4 + 8 * half;
      const int col = col0 + 8 * j + 2 * (l % 4);
      *reinterpret_cast<u32*>(C + (long long)row * ldc + col) =
          pack2(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
    }
  }
}

// Staging layout for a TMA store with 128B swizzle: the tile is cut into column chunks of
// 64 elements (128 bytes, the widest box a swizzled TMA copy takes); chunk c holds ROWS
// rows of 128 bytes, and the 16-byte unit u of row r sits at unit u ^ (r % 8).
template <int ROWS>
GL_DEVICE u32 staging_offset(int row, int col) {
  const int chunk = col / 64, unit = (col % 64) / 8;
  return chunk * (ROWS * 128) + row * 128 + ((unit ^ (row % 8)) * 16);
}

GL_DEVICE void stmatrix_x4(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
// Two 8x8 matrices: lanes 0-7 name the rows of the first, lanes 8-15 those of the second.
GL_DEVICE void stmatrix_x2(u32 addr, u32 r0, u32 r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r0), "r"(r1) : "memory");
}

// One 16-column group j of this thread's accumulator fragment, rounded to 16 bits -> four
// 8x8 matrices, this thread's row of them at shared address `addr`.
template <int N>
GL_DEVICE void stmatrix_group(const float (&d)[N / 2], u32 addr, int j) {
  stmatrix_x4(addr, pack2(d[8 * j + 0], d[8 * j + 1]), pack2(d[8 * j + 2], d[8 * j + 3]),
              pack2(d[8 * j + 4], d[8 * j + 5]), pack2(d[8 * j + 6], d[8 * j + 7]));
}

// One 16-column group j of this thread's accumulator fragment -> 8x8 matrices at `col` of
// the swizzled staging (conflict-free: the 8 rows of each 8x8 matrix land in 8 different
// 16-byte units). `row`: this thread's stmatrix row address inside the staging tile.
template <int N, int ROWS>
GL_DEVICE void stage_group_sw128(const float (&d)[N / 2], u32 base, int row, int j, int col) {
  stmatrix_group<N>(d, base + staging_offset<ROWS>(row, col), j);
}
GL_DEVICE int stmatrix_row(int row0) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
  return row0 + 16 * w + ((l / 8) & 1) * 8 + (l % 8);
}
GL_DEVICE int stmatrix_col(int col0) { return col0 + ((lane_idx() / 8) >> 1) * 8; }

// Registers -> swizzled shared staging. row0: this m64 slice's first row inside the staging
// tile; col0: first column (multiple of 16) of the accumulator inside the staging tile.
template <int N, int ROWS>
GL_DEVICE void stage_acc_sw128(const float (&d)[N / 2], void* staging, int row0, int col0 = 0) {
  const int row = stmatrix_row(row0);
#pragma unroll
  for (int j = 0; j < N / 16; ++j) stage_group_sw128<N, ROWS>(d, smem_u32(staging), row, j, stmatrix_col(col0 + 16 * j));
}

// Columns [64 chunk, 64 chunk + 64) of an N-wide accumulator -> a one-chunk (ROWS x 64)
// swizzled staging buffer: the chunked epilogue, so the staging need not hold a whole tile.
// `chunk` must be a compile-time constant after unrolling (it indexes registers).
template <int N, int ROWS>
GL_DEVICE void stage_chunk_sw128(const float (&d)[N / 2], void* staging, int row0, int chunk) {
  const int row = stmatrix_row(row0);
#pragma unroll
  for (int g = 0; g < 4; ++g) stage_group_sw128<N, ROWS>(d, smem_u32(staging), row, 4 * chunk + g, stmatrix_col(16 * g));
}

// A narrow last chunk (columns [64 chunk, 64 chunk + COLS), COLS < 64, a multiple of 16) of
// an N-wide accumulator -> an unswizzled staging buffer of rows COLS x 2 bytes apart, the
// layout a TMA store without swizzle reads for a box COLS wide. (A 128B-swizzled box narrower
// than 128 bytes has no layout to count on here.) Rows 2 x COLS bytes apart put some of an
// 8x8 matrix's rows in the same banks: a few conflicts, on the last chunk only.
template <int N, int COLS>
GL_DEVICE void stage_chunk_plain(const float (&d)[N / 2], void* staging, int row0, int chunk) {
  static_assert(COLS > 0 && COLS % 8 == 0 && COLS < 64 && N % 64 == COLS, "the last chunk, 8-column blocks");
  const u32 base = smem_u32(staging) + stmatrix_row(row0) * (COLS * 2);
#pragma unroll
  for (int g = 0; g < COLS / 16; ++g) stmatrix_group<N>(d, base + stmatrix_col(16 * g) * 2, 4 * chunk + g);
  if constexpr (COLS % 16) {  // a last 8-column block (9:n232): its rows 0-7 and 8-15, one matrix each
    constexpr int j = (N - 8) / 8;
    stmatrix_x2(base + (COLS - 8) * 2, pack2(d[4 * j + 0], d[4 * j + 1]), pack2(d[4 * j + 2], d[4 * j + 3]));
  }
}

// Both m64 halves of a 128-row accumulator tile -> the swizzled staging buffer.
template <int BN>
GL_DEVICE void stage_tile_128(const float (&acc)[2][BN / 2], void* staging) {
#pragma unroll
  for (int h = 0; h < 2; ++h) stage_acc_sw128<BN, 128>(acc[h], staging, 64 * h);
}

// The staged ROWS x COLS tile -> global at (x0 = column, y0 = row), one TMA store per
// 64-column chunk. One thread issues; the caller commits and waits.
template <int ROWS, int COLS>
GL_DEVICE void tma_store_tile(const CUtensorMap* map, const u16* staging, int x0, int y0) {
#pragma unroll
  for (int c = 0; c < COLS / 64; ++c) tma_store_2d(map, staging + c * ROWS * 64, x0 + 64 * c, y0);
}
