// gemm_scheduler.cuh — the production kernel's tile scheduler: whole tiles, then stream-K.
//
// A CTA's work as segments: tile `ct` of the tile order, its k-tiles [k0, k1). Without
// stream-K every segment is a whole tile: the cluster's tiles first(), first() + stride(), ...
// (the ladder's WholeTiles). With STREAM_K (no cluster), the last `sk_tiles` tiles of the order
// are not dealt whole: their (tile, k-tile) units, tile-major, go in balanced contiguous runs
// to the first `sk_ctas` CTAs (StreamKRun), after the whole tiles b, b + G, ... (the host makes
// the whole tiles a multiple of the grid G, so every CTA has the same rounds). The kernel takes
// sk_ctas = P x sk_tiles: each split tile is P pieces of equal k-ranges, one per CTA, at the
// same k offsets in every tile, so the CTAs running the split tiles read only P different k
// offsets at a time (L2 keeps serving them, as in the whole rounds).
#pragma once
#include "gl_scheduler.cuh"

struct StreamKRun {
  // where the split tiles begin in the order, their units (< 2^31: the host checks), the CTAs sharing them
  int dp_end, k_tiles, units, ctas;
  GL_DEVICE StreamKRun(int tiles, int kt, int sk_tiles, int sk_ctas)
      : dp_end(tiles - sk_tiles), k_tiles(kt), units(sk_tiles * kt), ctas(sk_ctas) {}
  // The first unit of CTA q's run [start(q), start(q + 1)): never empty for q < ctas (the host
  // deals at least as many units as CTAs), empty from q = ctas on.
  GL_DEVICE int start(int q) const { return (int)((long long)units * min(q, ctas) / ctas); }
};

// Calls body(ct, k0, k1) for each segment of this CTA's work, in order: the whole tiles, then
// (STREAM_K) its run. One loop over a small state (the consumer's registers are nearly all
// accumulators): the segment, and the run's end.
template <bool STREAM_K = false, int CLUSTER_M, class Body>
GL_DEVICE void for_each_segment(const TileWalk<CLUSTER_M>& tiles, int k_tiles, int sk_tiles, int sk_ctas, Body body) {
  static_assert(!STREAM_K || CLUSTER_M == 1, "stream-K: CTAs of a cluster would walk different k ranges");
  if (!STREAM_K) {
    for (int ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) body(ct, 0, k_tiles);
    return;
  }
  const int num = tiles.sched.num_tiles(), dp_end = num - sk_tiles;
  const StreamKRun run(num, k_tiles, sk_tiles, sk_ctas);
  const int u0 = run.start(tiles.cluster_id), u1 = run.start(tiles.cluster_id + 1);  // this CTA's run
  int ct = tiles.first(), k0 = 0, k1 = k_tiles;
  auto enter_run = [&](int u) {  // the segment starting at unit u of the run, or done
    const int s = u / k_tiles;
    ct = u < u1 ? dp_end + s : num;
    k0 = u - s * k_tiles;
    k1 = min(k_tiles, u1 - s * k_tiles);
  };
  if (ct >= dp_end) enter_run(u0);
  while (ct < num) {
    body(ct, k0, k1);
    if (ct < dp_end && ct + tiles.stride() < dp_end) {
      ct += tiles.stride();
    } else {
      enter_run(ct < dp_end ? u0 : (ct - dp_end + 1) * k_tiles);
    }
  }
}

// The segments as a work list for the role loops (gl_warpspec.cuh).
template <bool STREAM_K, int CLUSTER_M>
struct Segments {
  const TileWalk<CLUSTER_M>& tiles;
  int k_tiles, sk_tiles, sk_ctas;
  template <class Body>
  GL_DEVICE void operator()(Body body) const { for_each_segment<STREAM_K>(tiles, k_tiles, sk_tiles, sk_ctas, body); }
};
