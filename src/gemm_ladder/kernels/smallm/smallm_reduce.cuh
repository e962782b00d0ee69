// The small-M family's second pass (smallm_splitk.cu's split tiles summed into C), included at
// the end of that kernel's file: it reads the family's tile (BM, BN, BK), its shared-load
// cluster (NA, MB) and the programmatic-launch helpers defined there.
#pragma once
#include "gl_partials.cuh"

// The pieces the tile of C's element (row, col) was split in, from the same deal of
// units as the main kernel (Segments); 1 for a tile one CTA computed whole (written by it).
GL_DEVICE int tile_pieces(int row, int col, int M, int K, int units) {
  const int k_tiles = ceil_div(K, BK), t = col / BN * ceil_div(M, BM) + row / BM;
  const int first = t * k_tiles / units;
  return NA * MB > 1 ? units  // shared loads: pieces per tile
                     : (t * k_tiles + k_tiles - 1) / units - first + 1;
}
// ... and their start: the next grid of a chain may launch; the partials must be complete.
GL_DEVICE void reduce_wait() {
  if (threadIdx.x == 0) pdl_launch_dependents();  // the next GEMM of a chain may set up (it waits for us)
  pdl_wait_for_previous();  // the partials are complete and visible
}

// The second pass: for each split tile, C = round16(ws[0] + ws[1] + ... ), its planes summed
// in that order in fp32 (a fixed order: deterministic); tiles one CTA computed whole were
// written by it and are skipped. The tile of an element and its planes follow from the same
// deal of units as the main kernel (Segments). Block (x, row): one thread per 2 consecutive
// elements of a row of C (N is a multiple of 8), all in 32-bit integer arithmetic; 8-byte loads
// from each plane, one 4-byte store. 128-thread blocks of <= 40 registers (REDUCE_MAX_REGS; 32
// at NVRTC 13.0) fit beside a one-consumer CTA (232 x 256 of the SM's 64K registers), so with
// programmatic launch they wait on the SMs rather than launch after the split-K grid ends.
// The planes are read in batches of REDUCE_BATCH (gl_partials.cuh; perf-notes item 113): same
// order, same bits as the plane-after-plane sum; faster at 54 of 60 long-K rows on the H100, by up
// to 0.9 us.
constexpr int REDUCE_BATCH = GL_REDUCE_BATCH;  // smallm_args.REDUCE_BATCH

extern "C" __global__ void __launch_bounds__(128, 12)  // 12 blocks of 128: ptxas keeps to <= 42 registers
gemm_smallm_reduce(const float* __restrict__ ws, u16* __restrict__ c, int M, int N, int K, int units) {
  const int row = blockIdx.y, col = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
  reduce_wait();
  if (col >= N) return;
  const int pieces = tile_pieces(row, col, M, K, units);
  if (pieces == 1) return;  // computed whole, C written by the main kernel
  const long long plane = (long long)M * N / 2, q = ((long long)row * N + col) / 2;  // float2s
  const float2* p = reinterpret_cast<const float2*>(ws) + q;
  float2 sum = p[0];
  add_planes<REDUCE_BATCH>(sum, p, plane, 1, pieces);
  *reinterpret_cast<u32*>(c + 2 * q) = pack2(sum.x, sum.y);
}
