// smallm_walks.cuh — which work a CTA of the small-M kernel runs: the deal's runs of units
// (Segments; shared loads: shared_cta) or the multicast pairs' whole tiles (PairWalk). Included by
// smallm_splitk.cu after its configuration (BM, FIXUP, MC, NA, MB), which it reads.
#pragma once

// Shared loads (SHARE_A, SHARE_B): every tile falls into `pieces` pieces (the kernel's `units`
// argument in these builds), piece p covering k-tiles [p K / pieces, (p + 1) K / pieces) (K in
// k-tiles; uneven by at most one), and the deal's CTA t * pieces + p runs piece p of tile t.
// shared_cta: the CTA block b runs. A cluster of NA x MB blocks runs the same piece of MB x NA
// adjacent tiles (rank r = b % (NA * MB): column r % NA and row r / NA of the cluster's tiles;
// then the piece, the group of MB row blocks, the group of NA column blocks), so the CTAs of a
// cluster row read the same A rows, those of a column the same B rows, over the same k-tiles.
// The host deals multiples of MB row and NA column blocks (its mirror: Deal.cta_of_block).
GL_DEVICE int shared_cta(int pieces, int m_tiles) {
  const int b = (int)blockIdx.x, r = b % (NA * MB), g = b / (NA * MB), p = g % pieces, h = g / pieces,
            groups = m_tiles / MB;
  return ((h / groups * NA + r % NA) * m_tiles + h % groups * MB + r / NA) * pieces + p;
}
struct SharedTag {};

// The run of units of this CTA, as segments: tile t (column-major over C: t = column block *
// m_tiles + row block, so the CTAs running at once share B's column tiles, B being the big
// operand), its k-tiles [k0, k1), and the workspace plane of the piece. The run is that of CTA
// `cta` of the deal; when every tile falls into P aligned pieces and no cluster needs them side
// by side, blocks are launched piece-major (block b runs piece b / tiles of tile b % tiles), so
// the CTAs that start together read different tiles, as a grid of (tiles, pieces) does (shared
// loads: the second constructor, shared_cta, whose pieces need not be aligned).
struct Segments {
  int k_tiles, units, total, cta;
  int dp_rounds, round;  // fixup: whole tiles cta, cta + grid, ... first (see below); before u (init order)
  int u, u1;
  GL_DEVICE Segments(int tiles, int kt, int per_cta, bool clustered)
      : k_tiles(kt), units(per_cta), total(tiles * kt),
        cta(!FIXUP && !clustered && kt % per_cta == 0 ? (int)blockIdx.x % tiles * (kt / per_cta) + (int)blockIdx.x / tiles
                                                      : (int)blockIdx.x),
        dp_rounds(FIXUP ? tiles / (int)gridDim.x : 0), round(0),
        u(dp_rounds * (int)gridDim.x * kt + cta * per_cta), u1(min(u + per_cta, total)) {}
  // shared loads: units holds the pieces per tile, cta the tile's piece (above)
  GL_DEVICE Segments(int tiles, int kt, int pieces, int deal_cta, SharedTag)
      : k_tiles(kt), units(pieces), total(tiles * kt), cta(deal_cta), dp_rounds(0), round(0),
        u(cta / pieces * kt + piece_start(cta % pieces, kt, pieces)),
        u1(cta / pieces * kt + piece_start(cta % pieces + 1, kt, pieces)) {}
  // piece p's first k-tile, p K / pieces (64-bit: p K may pass 2^31 on a long K)
  static GL_DEVICE int piece_start(int p, int kt, int pieces) { return (int)((long long)p * kt / pieces); }
  GL_DEVICE bool dp() const { return round < dp_rounds; }
  GL_DEVICE bool more() const { return dp() || u < u1; }
  GL_DEVICE int tile() const { return dp() ? cta + round * (int)gridDim.x : u / k_tiles; }
  GL_DEVICE int k0() const { return dp() ? 0 : u - tile() * k_tiles; }
  GL_DEVICE int k1() const { return dp() ? k_tiles : min(k_tiles, u1 - tile() * k_tiles); }
  GL_DEVICE bool whole() const { return k0() == 0 && k1() == k_tiles; }  // C directly, no plane
  GL_DEVICE int plane() const {  // first CTA of the tile: 0 (shared loads: the piece)
    if constexpr (NA * MB > 1) return cta % units;
    else return cta - tile() * k_tiles / units;
  }
  // fixup: the CTA holding the tile's last piece (the stream-K part starts after the DP tiles)
  GL_DEVICE int last_cta() const {
    return (tile() * k_tiles + k_tiles - 1 - dp_rounds * (int)gridDim.x * k_tiles) / units;
  }
  GL_DEVICE void next() {
    if (dp()) ++round;
    else u = (tile() + 1) * k_tiles;
  }
  GL_DEVICE int m_block(int m_tiles) const { return tile() % m_tiles; }
  GL_DEVICE int n_block(int m_tiles) const { return tile() / m_tiles; }
};

// Multicast (MC CTAs along M per cluster): whole tiles, walked in groups of MC vertically
// adjacent ones (column-major over C, as Segments): cluster g takes groups g, g + clusters, ...,
// its CTA of rank r row block MC * (group's row) + r, so both CTAs of a cluster load the same
// B tile at every step. A row block past C (odd m_tiles) reads zeros and is not stored.
struct PairWalk {
  int k_tiles, m_groups, groups, g, stride;
  u32 rank;
  GL_DEVICE PairWalk(int m_tiles, int n_tiles, int kt)
      : k_tiles(kt), m_groups(ceil_div(m_tiles, MC)), groups(ceil_div(m_tiles, MC) * n_tiles),
        g((int)blockIdx.x / MC), stride((int)gridDim.x / MC), rank(cluster_ctarank()) {}
  GL_DEVICE bool more() const { return g < groups; }
  GL_DEVICE void next() { g += stride; }
  GL_DEVICE int m_block(int) const { return g % m_groups * MC + (int)rank; }
  GL_DEVICE int n_block(int) const { return g / m_groups; }
  GL_DEVICE int tile() const { return g * MC + (int)rank; }  // an id for traces
  GL_DEVICE int k0() const { return 0; }
  GL_DEVICE int k1() const { return k_tiles; }
  GL_DEVICE bool whole() const { return true; }
};

// This CTA's walk: the deal's runs (Segments), or multicast pairs of whole tiles.
GL_DEVICE auto make_walk(int m_tiles, int n_tiles, int k_tiles, int units, bool clustered) {
  if constexpr (MC > 1) return PairWalk(m_tiles, n_tiles, k_tiles);
  else if constexpr (NA * MB > 1) return Segments(m_tiles * n_tiles, k_tiles, units, shared_cta(units, m_tiles),
                                                   SharedTag{});  // units: pieces per tile
  else return Segments(m_tiles * n_tiles, k_tiles, units, clustered);
}
