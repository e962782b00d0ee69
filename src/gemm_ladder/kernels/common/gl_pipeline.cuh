// gl_pipeline.cuh — the pipeline object: a ring of shared-memory stages and the mbarriers
// that hand them over, with CUTLASS's vocabulary on our own PTX wrappers.
//
// A ring of DEPTH buffers has, per stage, a "full" barrier (the data is in the buffer:
// producer -> consumer) and an "empty" one (the buffer may be overwritten: consumer ->
// producer). The pipeline owns both arrays and their counts; a kernel keeps it in its shared
// storage, initialises it once, and each role binds it to its recorder (tracing is the role's
// policy: with GL_TRACE=0 the recorder is empty and every event compiles to nothing):
//
//   producer_acquire(st)         wait until every consumer released the stage; in a ring the
//                                copy engine fills, announce the bytes it will deliver into it
//   producer_barrier(st)         the barrier those copies credit their bytes to
//   producer_commit(st)          a stage the producer's threads wrote themselves: one arrives
//   consumer_wait(st)            wait until the stage's data is in the buffer
//   consumer_release(st)         hand the stage back (to the producer of every CTA of the cluster)
//
// Each end walks the ring with its own PipelineState: the producer's starts at phase 1 (its
// first lap of waits on fresh empty barriers passes at once), the consumer's at phase 0 (its
// first wait blocks until data lands). Nothing outside this header touches a ring's barriers.
#pragma once
#include "gl_cluster.cuh"
#include "gl_mbarrier.cuh"
#include "gl_trace.cuh"

constexpr u32 PRODUCER_START_PHASE = GL_ABLATE_SAME_PHASE ? 0u : 1u;  // the what-if: both at 0
constexpr u32 CONSUMER_START_PHASE = 0u;

// Which buffer of a DEPTH-deep ring a role is at, and which phase of its barrier it waits for.
template <int DEPTH>
struct PipelineState {
  static constexpr int depth = DEPTH;
  int stage;
  u32 phase;
  GL_DEVICE explicit PipelineState(u32 initial_phase) : stage(0), phase(initial_phase) {}
  static GL_DEVICE PipelineState producer() { return PipelineState(PRODUCER_START_PHASE); }
  static GL_DEVICE PipelineState consumer() { return PipelineState(CONSUMER_START_PHASE); }
  // The consumer's state n buffers into its walk: where the ring's n-th fill lands.
  static GL_DEVICE PipelineState consumer_at(u32 n) {
    PipelineState st(CONSUMER_START_PHASE ^ ((n / DEPTH) & 1u));
    st.stage = n % DEPTH;
    return st;
  }
  GL_DEVICE void advance() {
    if (++stage == DEPTH) { stage = 0; phase ^= 1u; }
  }
  // Skip n buffers at once (the stages another consumer takes), flipping the phase once per wrap.
  GL_DEVICE void advance_by(int n) {
    const int s = stage + n;
    phase ^= (u32)((s / DEPTH) & 1);
    stage = s % DEPTH;
  }
};

// What a producer announces for a stage of `bytes`: that, unless the what-if says otherwise.
GL_DEVICE u32 expected_tx(u32 bytes) { return (u32)((int)bytes + (GL_ABLATE_EXPECT_TX_DELTA)); }

// Wait for a phase, recorded as a wait on barrier `name` and named in debug reports.
GL_DEVICE void traced_wait(u64* bar, u32 name, u32 stage, u32 phase, u32 k, Tracer& tr) {
  tr.event(EV_WAIT_BEGIN, name, stage, phase, k);
  mbar_wait(bar, phase, tr.role, name, stage);
  tr.event(EV_WAIT_END, name, stage, phase, k);
}

// A warp-specialized ring: full and empty barriers. In a cluster of CLUSTER CTAs whose
// producers multicast into every CTA's buffers, a stage may be refilled only once the
// consumers of every CTA have released it: consumer_release arrives on the empty barrier of
// each CTA (through mapa), and the empty barrier counts the consumers of all of them.
// FULL and EMPTY name the barriers (BAR_* of gl_roles.cuh) in traces and debug reports. TX: the
// copy engine fills the stages (its bytes complete a full barrier's phase), or the producer's
// threads write them and one arrives (producer_commit).
template <int DEPTH, int CLUSTER = 1, u32 FULL = BAR_TMA2MMA, u32 EMPTY = BAR_MMA2TMA, bool TX = true>
struct Pipeline {
  using State = PipelineState<DEPTH>;
  static constexpr u32 FULL_NAME = FULL, EMPTY_NAME = EMPTY;
  static constexpr int RELEASE_CTAS = GL_ABLATE_LOCAL_EMPTY ? 1 : CLUSTER;  // the what-if: this CTA's only
  u64 full[DEPTH];
  u64 empty[DEPTH];

  // One thread, before the barrier that publishes them. producer_arrivals: per phase of a full
  // barrier (1: one arrive.expect_tx, or one writer after the writers met); consumer_arrivals:
  // per phase of an empty barrier from ONE CTA's consumers (the pipeline counts the cluster's).
  GL_DEVICE void init(u32 producer_arrivals, u32 consumer_arrivals) {
    for (int i = 0; i < DEPTH; ++i) {
      mbar_init(&full[i], producer_arrivals);
      mbar_init(&empty[i], consumer_arrivals * RELEASE_CTAS);
    }
  }

  // The pipeline as one role sees it: its verbs, each recorded by the role's recorder, and
  // (TX) the bytes a stage delivers, as CUTLASS's TMA pipeline keeps them in its params.
  struct Port {
    u64* full;   // the pipeline's arrays, as the role addresses them
    u64* empty;
    Tracer& tr;
    u32 tx_bytes;
    u32 first;  // the index of this ring's stage 0 among its kind (rings in an array: traces, debug reports)
    // Producer: wait until the stage is free; with TX, announce the bytes that will land in it.
    GL_DEVICE void producer_acquire(const State& st, u32 k = 0) const {
      traced_wait(&empty[st.stage], EMPTY, first + st.stage, st.phase, k, tr);
      if constexpr (TX) mbar_arrive_expect_tx(&full[st.stage], expected_tx(tx_bytes));
    }
    // The same, its wait stamped for the producer's stage record instead of recorded (producer_loop).
    GL_DEVICE void producer_acquire_stamped(const State& st, KTileStamps& ts) const {
      ts.wait_begin = tr.stamp();
      mbar_wait(&empty[st.stage], st.phase, tr.role, EMPTY, first + st.stage);
      ts.wait_end = tr.stamp();
      if constexpr (TX) mbar_arrive_expect_tx(&full[st.stage], expected_tx(tx_bytes));
    }
    GL_DEVICE void record_stage_load(const KTileStamps& ts, const State& st, u32 k, int tile) const {
      tr.stage_load(ts, FULL, EMPTY, first + st.stage, st.phase, k, tile);
    }
    // Producer, on the first lap of a fresh ring (no consumer has had the stage yet, so there is
    // nothing to wait for): announce the bytes only. The production kernel's early loads.
    GL_DEVICE void producer_acquire_fresh(const State& st) const {
      static_assert(TX, "a ring the copy engine fills");
      mbar_arrive_expect_tx(&full[st.stage], expected_tx(tx_bytes));
    }
    GL_DEVICE u64* producer_barrier(const State& st) const { return &full[st.stage]; }
    // Without TX: after the writers' proxy fence and their meeting, one of them arrives.
    GL_DEVICE void producer_commit(const State& st, u32 k = 0) const {
      static_assert(!TX, "the copy engine's bytes complete a TMA stage");
      mbar_arrive(&full[st.stage]);
      tr.event(EV_ARRIVE, FULL, first + st.stage, st.phase, k);
    }
    GL_DEVICE void consumer_wait(const State& st, u32 k = 0) const {
      traced_wait(&full[st.stage], FULL, first + st.stage, st.phase, k, tr);
    }
    // The same wait without its events: the k-loop records it in its k-tile record.
    GL_DEVICE void consumer_wait_unrecorded(const State& st) const {
      mbar_wait(&full[st.stage], st.phase, tr.role, FULL, first + st.stage);
    }
    GL_DEVICE void consumer_release(const State& st, u32 k = 0) const { consumer_release_for(st, 1, k); }
    // Release on behalf of `arrivals` consumer threads at once (a role that kept the stage
    // for them: the same arrivals, to every CTA of the cluster). RECORD false: the k-loop
    // records the release in its k-tile record.
    template <bool RECORD = true>
    GL_DEVICE void consumer_release_for(const State& st, u32 arrivals, u32 k = 0) const {
      if (RELEASE_CTAS == 1) {
        if (arrivals == 1) mbar_arrive(&empty[st.stage]);
        else mbar_arrive_n(&empty[st.stage], arrivals);
      } else {
#pragma unroll
        for (int r = 0; r < RELEASE_CTAS; ++r) {
          if (arrivals == 1) mbar_arrive_cluster(map_to_cta(&empty[st.stage], r));
          else mbar_arrive_cluster_n(map_to_cta(&empty[st.stage], r), arrivals);
        }
      }
      if constexpr (RECORD) tr.event(EV_ARRIVE, EMPTY, first + st.stage, st.phase, k);
    }
    // A consumer's k-tile k as one record: the head (its wait and issue; `retiring`, the group
    // `lag` k-tiles older that retires in it) once the group is issued, the tail (that group's
    // retirement and release, when `has_retired`) at its end.
    GL_DEVICE void record_ktile_head(const KTileStamps& s, const State& st, const State& retiring, u32 k,
                                     int tile) const {
      tr.ktile_head(s, FULL, first + st.stage, st.phase, k, tile, first + retiring.stage, retiring.phase);
    }
    GL_DEVICE void record_ktile_tail(const KTileStamps& s, bool has_retired, u32 lag) const {
      tr.ktile_tail(s, has_retired, EMPTY, lag);
    }
  };
  // A role's view of the ring. tx_bytes: what a stage delivers (TX rings); first: this ring's
  // place among rings of one kind (ping-pong's per-consumer epilogue rings), for traces and reports.
  GL_DEVICE Port bind(Tracer& tr, u32 tx_bytes = 0, u32 first = 0) { return Port{full, empty, tr, tx_bytes, first}; }
};
// The epilogue's ring: the consumers' threads stage accumulators, the writeback stores them.
template <int SLOTS>
using EpiloguePipeline = Pipeline<SLOTS, 1, BAR_MMA2LD, BAR_LD2MMA, false>;

// A lockstep ring (steps 4-6): one team loads, computes and writes in turn, and a CTA barrier
// among the team frees a buffer, so there are full barriers only and nothing to release.
template <int DEPTH>
struct LockstepPipeline {
  using State = PipelineState<DEPTH>;
  static constexpr u32 FULL_NAME = BAR_FULL;
  u64 full[DEPTH];

  GL_DEVICE void init() {
    for (int i = 0; i < DEPTH; ++i) mbar_init(&full[i], 1);  // the leader's arrive.expect_tx
  }
  // The leader fills the stages in the order the team drains them, and never waits: its state
  // is the stage it fills next and the phase that fill completes, the consumer's numbering.
  static GL_DEVICE State producer_state() { return State::consumer(); }
  struct Port {
    LockstepPipeline& p;
    Tracer& tr;
    u32 tx_bytes;
    // The team's barrier freed the stage: nothing to wait for, only the bytes to announce.
    GL_DEVICE void producer_acquire(const State& st) const {
      mbar_arrive_expect_tx(&p.full[st.stage], expected_tx(tx_bytes));
    }
    GL_DEVICE u64* producer_barrier(const State& st) const { return &p.full[st.stage]; }
    GL_DEVICE void consumer_wait(const State& st, u32 k = 0) const {
      traced_wait(&p.full[st.stage], BAR_FULL, st.stage, st.phase, k, tr);
    }
  };
  GL_DEVICE Port bind(Tracer& tr, u32 tx_bytes) { return Port{*this, tr, tx_bytes}; }
};

// An ordered barrier: GROUPS consumer warpgroups take turns (ping-pong). Group g waits on
// turn[g]; the group before it passes the turn by arriving there (one arrive per warp, so the
// count is the passing group's warps). Group 0's first turn is free: it starts at phase 1, as
// a producer of the turns would; the others start at phase 0 and wait for their predecessor.
template <int GROUPS>
struct OrderedBarrier {
  u64 turn[GROUPS];

  GL_DEVICE void init(u32 arrivals) {
    for (int g = 0; g < GROUPS; ++g) mbar_init(&turn[g], arrivals);
  }
  struct Member {
    OrderedBarrier& ob;
    Tracer& tr;
    int group;
    PipelineState<1> st;
    GL_DEVICE void wait_turn(u32 k = 0) {
      traced_wait(&ob.turn[group], BAR_TURN, group, st.phase, k, tr);
      st.advance();
    }
    // The same wait stamped for a record instead of recorded (the attention consumers' block record).
    GL_DEVICE void wait_turn_stamped(u32& begin, u32& end) {
      begin = tr.stamp();
      mbar_wait(&ob.turn[group], st.phase, tr.role, BAR_TURN, group);
      end = tr.stamp();
      st.advance();
    }
    GL_DEVICE int next_group() const { return group + 1 == GROUPS ? 0 : group + 1; }
    // One thread per warp of this group, once the group's work that must come first is issued.
    // RECORD false: the caller's record holds the pass.
    template <bool RECORD = true>
    GL_DEVICE void pass_turn(bool arriving, u32 k = 0) const {
      const int next = next_group();
      if (arriving) mbar_arrive(&ob.turn[next]);
      if constexpr (RECORD) tr.event(EV_ARRIVE, BAR_TURN, next, st.phase, k);
    }
  };
  GL_DEVICE Member member(int group, Tracer& tr) {
    // the what-if (GL_ABLATE_TURNS_NO_FIRST): group 0 waits for a first turn nobody passes
    const bool first = group == 0 && !GL_ABLATE_TURNS_NO_FIRST;
    return Member{*this, tr, group, first ? PipelineState<1>::producer() : PipelineState<1>::consumer()};
  }
};

// N one-way signals that complete one phase per round (no buffer of their own to hand back):
// the production kernel's borrowed stage, whose chunks the consumers signal staged and the
// writeback stores. ARRIVALS per phase; the waiting side names the round's parity.
template <int N, u32 NAME>
struct Signals {
  u64 bar[N];

  GL_DEVICE void init(u32 arrivals) {
    for (int i = 0; i < N; ++i) mbar_init(&bar[i], arrivals);
  }
  struct Port {
    u64* bar;
    Tracer& tr;
    GL_DEVICE void signal(int i) const { mbar_arrive(&bar[i]); }
    GL_DEVICE void wait(int i, u32 phase, u32 k = 0, int tile = 0) const {
      tr.event(EV_WAIT_BEGIN, NAME, i, phase, k, tile);
      mbar_wait(&bar[i], phase, tr.role, NAME, i);
      tr.event(EV_WAIT_END, NAME, i, phase, k, tile);
    }
  };
  GL_DEVICE Port bind(Tracer& tr) { return Port{bar, tr}; }
};
