// gl_pipeline.cuh — a producer/consumer ring of mbarriers, with verbs named for what they mean.
//
// A ring of DEPTH shared-memory buffers has, per stage, a "full" barrier (the data is in the
// buffer: producer -> consumer) and, when the consumer hands buffers back through a barrier,
// an "empty" one (the buffer may be overwritten: consumer -> producer). Lockstep steps free
// buffers with __syncthreads and have no empty barriers. Each end walks the ring with its own
// PipelineState: the producer's starts at phase 1 (its first lap of waits on fresh empty
// barriers passes at once), the consumer's at phase 0 (its first wait blocks until data lands).
//
// In a cluster of CLUSTER CTAs whose producers multicast into every CTA's buffers, a stage may
// be refilled only once the consumers of every CTA have released it, so consumer_release
// arrives on the empty barrier of each CTA in the cluster (through mapa) and the empty barrier
// counts the consumers of all of them.
#pragma once
#include "gl_mbarrier.cuh"
#include "gl_cluster.cuh"
#include "gl_trace.cuh"

template <int DEPTH, int CLUSTER = 1>
struct Ring {
  u64* full;        // [DEPTH] producer -> consumer
  u64* empty;       // [DEPTH] consumer -> producer (nullptr in lockstep rings)
  u32 full_name;    // BAR_* ids: name the barrier in traces and debug reports
  u32 empty_name;
  Tracer& tr;       // the calling role's recorder

  GL_DEVICE Ring(u64* full_bars, u32 full_id, u64* empty_bars, u32 empty_id, Tracer& t)
      : full(full_bars), empty(empty_bars), full_name(full_id), empty_name(empty_id), tr(t) {}

  // One thread, before the CTA (or cluster) barrier that publishes the barriers.
  static GL_DEVICE void init(u64* full_bars, u32 full_arrivals, u64* empty_bars = nullptr,
                             u32 empty_arrivals = 0) {
    for (int i = 0; i < DEPTH; ++i) {
      mbar_init(&full_bars[i], full_arrivals);
      if (empty_bars != nullptr) mbar_init(&empty_bars[i], empty_arrivals);
    }
  }

  GL_DEVICE u64* full_bar(const PipelineState<DEPTH>& st) const { return &full[st.stage]; }

  // Producer: wait until every consumer has released this stage.
  GL_DEVICE void producer_acquire(const PipelineState<DEPTH>& st, u32 k = 0) const {
    wait(empty, empty_name, st, k);
  }
  // Producer: arrive on the full barrier announcing `bytes` the copy engine will deliver
  // into this CTA's buffer; the phase completes when they have all landed.
  GL_DEVICE void producer_expect_tx(const PipelineState<DEPTH>& st, u32 bytes) const {
    mbar_arrive_expect_tx(&full[st.stage], GL_EXPECT_TX(bytes));
  }
  // Producer: the threads have written the buffer themselves (after their proxy fence and a
  // barrier among them); one of them arrives.
  GL_DEVICE void producer_commit(const PipelineState<DEPTH>& st, u32 k = 0) const {
    mbar_arrive(&full[st.stage]);
    tr.event(EV_ARRIVE, full_name, st.stage, st.phase, k);
  }
  // Consumer: wait until this stage's data is in the buffer.
  GL_DEVICE void consumer_wait(const PipelineState<DEPTH>& st, u32 k = 0) const {
    wait(full, full_name, st, k);
  }
  // Consumer: hand the stage back, to the producer of every CTA of the cluster.
  GL_DEVICE void consumer_release(const PipelineState<DEPTH>& st, u32 k = 0) const {
    if (CLUSTER == 1) {
      mbar_arrive(&empty[st.stage]);
    } else {
#pragma unroll
      for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(map_to_cta(&empty[st.stage], r));
    }
    tr.event(EV_ARRIVE, empty_name, st.stage, st.phase, k);
  }
  // Another role hands the stage back on behalf of the `arrivals` consumer threads that kept
  // it (the epilogue borrowed it): the same arrivals, to every CTA of the cluster, at once.
  GL_DEVICE void release_for(const PipelineState<DEPTH>& st, u32 arrivals, u32 k = 0) const {
    if (CLUSTER == 1) {
      mbar_arrive_n(&empty[st.stage], arrivals);
    } else {
#pragma unroll
      for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster_n(map_to_cta(&empty[st.stage], r), arrivals);
    }
    tr.event(EV_ARRIVE, empty_name, st.stage, st.phase, k);
  }

 private:
  GL_DEVICE void wait(u64* bars, u32 name, const PipelineState<DEPTH>& st, u32 k) const {
    tr.event(EV_WAIT_BEGIN, name, st.stage, st.phase, k);
    mbar_wait(&bars[st.stage], st.phase, tr.role, name, st.stage);
    tr.event(EV_WAIT_END, name, st.stage, st.phase, k);
  }
};
