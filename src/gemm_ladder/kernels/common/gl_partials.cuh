// gl_partials.cuh — reading fp32 partial sums (split-K's workspace planes) in batches, written
// once for every second pass (the small-M family's, fp8's).
// A plain loop over planes lets ptxas issue each plane's load after the previous add (one trip
// to memory per plane, or two in flight at best); in C it still placed adds between the loads.
// So the loads and adds are PTX, and a pass issues a whole batch of loads before its first add
// (perf-notes items 113, 117). A plane past the last loads nothing and yields -0.0, the sum's
// identity: x + -0.0 == x for every x (-0.0 and NaN included), so batches of any size give the
// same bits as the plane-after-plane sum in the same order.
#pragma once
#include "gl_common.cuh"

// 2 fp32 at p if `live`, else -0.0: non-coherent, the partials are read-only in this grid.
GL_DEVICE float2 load_partial_or_identity(const float2* p, bool live) {
  float2 v;
  asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %3, 0;\n mov.b32 %0, 0x80000000;\n mov.b32 %1, 0x80000000;\n"
               " @q ld.global.nc.v2.f32 {%0, %1}, [%2];\n}" : "=f"(v.x), "=f"(v.y) : "l"(p), "r"((int)live));
  return v;
}
// 4 fp32 at p if `live`, else -0.0 (as above).
GL_DEVICE float4 load_partial_or_identity(const float4* p, bool live) {
  float4 v;
  asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %5, 0;\n mov.b32 %0, 0x80000000;\n mov.b32 %1, 0x80000000;\n"
               " mov.b32 %2, 0x80000000;\n mov.b32 %3, 0x80000000;\n"
               " @q ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n}"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "r"((int)live));
  return v;
}
// sum + v in fp32, round to nearest, denormals flushed: what `+` compiles to under --use_fast_math.
GL_DEVICE float add_ftz(float sum, float v) {
  float r;
  asm volatile("add.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(sum), "f"(v));
  return r;
}
GL_DEVICE void add_ftz(float2& sum, float2 v) { sum.x = add_ftz(sum.x, v.x), sum.y = add_ftz(sum.y, v.y); }
GL_DEVICE void add_ftz(float4& sum, float4 v) {
  sum.x = add_ftz(sum.x, v.x), sum.y = add_ftz(sum.y, v.y), sum.z = add_ftz(sum.z, v.z), sum.w = add_ftz(sum.w, v.w);
}

// sum += planes[first], ..., planes[last - 1] in that order (planes `stride` vectors apart), BATCH
// loads issued before each batch's first add.
template <int BATCH, class V>
GL_DEVICE void add_planes(V& sum, const V* p, long long stride, int first, int last) {
#pragma unroll 1
  for (int z = first; z < last; z += BATCH) {
    V v[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; ++i) v[i] = load_partial_or_identity(p + (z + i) * stride, z + i < last);
#pragma unroll
    for (int i = 0; i < BATCH; ++i) add_ftz(sum, v[i]);
  }
}
