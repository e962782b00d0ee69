// fp8_split.cuh — the fp8 kernel's work list and its split-K reduction.
//
// A CTA walks units: with SPLITS = 1 a unit is a whole output tile (k-tiles [0, k_tiles)); with
// SPLITS > 1 (small M: too few tiles to fill the GPU) unit u is split u % SPLITS of tile
// u / SPLITS, a contiguous run of k-tiles. The splits' fp32 partial sums are summed in order
// (deterministic), scaled, biased and written to C (finish_quad) in one of two ways:
//   GL_FP8_SPLIT 1: each split's partial goes to plane `split` of a (SPLITS, M, N) workspace (a
//     3-D tensor map clips each plane at M rows), and a second launch, fp8_splitk_reduce, sums
//     the planes;
//   GL_FP8_SPLIT 2: a tile's splits are one cluster (one unit per CTA), and the partials are
//     summed on chip through distributed shared memory (gl_cluster_reduce.cuh): no workspace,
//     no second launch.
#pragma once
#include "gl_scheduler.cuh"
#include "fp8_scales.cuh"
#include "gl_partials.cuh"

template <int CLUSTER_M>
struct Fp8Work {
  const TileWalk<CLUSTER_M>& tiles;
  int k_tiles, splits;
  struct Unit {
    int ct, split, k0, k1;
  };
  GL_DEVICE int units() const { return tiles.sched.num_tiles() * splits; }
  GL_DEVICE Unit unit(int u) const {
    const int per = ceil_div(k_tiles, splits), sp = u % splits;
    return {u / splits, sp, min(k_tiles, sp * per), min(k_tiles, (sp + 1) * per)};
  }
  // producer_loop's work list: body(tile, k0, k1) for each of this CTA's units
  template <class Body>
  GL_DEVICE void operator()(Body body) const {
    for (int u = tiles.first(); u < units(); u += tiles.stride()) {
      const Unit w = unit(u);
      body(w.ct, w.k0, w.k1);
    }
  }
};

// 4 finished columns (col .. col + 3) of row `row` of C: the splits' sum, scaled (per tensor or
// row-wise; block scales were applied while promoting), plus bias, in the output type.
template <int SCALE, bool BIAS, int OUT>
GL_DEVICE void finish_quad(float4 sum, void* __restrict__ c, int N, int row, int col, const float* __restrict__ sa,
                           const float* __restrict__ sb, const void* __restrict__ bias) {
  const long long at = (long long)row * N + col;
  float v[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if constexpr (SCALE == FP8_SCALE_TENSOR) v[e] *= __ldg(sa) * __ldg(sb);
    if constexpr (SCALE == FP8_SCALE_ROW) v[e] *= __ldg(sa + row) * __ldg(sb + col + e);
    if constexpr (BIAS && OUT == FP8_OUT_F32) v[e] += __ldg(static_cast<const float*>(bias) + col + e);
    if constexpr (BIAS && OUT != FP8_OUT_F32) v[e] += to_float(__ldg(static_cast<const unsigned short*>(bias) + col + e));
  }
  if constexpr (OUT == FP8_OUT_F32) {
    *reinterpret_cast<float4*>(static_cast<float*>(c) + at) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *reinterpret_cast<uint2*>(static_cast<u16*>(c) + at) = make_uint2(pack2(v[0], v[1]), pack2(v[2], v[3]));
  }
}

// The second launch (GL_FP8_SPLIT 1): C = the planes summed in order, finished. One thread per
// 4 columns of a row; the planes' loads in batches of FP8_REDUCE_BATCH, all issued before the
// batch's first add (gl_partials.cuh; as a plain loop ptxas kept two loads in flight).
constexpr int FP8_REDUCE_BATCH = GL_FP8_REDUCE_BATCH;  // fp8.REDUCE_BATCH
template <int SCALE, bool BIAS, int OUT>
GL_DEVICE void splitk_reduce(const float* __restrict__ ws, void* __restrict__ c, int M, int N, int splits,
                             const float* __restrict__ sa, const float* __restrict__ sb,
                             const void* __restrict__ bias) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x, quads = (long long)M * (N / 4);
  if (i >= quads) return;
  const int row = (int)(i / (N / 4)), col = (int)(i % (N / 4)) * 4;
  const long long plane = (long long)M * N, at = (long long)row * N + col;
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
  add_planes<FP8_REDUCE_BATCH>(sum, reinterpret_cast<const float4*>(ws + at), plane / 4, 0, splits);
  finish_quad<SCALE, BIAS, OUT>(sum, c, N, row, col, sa, sb, bias);
}
