// gl_common.cuh — basic types, element conversion and thread-role helpers.
// Kernels are compiled by NVRTC without any system or CUDA headers, so this file
// defines the few things we need itself.
#pragma once

typedef unsigned char      u8;
typedef unsigned short     u16;
typedef unsigned int       u32;
typedef unsigned long long u64;

#define GL_DEVICE __device__ __forceinline__

#include "gl_ablations.cuh"  // every switch's default (GL_BF16, GL_A_MN, GL_B_MN, ...)

// Element type of A, B and C: fp16, or bf16 with GL_BF16=1.
// Elements travel as raw 16-bit words; only conversions know the format.
#if GL_BF16
#define GL_AB_TYPE "bf16"
#else
#define GL_AB_TYPE "f16"
#endif

// 128-byte opaque TMA descriptor, built on the host by cuTensorMapEncodeTiled and
// passed by value as a __grid_constant__ kernel parameter.
struct alignas(64) CUtensorMap { u64 opaque[16]; };

GL_DEVICE float to_float(u16 x) {
#if GL_BF16
  return __uint_as_float(((u32)x) << 16);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
#endif
}

// Two fp32 -> one 32-bit register holding two 16-bit outputs; `lo` lands at the lower address.
GL_DEVICE u32 pack2(float lo, float hi) {
  u32 r;
#if GL_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

GL_DEVICE u16 to_elem(float x) { return (u16)(pack2(x, 0.f) & 0xffffu); }

GL_DEVICE u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// Warp and warpgroup indices, made warp-uniform so role branches don't diverge.
GL_DEVICE int warp_idx() { return __shfl_sync(0xffffffffu, (int)threadIdx.x / 32, 0); }
GL_DEVICE int lane_idx() { return (int)threadIdx.x % 32; }
// Ask L2 to fetch the 128-byte line holding p from HBM: no register written, nothing waits.
GL_DEVICE void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
GL_DEVICE int warpgroup_idx() { return __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0); }

// One lane of the (fully active) warp returns true.
GL_DEVICE bool elect_one() {
  u32 pred;
  asm volatile(
      "{\n .reg .pred P;\n elect.sync _|P, 0xffffffff;\n selp.u32 %0, 1, 0, P;\n}\n"
      : "=r"(pred));
  return pred != 0;
}

// Named barrier: only the `count` threads that use `id` meet here (id 0 is __syncthreads').
GL_DEVICE void named_barrier_sync(u32 id, u32 count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// Register budget hand-over between warpgroups (sm_90a). Needs __launch_bounds__(n, 1)
// on the kernel and one role per branch, else ptxas ignores it (warning C7508).
template <u32 N> GL_DEVICE void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <u32 N> GL_DEVICE void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

GL_DEVICE u64 globaltimer_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
GL_DEVICE u32 smid() {
  u32 r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

// Round a dynamic shared memory pointer up to 1024 bytes (128B-swizzled tiles need it).
GL_DEVICE u8* align_1024(u8* p) {
  const u32 a = smem_u32(p);
  return p + (((a + 1023u) & ~1023u) - a);
}

// Ordinary shared-memory stores (st.shared, stmatrix) become visible to the async proxy
// (TMA, wgmma) only after this fence, executed by each writing thread before the barrier.
GL_DEVICE void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

GL_DEVICE int ceil_div(int a, int b) { return (a + b - 1) / b; }
