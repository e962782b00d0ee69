// gemm_mainloop.cuh — what the production mainloop adds to the ladder's role loops
// (gl_warpspec.cuh): operands read in either major order, and early loads.
#pragma once
#include "gl_warpspec.cuh"

// Producer: one stage of operands, either of which may be MN-major (A_MN: A stored as a
// row-major (K, M) matrix; B_MN: B as a row-major (K, N) matrix). MN-major operands travel as
// 64-wide blocks of BK k-rows (128-byte rows, the widest swizzled box); wgmma reads them
// through its transpose bits, so no operand is ever copied. With a cluster, B's slice of this
// CTA is multicast as in the ladder. K-major operands: the ladder's load_stage.
template <int BM, int BN, int BK, int CLUSTER_M, bool A_MN = false, bool B_MN = false>
GL_DEVICE void load_operands(u16* A, u16* B, const CUtensorMap* ta, const CUtensorMap* tb, u64* full, int kt,
                             int m0, int n0, int rank) {
  if constexpr (!A_MN && !B_MN) {
    load_stage<BM, BN, BK, CLUSTER_M>(A, B, ta, tb, full, kt, m0, n0, rank);
  } else {
    static_assert(!GL_ABLATE_NO_MULTICAST, "the measurement loads K-major operands only");
    constexpr int MN = 64, SLICE = BN / CLUSTER_M;
    if (A_MN) {
#pragma unroll
      for (int j = 0; j < BM / MN; ++j) tma_load_2d(A + j * MN * BK, ta, full, m0 + j * MN, kt * BK);
    } else {
      tma_load_2d(A, ta, full, kt * BK, m0);
    }
    u16* slice = B + rank * SLICE * BK;  // either layout: the slice's bytes of the stage
    const int n = n0 + rank * SLICE;
#pragma unroll
    for (int j = 0; j < (B_MN ? (SLICE + MN - 1) / MN : 1); ++j) {  // a narrower last block: loaded whole
      u16* dst = slice + j * MN * BK;
      const int x = B_MN ? n + j * MN : kt * BK, y = B_MN ? kt * BK : n;
      if (CLUSTER_M == 1)
        tma_load_2d(dst, tb, full, x, y);
      else
        tma_load_2d_multicast(dst, tb, full, x, y, (u16)((1u << CLUSTER_M) - 1));
    }
  }
}

// The B boxes load_operands would fetch for k-tile kt (this CTA's slice under a cluster),
// brought into L2 only (tma_prefetch_l2_2d): a kernel that waits for the previous grid
// before its first load starts its weights' stream from HBM during that wait.
template <int BN, int BK, int CLUSTER_M, bool B_MN = false>
GL_DEVICE void prefetch_b_l2(const CUtensorMap* tb, int kt, int n0, int rank) {
  constexpr int MN = 64, SLICE = BN / CLUSTER_M;
  const int n = n0 + rank * SLICE;
#pragma unroll
  for (int j = 0; j < (B_MN ? (SLICE + MN - 1) / MN : 1); ++j)
    tma_prefetch_l2_2d(tb, B_MN ? n + j * MN : kt * BK, B_MN ? kt * BK : n);
}

// B's boxes of k-tile kt alone, without a cluster: a producer that issues a stage's B before
// its A (the small-M family's B_EARLY: the weights of a chain's next GEMM on their way while
// the previous grid still runs, its A only after griddepcontrol.wait). The boxes are
// load_operands' own.
template <int BN, int BK, bool B_MN = false>
GL_DEVICE void load_b_only(u16* B, const CUtensorMap* tb, u64* full, int kt, int n0) {
  constexpr int MN = 64;
#pragma unroll
  for (int j = 0; j < (B_MN ? (BN + MN - 1) / MN : 1); ++j)
    tma_load_2d(B + j * MN * BK, tb, full, B_MN ? n0 + j * MN : kt * BK, B_MN ? kt * BK : n0);
}

// Early loads (GL_EARLY_LOADS, the family's early_loads), without a cluster: the thread that
// initialises the barriers also issues the first min(DEPTH, k_tiles) stages of the CTA's first
// tile, right after the init and its arrive on the CTA barrier, before setmaxnreg and the role
// split, so the first bytes are on their way while the CTA sets up (a first copy may wait for
// its map's descriptor: the other threads need not wait for that). producer_loop(..., early)
// then starts past them. In a cluster the peer's barriers may not exist yet, so B could not be
// multicast there; loading all of B locally, or only A early, measured slower (docs/perf-notes.md,
// item 74). A traced build issues every load from the producer, whose recorder logs each issue
// when it happens (early stages would be logged only when the producer passes them).
template <int DEPTH, bool STREAM_K = false, int CLUSTER_M>
GL_DEVICE int early_k_tiles(const TileWalk<CLUSTER_M>& tiles, int k_tiles) {
  static_assert(!GL_EARLY_LOADS || (CLUSTER_M == 1 && !STREAM_K), "early loads: no cluster, no stream-K");
  return GL_EARLY_LOADS && !GL_TRACE && tiles.valid(tiles.first()) ? min(DEPTH, k_tiles) : 0;
}
// The first `count` stages of the first tile, stage kt for k-tile kt of a fresh ring.
template <class Pipe, int BM, int BN, int BK, int CLUSTER_M, bool A_MN = false, bool B_MN = false>
GL_DEVICE void early_loads(int count, const typename Pipe::Port& ops, u16* A, u16* B, u32 a_stage_elems,
                           u32 b_stage_elems, const CUtensorMap* ta, const CUtensorMap* tb,
                           const TileWalk<CLUSTER_M>& tiles) {
  const auto t = tiles.at(tiles.first(), BM, BN);
  for (int kt = 0; kt < count; ++kt) {
    auto st = Pipe::State::producer();
    st.stage = kt;
    ops.producer_acquire_fresh(st);
    load_operands<BM, BN, BK, CLUSTER_M, A_MN, B_MN>(A + kt * a_stage_elems, B + kt * b_stage_elems, ta, tb,
                                                     ops.producer_barrier(st), kt, t.m0, t.n0, tiles.rank);
  }
}
