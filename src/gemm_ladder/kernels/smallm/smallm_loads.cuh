// smallm_loads.cuh — how the small-M kernel's producer fills a stage. Included by smallm_splitk.cu
// after its configuration (BM, BN, KB, K_BLOCKS, MC, NA, MB, B_MN, MN_BLOCK) and SharedStorage, which it reads.
//
// A k-tile is BK wide (64, or 128 with the entry's bk): K_BLOCKS blocks of KB = 64 k-columns.
// Block j is the 64-wide k-tile kt * K_BLOCKS + j, laid out as a 64-wide k-tile's whole stage
// (A's BM x KB, then the next block's; B's likewise) and loaded with the same 64-wide boxes
// (128-byte rows, the widest swizzled box): the tensor maps, and the wgmma descriptors within a
// block, are a 64-wide k-tile's. A 128-wide k-tile changes only how many blocks one stage, one
// full barrier and one release cover.
#pragma once

// Shared loads (NA x MB > 1): cluster rank r is column block r % NA, row block r / NA of the
// cluster's tiles. This CTA loads its slice of A (BM / NA rows) into the CTAs of its row and its
// slice of B (BN / MB rows, or 64-column blocks of an N-major B) into those of its column; an
// operand that is not shared it loads whole, for itself.
GL_DEVICE void load_shared_stage(SharedStorage& s, int stage, const CUtensorMap* ta, const CUtensorMap* tb, u64* full,
                                 int kt, int m0, int n0) {
  const u32 r = cluster_ctarank(), rn = r % NA, rm = r / NA;
#pragma unroll
  for (int blk = 0; blk < K_BLOCKS; ++blk) {
    const int kb = kt * K_BLOCKS + blk;  // the 64-wide k-tile
    if constexpr (NA > 1) {
      constexpr int SLICE = BM / NA;
      tma_load_2d_multicast(s.A[stage] + (blk * BM + rn * SLICE) * KB, ta, full, kb * KB, m0 + (int)rn * SLICE,
                            (u16)(((1u << NA) - 1) << (rm * NA)));
    } else {
      tma_load_2d(s.A[stage] + blk * BM * KB, ta, full, kb * KB, m0);
    }
    if constexpr (MB > 1) {
      constexpr int SLICE = BN / MB;
      u16 column = 0;
#pragma unroll
      for (int i = 0; i < MB; ++i) column |= (u16)(1u << (i * NA + rn));
#pragma unroll
      for (int j = 0; j < (B_MN ? SLICE / MN_BLOCK : 1); ++j) {
        const int n = n0 + (int)rm * SLICE + j * MN_BLOCK;
        tma_load_2d_multicast(s.B[stage] + (blk * BN + rm * SLICE + j * MN_BLOCK) * KB, tb, full, B_MN ? n : kb * KB,
                              B_MN ? kb * KB : n, column);
      }
    } else {
      load_b_only<BN, KB, B_MN>(s.B[stage] + blk * BN * KB, tb, full, kb, n0);
    }
  }
}

// k-tile kt's operands into a stage (a, b: its A and B), block by block; multicast pairs: B's
// half from this CTA (`rank`).
GL_DEVICE void load_ktile(u16* a, u16* b, const CUtensorMap* ta, const CUtensorMap* tb, u64* full, int kt, int m0,
                          int n0, int rank) {
#pragma unroll
  for (int j = 0; j < K_BLOCKS; ++j)
    load_operands<BM, BN, KB, MC, false, B_MN>(a + j * BM * KB, b + j * BN * KB, ta, tb, full, kt * K_BLOCKS + j, m0,
                                               n0, rank);
}

// B_EARLY's two halves of a stage: B before the previous grid's end, A after it.
GL_DEVICE void load_ktile_b(u16* b, const CUtensorMap* tb, u64* full, int kt, int n0) {
#pragma unroll
  for (int j = 0; j < K_BLOCKS; ++j) load_b_only<BN, KB, B_MN>(b + j * BN * KB, tb, full, kt * K_BLOCKS + j, n0);
}
GL_DEVICE void load_ktile_a(u16* a, const CUtensorMap* ta, u64* full, int kt, int m0) {
#pragma unroll
  for (int j = 0; j < K_BLOCKS; ++j) tma_load_2d(a + j * BM * KB, ta, full, (kt * K_BLOCKS + j) * KB, m0);
}

// k-tile kt's B boxes into L2 only (PREFETCH_KT).
GL_DEVICE void prefetch_ktile_b(const CUtensorMap* tb, int kt, int n0, int rank) {
#pragma unroll
  for (int j = 0; j < K_BLOCKS; ++j) prefetch_b_l2<BN, KB, MC, B_MN>(tb, kt * K_BLOCKS + j, n0, rank);
}
