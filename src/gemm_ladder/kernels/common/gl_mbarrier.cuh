// gl_mbarrier.cuh — the mbarrier instructions, each wrapped once, and the bounded debug wait.
//
// An mbarrier counts pending arrivals and pending transaction bytes for its current
// phase; the phase completes (and its parity flips) when both reach zero.
// try_wait.parity(p) succeeds once the phase with parity p has completed: on a fresh
// barrier (phase 0 running) waiting for parity 1 passes at once, waiting for 0 blocks.
// Kernels do not call these on a ring's barriers: the pipeline object does (gl_pipeline.cuh).
#pragma once
#include "gl_common.cuh"
#include "gl_roles.cuh"

GL_DEVICE void mbar_init(u64* bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals));
}
// Make barrier initialisation visible to the async proxy (TMA) and to the cluster.
GL_DEVICE void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
GL_DEVICE void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// `count` arrivals at once (one thread standing in for several that did not arrive).
GL_DEVICE void mbar_arrive_n(u64* bar, u32 count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Arrive and announce `bytes` more transaction bytes for the current phase.
GL_DEVICE void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
GL_DEVICE bool mbar_try_wait(u32 bar_addr, u32 parity) {
  u32 done;
  asm volatile(
      "{\n .reg .pred P;\n mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\n"
      " selp.u32 %0, 1, 0, P;\n}\n"
      : "=r"(done) : "r"(bar_addr), "r"(parity) : "memory");
  return done != 0;
}

// ---------------------------------------------------------------------------------------
// Debug builds (-DGL_DEBUG_WAITS=1) bound every wait. The first thread to time out writes
// who was stuck where into host-mapped memory (readable after the context dies) and traps.
struct GlStuckRecord {
  u32 magic;  // 0x57A11ED0 once written
  u32 role, barrier, stage, phase;
  u32 block, thread, smid;
  u64 waited_ns;
};
#if GL_DEBUG_WAITS
__device__ GlStuckRecord* gl_stuck_record;  // set by the runtime: host-mapped pinned memory
__device__ u32 gl_stuck_claimed;

GL_DEVICE void gl_report_stuck(u32 role, u32 barrier, u32 stage, u32 phase, u64 waited_ns) {
  if (atomicCAS(&gl_stuck_claimed, 0u, 1u) == 0u) {
    if (gl_stuck_record != nullptr) {
      volatile GlStuckRecord* r = gl_stuck_record;
      r->role = role; r->barrier = barrier; r->stage = stage; r->phase = phase;
      r->block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      r->thread = threadIdx.x; r->smid = smid(); r->waited_ns = waited_ns;
      __threadfence_system();
      r->magic = 0x57A11ED0u;
      __threadfence_system();
    }
    asm volatile("trap;");
  }
  // Everyone else who timed out waits for the first reporter's trap, which ends the grid;
  // trapping here could end it before the report is written.
  while (true) __nanosleep(1000000);
}
#endif

// Wait until the phase with parity `phase` of `bar` has completed. The role/barrier/stage
// arguments name the wait for debug reports and cost nothing in normal builds.
GL_DEVICE void mbar_wait(u64* bar, u32 phase, u32 role, u32 barrier, u32 stage) {
  const u32 addr = smem_u32(bar);
#if GL_DEBUG_WAITS
  if (mbar_try_wait(addr, phase)) return;
  // When one ring stalls, every role ends up waiting. Time out the consumers first (they
  // wait on data), then the producer (it waits on the consumers), then the writeback, so
  // the report names the ring that stalled first rather than one of its victims.
  const u64 limit = GL_WAIT_TIMEOUT_NS * (role == ROLE_WRITEBACK ? 4ull : role == ROLE_PRODUCER ? 2ull : 1ull);
  const u64 t0 = globaltimer_ns();
  while (!mbar_try_wait(addr, phase)) {
    const u64 waited = globaltimer_ns() - t0;
    if (waited > limit) gl_report_stuck(role, barrier, stage, phase, waited);
  }
#else
  (void)role; (void)barrier; (void)stage;
  while (!mbar_try_wait(addr, phase)) {
  }
#endif
}
