// gl_scheduler.cuh — which output tile a persistent CTA computes next.
// Tiles are visited in groups of GROUP_M tile-rows, column by column inside a group, so
// the CTAs running at the same time share A rows and B columns in L2.
#pragma once
#include "gl_cluster.cuh"

struct TileScheduler {
  int tiles_m, tiles_n, group_m;
  GL_DEVICE TileScheduler(int M, int N, int bm, int bn, int group)
      : tiles_m(ceil_div(M, bm)), tiles_n(ceil_div(N, bn)), group_m(group) {}
  GL_DEVICE int num_tiles() const { return tiles_m * tiles_n; }
  // Tile index -> (tile row, tile column).
  GL_DEVICE void coords(int tile, int& tm, int& tn) const {
    const int per_group = group_m * tiles_n;
    const int first_m = (tile / per_group) * group_m;
    const int rows = min(tiles_m - first_m, group_m);
    const int in_group = tile % per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
  }
};

// A CTA's walk over output tiles when CLUSTER_M CTAs along M form a cluster: cluster tile
// ct covers tile rows CLUSTER_M*cm .. CLUSTER_M*cm + CLUSTER_M - 1 of tile column tn, and
// this CTA takes row CLUSTER_M*cm + rank. Both CTAs of a cluster walk the same sequence, so
// their barrier schedules match; when the tile rows are odd, the last pair's second CTA
// gets a tile below C (TMA zero-fills its loads and clips its stores).
template <int CLUSTER_M>
struct TileWalk {
  TileScheduler sched;
  int rank, cluster_id, clusters;
  struct Tile {
    int id;  // unique output-tile id (traces)
    int m0, n0;
  };
  GL_DEVICE TileWalk(int M, int N, int bm, int bn, int group_m)
      : sched(M, N, bm * CLUSTER_M, bn, max(1, group_m / CLUSTER_M)),
        rank(CLUSTER_M == 1 ? 0 : (int)cluster_ctarank()),
        cluster_id(blockIdx.x / CLUSTER_M),
        clusters(gridDim.x / CLUSTER_M) {}
  // The nth of this cluster's tiles, and the distance to the next one when taking every
  // `every`-th (ping-pong consumers take every other tile).
  GL_DEVICE int first(int nth = 0) const { return cluster_id + nth * clusters; }
  GL_DEVICE int stride(int every = 1) const { return every * clusters; }
  GL_DEVICE bool valid(int ct) const { return ct < sched.num_tiles(); }
  GL_DEVICE Tile at(int ct, int bm, int bn) const {
    int cm, tn;
    sched.coords(ct, cm, tn);
    return Tile{ct * CLUSTER_M + rank, (cm * CLUSTER_M + rank) * bm, tn * bn};
  }
};

// The ladder's work list: every `every`-th of the cluster's tiles from the nth, each whole
// (k-tiles [0, k_tiles)). A role loop calls it with body(tile, k0, k1); the production
// kernel swaps in its stream-K segments (gemm/gemm_scheduler.cuh).
template <int CLUSTER_M>
struct WholeTiles {
  const TileWalk<CLUSTER_M>& tiles;
  int k_tiles, nth = 0, every = 1;
  template <class Body>
  GL_DEVICE void operator()(Body body) const {
    for (int ct = tiles.first(nth); tiles.valid(ct); ct += tiles.stride(every)) body(ct, 0, k_tiles);
  }
};
