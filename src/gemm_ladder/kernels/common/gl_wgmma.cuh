// gl_wgmma.cuh — warpgroup MMA (sm_90a): shared-memory descriptors and the async
// fence / commit / wait protocol. One warpgroup (4 consecutive warps, starting at a warp
// index divisible by 4) issues each wgmma together.
#pragma once
#include "gl_common.cuh"
#include "gl_wgmma_ops.cuh"

// K-major tile in the 128B-swizzled layout that TMA writes: rows of 128 bytes (64
// elements), groups of 8 rows 1024 bytes apart (SBO); LBO is unused for this layout.
// The tile must start 1024-byte aligned; stepping 16 elements along K adds 32 bytes.
GL_DEVICE u64 desc_sw128(const void* smem) {
  const u64 addr = smem_u32(smem);
  return ((addr & 0x3FFFFull) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

// A descriptor moved `bytes` (a multiple of 16) along its tile: only the start-address field
// (bits 0-13, in 16-byte units) changes, and a shared-memory address stays below 2^18 bytes,
// so the add never carries out of the low word. Fewer uniform-datapath steps per MMA than
// building each descriptor from its address (add, mask, shift, or, and the high word).
GL_DEVICE u64 desc_advance(u64 desc, u32 bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | (u32)((u32)desc + (bytes >> 4));
}

// MN-major tile (the operand's M or N index contiguous), as TMA writes it from a row-major
// (K, MN) matrix with 128B swizzle: blocks of 64 MN-elements x BK k-rows, each k-row 128
// bytes; 8-row k groups 1024 bytes apart (SBO), 64-wide MN blocks `block_bytes` apart (LBO).
// Stepping 16 elements along K adds 16 rows = 2048 bytes.
GL_DEVICE u64 desc_sw128_mn(const void* smem, u32 block_bytes) {
  const u64 addr = smem_u32(smem);
  return ((addr & 0x3FFFFull) >> 4) | ((u64)(block_bytes >> 4) << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

// K-major tile without swizzle: 8x8 "core matrices" of 128 contiguous bytes.
// lbo = bytes between core matrices adjacent in K, sbo = adjacent in M (or N).
GL_DEVICE u64 desc_interleaved(const void* smem, u32 lbo, u32 sbo) {
  const u64 addr = smem_u32(smem);
  return ((addr & 0x3FFFFull) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32);
}

// Order prior register/shared-memory accesses before the next wgmma reads them.
GL_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
GL_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Wait until at most N committed wgmma groups of this warp are still running.
template <int N> GL_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keep the compiler from moving accumulator accesses across the async wgmma window.
template <int R> GL_DEVICE void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Accumulators start at zero for each output tile.
template <int R> GL_DEVICE void zero_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) d[i] = 0.f;
}
template <int H, int R> GL_DEVICE void zero_acc(float (&d)[H][R]) {
#pragma unroll
  for (int h = 0; h < H; ++h) zero_acc(d[h]);
}

// One 64-wide k-tile of a 128 x 128 output tile, both operands K-major and 128B-swizzled
// (as TMA writes them): 4 k-slices of 16 x 2 m64 halves; acc[h] holds rows 64h..64h+63.
// The caller brackets it with wgmma_fence / wgmma_commit and chooses when to wait.
GL_DEVICE void mma_ktile_128x128_sw128(float (&acc)[2][64], const u16* A, const u16* B) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)  // +32 bytes per 16-wide k slice
#pragma unroll
    for (int h = 0; h < 2; ++h)
      wgmma_m64n128k16(acc[h], desc_sw128(A + h * 64 * 64 + kk * 16), desc_sw128(B + kk * 16), 1);
}
