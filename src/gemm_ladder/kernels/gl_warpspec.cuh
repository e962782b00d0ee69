// gl_warpspec.cuh — the role loops of the warp-specialized steps (7 and up), written once.
// A step fills them in: which tiles a CTA walks, how a stage of operands is loaded, which
// MMAs a k-tile issues, how accumulators are staged. Everything is force-inlined, so
// ptxas sees one straight kernel (a wgmma pipeline crossing a real call is serialized).
#pragma once
#include "gl_cluster.cuh"
#include "gl_epilogue.cuh"
#include "gl_pipeline.cuh"
#include "gl_scheduler.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"

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

// Producer: one stage of operands for the tile at (m0, n0), k-tile kt. A: this CTA's BM
// rows. B: with a cluster, this CTA loads only its BN / CLUSTER_M-row slice and multicasts
// it to the same offset of every CTA (whose full barriers each expect the whole B tile).
// MN-major operands (A_MN, B_MN) travel as 64-wide blocks of BK k-rows.
// Ablation -DGL_ABLATE_NO_MULTICAST=1 (K-major B): each CTA of a cluster loads the whole B tile
// itself, slice by slice, and nothing is multicast; the stages' release stays coupled across the
// cluster. What the multicast itself costs or saves (docs/perf-notes.md, item 65).
#ifndef GL_ABLATE_NO_MULTICAST
#define GL_ABLATE_NO_MULTICAST 0
#endif
template <int BM, int BN, int BK, int CLUSTER_M, bool A_MN = false, bool B_MN = false>
GL_DEVICE void load_stage(u16* A, u16* B, const CUtensorMap* ta, const CUtensorMap* tb, u64* full, int kt,
                          int m0, int n0, int rank) {
  constexpr int MN = 64, SLICE = BN / CLUSTER_M;
  if constexpr (GL_ABLATE_NO_MULTICAST && CLUSTER_M > 1) {
    static_assert(!A_MN && !B_MN, "the ablation loads K-major operands only");
    tma_load_2d(A, ta, full, kt * BK, m0);
#pragma unroll
    for (int r = 0; r < CLUSTER_M; ++r) tma_load_2d(B + r * SLICE * BK, tb, full, kt * BK, n0 + r * SLICE);
    return;
  }
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

// Early loads (GL_EARLY_LOADS, Step.early_loads), without a cluster: the thread that initialises
// the barriers also issues the first min(DEPTH, k_tiles) stages of the CTA's first tile, right
// after the init and its arrive on the CTA barrier, before setmaxnreg and the role split, so the
// first bytes are on their way while the CTA sets up (a first copy may wait for its map's
// descriptor: the other threads need not wait for that). producer_loop(..., early) then starts
// past them. In a cluster the peer's barriers may not exist yet, so B could not be multicast
// there; loading all of B locally, or only A early, measured slower (docs/perf-notes.md, item 74).
// A traced build issues every load from the producer, whose recorder logs each issue when it
// happens (early stages would be logged only when the producer passes them, after the set-up).
#ifndef GL_EARLY_LOADS
#define GL_EARLY_LOADS 0
#endif
template <int DEPTH, bool STREAM_K = false, int CLUSTER_M>
GL_DEVICE int early_k_tiles(const TileWalk<CLUSTER_M>& tiles, int k_tiles) {
  static_assert(!GL_EARLY_LOADS || (CLUSTER_M == 1 && !STREAM_K), "early loads: no cluster, no stream-K (Step.early_loads)");
  return GL_EARLY_LOADS && !GL_TRACE && tiles.valid(tiles.first()) ? min(DEPTH, k_tiles) : 0;
}
template <int BM, int BN, int BK, int CLUSTER_M, bool A_MN = false, bool B_MN = false>
GL_DEVICE void early_loads(int count, u16* A, u16* B, u32 a_stage_elems, u32 b_stage_elems, u64* full,
                           u32 bytes, const CUtensorMap* ta, const CUtensorMap* tb, const TileWalk<CLUSTER_M>& tiles) {
  const auto t = tiles.at(tiles.first(), BM, BN);
  for (int kt = 0; kt < count; ++kt) {  // k-tile kt of the first tile: stage kt, phase 0
    mbar_arrive_expect_tx(&full[kt], GL_EXPECT_TX(bytes));
    load_stage<BM, BN, BK, CLUSTER_M, A_MN, B_MN>(A + kt * a_stage_elems, B + kt * b_stage_elems, ta, tb, &full[kt],
                                                  kt, t.m0, t.n0, tiles.rank);
  }
}

// A CTA's work as segments: tile `ct` of the tile order, its k-tiles [k0, k1).
// Without stream-K every segment is a whole tile: the cluster's tiles first(), first() +
// stride(), ... With STREAM_K (no cluster), the last `sk_tiles` tiles of the order are not
// dealt whole: their (tile, k-tile) units, tile-major, go in balanced contiguous runs to the
// first `sk_ctas` CTAs (StreamKRun), after the whole tiles b, b + G, ... (the host makes the
// whole tiles a multiple of the grid G, so every CTA has the same rounds). Step 9 takes
// sk_ctas = P x sk_tiles: each split tile is P pieces of equal k-ranges, one per CTA, at the
// same k offsets in every tile, so the CTAs running the split tiles read only P different k
// offsets at a time (L2 keeps serving them, as in the whole rounds).
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

// Producer: the whole operand stream of this CTA — for each segment of its work and each of
// its k-tiles, wait until the stage is free (in every CTA of the cluster), announce the
// `bytes` that will land in this CTA's buffer, and issue load(stage, full barrier, kt, tile).
template <bool STREAM_K = false, int DEPTH, int CLUSTER, int CLUSTER_M, class Load>
GL_DEVICE void producer_loop(const Ring<DEPTH, CLUSTER>& ops, const TileWalk<CLUSTER_M>& tiles, int bm, int bn,
                             int k_tiles, u32 bytes, Load load, int sk_tiles = 0, int sk_ctas = 1, int skip = 0) {
  auto st = PipelineState<DEPTH>::producer();
  for_each_segment<STREAM_K>(tiles, k_tiles, sk_tiles, sk_ctas, [&](int ct, int k0, int k1) {
    const auto t = tiles.at(ct, bm, bn);
    for (int kt = k0; kt < k1; ++kt) {
      if (skip > 0) {  // issued by early_loads (a traced build has none)
        --skip;
        st.advance();
        continue;
      }
      ops.producer_acquire(st, kt);
      mbar_arrive_expect_tx(ops.full_bar(st), GL_EXPECT_TX(bytes));
      load(st.stage, ops.full_bar(st), kt, t);
      ops.tr.event(EV_LOAD_ISSUE, ops.full_name, st.stage, st.phase, kt, t.id);
      st.advance();
    }
  });
}

// Consumer: the k-loop of one tile. For each k-tile: wait until its stage has landed, issue
// its MMAs (issue(stage)) as one wgmma group, and keep LAG groups in flight (wait_group LAG)
// while the oldest retires, then hand that one's stage back. LAG 1: the previous k-tile's
// stage goes back as the next is issued; LAG 2 holds one more stage, so the tensor core has
// two groups queued behind the one it runs. Returns the state of the oldest stage still held
// (the last min(LAG, k_tiles) k-tiles', still in flight): mma_drain() retires and releases
// them (ping-pong consumers do something in between).
template <int LAG = 1, int DEPTH, int CLUSTER, class Issue>
GL_DEVICE PipelineState<DEPTH> mma_mainloop(const Ring<DEPTH, CLUSTER>& ops, PipelineState<DEPTH>& st,
                                            int k_tiles, int tile, bool warp_leader, Issue issue) {
  static_assert(LAG >= 1 && LAG < DEPTH, "the stages held in flight must leave the producer one to fill");
  PipelineState<DEPTH> oldest = st;
  for (int kt = 0; kt < k_tiles; ++kt) {
    ops.consumer_wait(st, kt);
    wgmma_fence();
    issue(st.stage);
    wgmma_commit();
    ops.tr.event(EV_MMA_ISSUE, 0, st.stage, st.phase, kt, tile);
    wgmma_wait<LAG>();  // k-tile kt-LAG has retired: its stage goes back to the producer(s)
    if (kt >= LAG) {
      ops.tr.event(EV_MMA_DONE, 0, oldest.stage, oldest.phase, kt - LAG, tile);
      if (warp_leader) ops.consumer_release(oldest, kt - LAG);
      oldest.advance();
    }
    st.advance();
  }
  return oldest;
}
template <int LAG = 1, int DEPTH, int CLUSTER>
GL_DEVICE void mma_drain(const Ring<DEPTH, CLUSTER>& ops, const PipelineState<DEPTH>& oldest, int k_tiles, int tile,
                         bool warp_leader) {
  wgmma_wait<0>();
  if constexpr (LAG == 1) {  // the last k-tile's stage (k_tiles >= 1); no loop: registers are tight here
    ops.tr.event(EV_MMA_DONE, 0, oldest.stage, oldest.phase, k_tiles - 1, tile);
    if (warp_leader) ops.consumer_release(oldest, k_tiles - 1);
  } else {
    auto held = oldest;
    for (int kt = k_tiles > LAG ? k_tiles - LAG : 0; kt < k_tiles; ++kt) {
      ops.tr.event(EV_MMA_DONE, 0, held.stage, held.phase, kt, tile);
      if (warp_leader) ops.consumer_release(held, kt);
      held.advance();
    }
  }
}

// Consumer: the epilogue ring's producer side. Wait until the staging buffer is free, write
// the accumulators into it (stage()), fence them for the copy engine, meet on this
// warpgroup's named barrier (a __syncthreads would wait for roles that never come), and let
// one thread commit the buffer to the writeback.
template <int D, class Stage>
GL_DEVICE void stage_and_commit(const Ring<D>& epi, const PipelineState<D>& st, u32 named_barrier, bool leader,
                                u32 k, int tile, Stage stage) {
  epi.producer_acquire(st, k);
  epi.tr.event(EV_EPI_BEGIN, 0, st.stage, st.phase, k, tile);
  stage();
  fence_proxy_async_smem();  // each writer, before the hand-over
  named_barrier_sync(named_barrier, 128);
  epi.tr.event(EV_EPI_END, 0, st.stage, st.phase, k, tile);
  if (leader) epi.producer_commit(st, k);
}

// Consumer: a chunk staged outside the epilogue ring, in the operand stage that the tile's
// last k-tile drained (Step.borrow_stage). No slot to acquire: nothing writes that stage
// until the writeback hands it back to the producer(s). Stage, fence, meet, and one thread
// of each consumer warpgroup arrives on `staged` (its count: the consumer warpgroups). The
// arriving side keeps no phase (a register the consumers do not have): its events record 0.
template <class Stage>
GL_DEVICE void stage_and_signal(u64* staged, Tracer& tr, u32 named_barrier, bool leader, u32 slot, u32 k, int tile,
                                Stage stage) {
  tr.event(EV_EPI_BEGIN, BAR_LENT_FULL, slot, 0, k, tile);
  stage();
  fence_proxy_async_smem();
  named_barrier_sync(named_barrier, 128);
  tr.event(EV_EPI_END, BAR_LENT_FULL, slot, 0, k, tile);
  if (leader) mbar_arrive(staged);
}

// Writeback: the borrowed-stage counterpart of store_staged, without the wait for the copy
// engine's reads (the caller waits once, before it hands the whole stage back).
template <int ROWS, int COLS>
GL_DEVICE void store_signalled(u64* staged, Tracer& tr, u32 slot, u32 phase, const CUtensorMap* map,
                               const u16* staging, int x, int y, u32 k, int tile) {
  tr.event(EV_WAIT_BEGIN, BAR_LENT_FULL, slot, phase, k, tile);
  mbar_wait(staged, phase, tr.role, BAR_LENT_FULL, slot);
  tr.event(EV_WAIT_END, BAR_LENT_FULL, slot, phase, k, tile);
  tma_store_tile<ROWS, COLS>(map, staging, x, y);
  tma_store_commit();
  tr.event(EV_STORE_ISSUE, BAR_LENT_FULL, slot, phase, k, tile);
}

// Writeback: wait until the consumers have staged a ROWS x COLS box, store it at (x, y)
// with TMA (64-column chunks), and free the buffer once the copy engine has read it.
template <int ROWS, int COLS, int D>
GL_DEVICE void store_staged(const Ring<D>& epi, const PipelineState<D>& st, const CUtensorMap* map,
                            const u16* staging, int x, int y, u32 k, int tile) {
  epi.consumer_wait(st, k);
  tma_store_tile<ROWS, COLS>(map, staging, x, y);
  tma_store_commit();
  epi.tr.event(EV_STORE_ISSUE, 0, st.stage, st.phase, k, tile);
  tma_store_wait_read<0>();
  epi.tr.event(EV_STORE_DONE, 0, st.stage, st.phase, k, tile);
  epi.consumer_release(st, k);
}
