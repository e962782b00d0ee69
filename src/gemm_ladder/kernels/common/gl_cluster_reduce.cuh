// gl_cluster_reduce.cuh — split-K's pieces summed on chip. The CTAs of a cluster compute the
// pieces of one tile (each a run of its k-tiles); each stages its fp32 piece in its own shared
// memory (the drained operand ring), and after a cluster barrier CTA r sums column slice r of
// the tile over every CTA's piece through distributed shared memory, in rank order 0, 1, ...
// (the same inputs give bit-identical outputs), and hands each 4 columns to the family's store.
// No workspace in global memory, no second launch.
//
// Accumulator fragment (gl_epilogue.cuh): thread (warp w, lane l) of a consumer warpgroup holds,
// per 8-column block j, row 16w + l/4 (d[4j], d[4j+1]) and the row 8 below (d[4j+2], d[4j+3]),
// columns 8j + 2(l%4) + {0, 1}.
#pragma once
#include "gl_cluster.cuh"

constexpr u32 CLUSTER_REDUCE_MAX_PIECES = 8;  // the portable cluster size

// A BM x BN piece's row stride in floats: rows padded by 8 floats, so the fragment's 8 rows of a
// store land in different banks.
template <int BN>
constexpr int piece_ld() { return BN + 8; }

// Step 1: a consumer's 64 x BN fragment (rows < `rows` only) into the piece, from row r0 on.
template <int BN>
GL_DEVICE void stage_piece(const float (&acc)[BN / 2], float* piece, int r0, int rows) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = 16 * w + l / 4 + 8 * half;
    if (row >= rows) continue;
    float* dst = piece + (r0 + row) * piece_ld<BN>() + 2 * (l % 4);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
      *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
  }
}

// Step 2 (after a cluster barrier that follows every CTA's step 1): this CTA's column slice of
// the tile's first `rows` rows, columns < `cols` only, summed over the `pieces` CTAs' pieces in
// rank order; store(row, col, sum) takes each 4 columns (cols is a multiple of 4). Threads
// `tid` of `nthreads` share the work, element tid, tid + nthreads, ... each. A thread keeps
// CLUSTER_REDUCE_MAX_PIECES loads in flight (its next 8 / P elements' pieces: one DSMEM round trip
// where there were 8 / P), then adds each element's pieces in order.
template <int BN, int P, class Store>
GL_DEVICE void reduce_slice_of(const float* piece, int rows, int cols, u32 rank, int tid, int nthreads, Store store) {
  constexpr int E = (int)CLUSTER_REDUCE_MAX_PIECES / P;  // elements per batch
  const int width = BN / P, c0 = (int)rank * width, per_row = width / 4, total = rows * per_row;
  for (int e0 = tid; e0 < total; e0 += E * nthreads) {
    float4 part[E][P];
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int e = e0 + i * nthreads;
      if (e >= total) break;
      const float* mine = piece + e / per_row * piece_ld<BN>() + c0 + 4 * (e % per_row);
#pragma unroll
      for (int q = 0; q < P; ++q) part[i][q] = ld_cluster_f4(map_to_cta(mine, (u32)q));
    }
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int e = e0 + i * nthreads, row = e / per_row, col = c0 + 4 * (e % per_row);
      if (e >= total) break;
      if (col >= cols) continue;
      float4 sum = part[i][0];
#pragma unroll
      for (int q = 1; q < P; ++q) {
        sum.x += part[i][q].x; sum.y += part[i][q].y; sum.z += part[i][q].z; sum.w += part[i][q].w;
      }
      store(row, col, sum);
    }
  }
}
template <int BN, class Store>
GL_DEVICE void reduce_slice(const float* piece, int rows, int cols, u32 rank, u32 pieces, int tid, int nthreads,
                            Store store) {
  // the hosts deal 1 (fp8's on-chip split of one: its consumers' halves), 2, 4 or 8 pieces
  if (pieces == 1) reduce_slice_of<BN, 1>(piece, rows, cols, rank, tid, nthreads, store);
  else if (pieces == 2) reduce_slice_of<BN, 2>(piece, rows, cols, rank, tid, nthreads, store);
  else if (pieces == 4) reduce_slice_of<BN, 4>(piece, rows, cols, rank, tid, nthreads, store);
  else if (pieces == 8) reduce_slice_of<BN, 8>(piece, rows, cols, rank, tid, nthreads, store);
  else asm volatile("trap;");  // a cluster no host deals: stop rather than read past it
}
