// gl_warpspec.cuh — the role loops of the warp-specialized kernels (ladder steps 7 and up, and
// the library's families), written once. A kernel fills them in: which work a CTA walks (a
// scheduler: WholeTiles, or the production kernel's stream-K segments), how a stage of
// operands is loaded, which MMAs a k-tile issues, how accumulators are staged. Everything is
// force-inlined, so ptxas sees one straight kernel (a wgmma pipeline crossing a real call is
// serialized).
#pragma once
#include "gl_cluster.cuh"
#include "gl_epilogue.cuh"
#include "gl_pipeline.cuh"
#include "gl_scheduler.cuh"
#include "gl_tma.cuh"
#include "gl_wgmma.cuh"

// Producer: one stage of K-major operands for the tile at (m0, n0), k-tile kt. A: this CTA's
// BM rows. B: with a cluster, this CTA loads only its BN / CLUSTER_M-row slice and multicasts
// it to the same offset of every CTA (whose full barriers each expect the whole B tile).
// T: the element (u16 for fp16/bf16, u8 for fp8); BK counts elements.
template <int BM, int BN, int BK, int CLUSTER_M, class T = u16>
GL_DEVICE void load_stage(T* A, T* B, const CUtensorMap* ta, const CUtensorMap* tb, u64* full, int kt,
                          int m0, int n0, int rank) {
  constexpr int SLICE = BN / CLUSTER_M;
  tma_load_2d(A, ta, full, kt * BK, m0);
  if constexpr (GL_ABLATE_NO_MULTICAST && CLUSTER_M > 1) {  // the measurement: every CTA loads all of B
#pragma unroll
    for (int r = 0; r < CLUSTER_M; ++r) tma_load_2d(B + r * SLICE * BK, tb, full, kt * BK, n0 + r * SLICE);
  } else if (CLUSTER_M == 1) {
    tma_load_2d(B, tb, full, kt * BK, n0);
  } else {
    tma_load_2d_multicast(B + rank * SLICE * BK, tb, full, kt * BK, n0 + rank * SLICE, (u16)((1u << CLUSTER_M) - 1));
  }
}

// Producer: the whole operand stream of this CTA. For each piece of its work (work(body) calls
// body(tile, k0, k1)) and each of its k-tiles: acquire the stage (free in every CTA of the
// cluster; its bytes announced) and issue load(stage, full barrier, kt, tile). `skip`: stages
// already issued before the role split (the production kernel's early loads).
template <class Pipe, class Work, class Tiles, class Load>
GL_DEVICE void producer_loop(const typename Pipe::Port& ops, Work work, const Tiles& tiles, int bm, int bn, Load load,
                             int skip = 0) {
  auto st = Pipe::State::producer();
  work([&](int ct, int k0, int k1) {
    const auto t = tiles.at(ct, bm, bn);
    for (int kt = k0; kt < k1; ++kt) {
      if (skip > 0) {
        --skip;
        st.advance();
        continue;
      }
      KTileStamps ts;  // traced: one record per stage (gl_trace.cuh)
      ops.producer_acquire_stamped(st, ts);
      load(st.stage, ops.producer_barrier(st), kt, t);
      ts.issued = ops.tr.stamp();
      ops.record_stage_load(ts, st, kt, t.id);
      st.advance();
    }
  });
}

// The what-if's drift: the rank-1 consumer of a cluster sleeps per k-tile (GL_ABLATE_SKEW_NS).
GL_DEVICE void ablation_skew() {
  if constexpr (GL_ABLATE_SKEW_NS > 0) {
    if (cluster_ctarank() == 1) __nanosleep(GL_ABLATE_SKEW_NS);
  }
}

// Consumer: the k-loop of one tile. For each k-tile: wait until its stage has landed, issue
// its MMAs (issue(stage)) as one wgmma group, and keep LAG groups in flight (wait_group LAG)
// while the oldest retires, then hand that one's stage back. LAG 1: the previous k-tile's
// stage goes back as the next is issued; LAG 2 holds one more stage, so the tensor core has
// two groups queued behind the one it runs. Returns the state of the oldest stage still held
// (the last min(LAG, k_tiles) k-tiles', still in flight): mma_drain() retires and releases
// them (ping-pong consumers do something in between). STRIDE > 1: STRIDE consumers share the
// tile's k-tiles from one ring, this one (first < STRIDE) taking first, first + STRIDE, ...
// (st: k-tile 0's place in the ring); it retires its last ones itself (mma_drain counts by one).
template <int LAG = 1, int STRIDE = 1, class Port, class State, class Issue>
GL_DEVICE State mma_mainloop(const Port& ops, State& st, int k_tiles, int tile, bool warp_leader, Issue issue,
                             int first = 0) {
  static_assert(LAG >= 1 && LAG * STRIDE < State::depth,
                "the stages held in flight must leave the producer one to fill");
  const auto next = [](State& x) {  // this consumer's next k-tile in the ring
    if constexpr (STRIDE == 1) x.advance();
    else x.advance_by(STRIDE);
  };
  if constexpr (STRIDE > 1) st.advance_by(first);
  State oldest = st;
  for (int kt = first; kt < k_tiles; kt += STRIDE) {
    // traced: clock stamps along the k-tile, one record written in two halves (gl_trace.cuh:
    // five events here made the loop, and so the one-consumer kernels, a quarter slower)
    KTileStamps ts;
    ts.wait_begin = ops.tr.stamp();
    ops.consumer_wait_unrecorded(st);
    ts.wait_end = ops.tr.stamp();
    ablation_skew();
    wgmma_fence();
    if constexpr (!GL_ABLATE_NO_MMA) issue(st.stage);  // the switch: the loads' own pace
    wgmma_commit();
    ts.issued = ops.tr.stamp();
    ops.record_ktile_head(ts, st, oldest, kt, tile);
    wgmma_wait<LAG>();  // k-tile kt - LAG * STRIDE has retired: its stage goes back to the producer(s)
    if (kt >= LAG * STRIDE) {  // from this consumer's (LAG + 1)-th k-tile on, as first < STRIDE
      ts.retired = ops.tr.stamp();
      if (warp_leader) ops.template consumer_release_for<false>(oldest, 1, kt - LAG * STRIDE);
      ts.released = ops.tr.stamp();
      ops.record_ktile_tail(ts, true, LAG * STRIDE);  // the record's lag: k-tiles back, not groups
      next(oldest);
    } else {
      ops.record_ktile_tail(ts, false, LAG * STRIDE);
    }
    next(st);
  }
  return oldest;
}
template <int LAG = 1, class Port, class State>
GL_DEVICE void mma_drain(const Port& ops, const State& oldest, int k_tiles, int tile, bool warp_leader) {
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
template <class Port, class State, class Stage>
GL_DEVICE void stage_and_commit(const Port& epi, const State& st, u32 named_barrier, bool leader, u32 k, int tile,
                                Stage stage) {
  epi.producer_acquire(st, k);
  epi.tr.event(EV_EPI_BEGIN, 0, epi.first + st.stage, st.phase, k, tile);
  stage();
  fence_proxy_async_smem();  // each writer, before the hand-over
  named_barrier_sync(named_barrier, 128);
  epi.tr.event(EV_EPI_END, 0, epi.first + st.stage, st.phase, k, tile);
  if (leader) epi.producer_commit(st, k);
}

// Writeback: wait until the consumers have staged a ROWS x COLS box, store it at (x, y)
// with TMA (64-column chunks), and free the buffer once the copy engine has read it.
template <int ROWS, int COLS, class Port, class State>
GL_DEVICE void store_staged(const Port& epi, const State& st, const CUtensorMap* map, const u16* staging, int x, int y,
                            u32 k, int tile) {
  epi.consumer_wait(st, k);
  tma_store_tile<ROWS, COLS>(map, staging, x, y);
  tma_store_commit();
  epi.tr.event(EV_STORE_ISSUE, 0, epi.first + st.stage, st.phase, k, tile);
  tma_store_wait_read<0>();
  epi.tr.event(EV_STORE_DONE, 0, epi.first + st.stage, st.phase, k, tile);
  epi.consumer_release(st, k);
}
