// gl_stage.cuh — the library's staging copy: an operand whose strides or address TMA cannot
// take is copied into scratch whose rows are 16-byte aligned, before the GEMM reads it.
// Included with the TMA helpers, so every TMA kernel's module carries this entry and the
// library launches it from the module it already loaded (one launch for both operands,
// where two torch copies cost ~24 us of host per call: docs/perf-notes.md item 43).
#pragma once
#include "gl_common.cuh"

// Copy `rows` x `cols` 16-bit elements, element (r, c) read at src[r * rs + c] (rows
// contiguous: the library uses this for plain copies only, not transposes) and written at
// dst[r * ld + c]. A block copies one chunk of a row, STAGE_UNROLL x 256 columns
// (staging.STAGE_COPY_THREADS, _UNROLL), blocks striding over the (row, chunk) pairs; each
// thread loads its STAGE_UNROLL elements before storing any, so that many reads are in flight
// per thread (a row per block with one element in flight per thread left the copy bound by
// one DRAM round trip per 256 columns: ~14 us for a 255 x 8191 operand, docs/perf-notes.md
// item 105). blockIdx.y picks the operand (a second operand's arguments follow the first's;
// gridDim.y = operands).
constexpr int STAGE_UNROLL = 8;
extern "C" __global__ void __launch_bounds__(256) gl_stage_copy(
    const u16* __restrict__ src0, u16* __restrict__ dst0, long long rows0, long long cols0, long long rs0,
    long long ld0, const u16* __restrict__ src1, u16* __restrict__ dst1, long long rows1, long long cols1,
    long long rs1, long long ld1) {
  const bool second = blockIdx.y == 1;
  const u16* src = second ? src1 : src0;
  u16* dst = second ? dst1 : dst0;
  const long long rows = second ? rows1 : rows0, cols = second ? cols1 : cols0;
  const long long rs = second ? rs1 : rs0, ld = second ? ld1 : ld0;
  const long long width = (long long)blockDim.x * STAGE_UNROLL, chunks = (cols + width - 1) / width;
  for (long long b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
    const long long r = b / chunks, c0 = (b - r * chunks) * width + threadIdx.x;
    u16 v[STAGE_UNROLL];
#pragma unroll
    for (int u = 0; u < STAGE_UNROLL; ++u)
      if (c0 + u * blockDim.x < cols) v[u] = src[r * rs + c0 + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < STAGE_UNROLL; ++u)
      if (c0 + u * blockDim.x < cols) dst[r * ld + c0 + u * blockDim.x] = v[u];
  }
}
