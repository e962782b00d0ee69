// gl_pipeline.cuh — the producer/consumer verbs of an mbarrier ring, named for what they
// mean, each traced. A ring of DEPTH stages has a "ready" barrier per stage (data is in the
// buffer) and a "free" barrier per stage (the buffer may be overwritten).
#pragma once
#include "gl_mbarrier.cuh"
#include "gl_trace.cuh"

// Wait for the phase `st.phase` of bars[st.stage] to complete; `barrier` names the ring.
template <int D>
GL_DEVICE void wait_stage(Tracer& tr, u64* bars, const PipelineState<D>& st, u32 barrier,
                          u32 k = 0) {
  tr.event(EV_WAIT_BEGIN, barrier, st.stage, st.phase, k);
  mbar_wait(&bars[st.stage], st.phase, tr.role, barrier, st.stage);
  tr.event(EV_WAIT_END, barrier, st.stage, st.phase, k);
}

// Producer: wait until the consumer has freed this stage (first lap passes at once,
// because the producer's state starts at phase 1).
template <int D>
GL_DEVICE void producer_acquire(Tracer& tr, u64* free_bars, const PipelineState<D>& st,
                                u32 barrier, u32 k = 0) {
  wait_stage(tr, free_bars, st, barrier, k);
}

// Producer: announce the bytes the copy engine will deliver into this stage. The ready
// barrier completes when they have all landed.
template <int D>
GL_DEVICE void producer_expect(u64* ready_bars, const PipelineState<D>& st, u32 bytes) {
  mbar_arrive_expect_tx(&ready_bars[st.stage], GL_EXPECT_TX(bytes));
}

// Consumer: wait until this stage's data has landed.
template <int D>
GL_DEVICE void consumer_wait(Tracer& tr, u64* ready_bars, const PipelineState<D>& st,
                             u32 barrier, u32 k = 0) {
  wait_stage(tr, ready_bars, st, barrier, k);
}

// Consumer: hand the stage back to the producer.
template <int D>
GL_DEVICE void consumer_release(Tracer& tr, u64* free_bars, const PipelineState<D>& st,
                                u32 barrier, u32 k = 0) {
  mbar_arrive(&free_bars[st.stage]);
  tr.event(EV_ARRIVE, barrier, st.stage, st.phase, k);
}
