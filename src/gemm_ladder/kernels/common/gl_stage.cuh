// gl_stage.cuh — the library's staging copy: an operand whose strides or address TMA cannot
// take is copied into scratch whose rows are 16-byte aligned, before the GEMM reads it.
// Included with the TMA helpers, so every TMA kernel's module carries this entry and the
// library launches it from the module it already loaded (one launch for both operands,
// where two torch copies cost ~24 us of host per call: docs/perf-notes.md item 43).
#pragma once
#include "gl_common.cuh"

// Copy `rows` x `cols` 16-bit elements, element (r, c) read at src[r * rs + c] (rows
// contiguous: the library uses this for plain copies only, not transposes) and written at
// dst[r * ld + c]. Blocks stride over rows, 256 threads (staging.STAGE_COPY_THREADS) over
// columns; blockIdx.y picks the operand (a second operand's arguments follow the first's;
// gridDim.y = operands).
extern "C" __global__ void __launch_bounds__(256) gl_stage_copy(
    const u16* __restrict__ src0, u16* __restrict__ dst0, long long rows0, long long cols0, long long rs0,
    long long ld0, const u16* __restrict__ src1, u16* __restrict__ dst1, long long rows1, long long cols1,
    long long rs1, long long ld1) {
  const bool second = blockIdx.y == 1;
  const u16* src = second ? src1 : src0;
  u16* dst = second ? dst1 : dst0;
  const long long rows = second ? rows1 : rows0, cols = second ? cols1 : cols0;
  const long long rs = second ? rs1 : rs0, ld = second ? ld1 : ld0;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x)
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) dst[r * ld + c] = src[r * rs + c];
}
