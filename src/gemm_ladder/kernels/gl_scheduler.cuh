// gl_scheduler.cuh — which output tile a persistent CTA computes next.
// Tiles are visited in groups of GROUP_M tile-rows, column by column inside a group, so
// the CTAs running at the same time share A rows and B columns in L2.
#pragma once
#include "gl_common.cuh"

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
