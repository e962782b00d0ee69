// gl_trace.cuh — optional in-kernel event tracing (-DGL_TRACE=1).
//
// One recording thread per role ("lane" of the timeline) writes 16-byte events into its own
// slot of a global buffer: clock64 (per-SM cycle counter) plus a packed description. Each
// slot's header anchors clock64 to %globaltimer at its start and end, so the host can put
// every SM on one nanosecond axis. With GL_TRACE=0 every call compiles to nothing.
#pragma once
#include "gl_common.cuh"

enum GlEvent : unsigned {  // the Python decoder reads these names from this file
  EV_WAIT_BEGIN = 1,   // started waiting on a barrier phase
  EV_WAIT_END = 2,     // the phase completed
  EV_LOAD_ISSUE = 3,   // TMA load(s) of one stage issued
  EV_MMA_ISSUE = 4,    // wgmma group of one k-tile issued
  EV_MMA_DONE = 5,     // that group retired (wgmma.wait_group returned)
  EV_EPI_BEGIN = 6,    // accumulators -> shared staging begins
  EV_EPI_END = 7,      // staging written
  EV_STORE_ISSUE = 8,  // TMA store(s) issued
  EV_STORE_DONE = 9,   // staging read back by TMA (buffer reusable)
  EV_ARRIVE = 10,      // arrived on a barrier (release)
  EV_TILE_BEGIN = 11,  // a new output tile starts
  EV_SOFTMAX_BEGIN = 12,  // attention: a consumer's online softmax of one key block begins
  EV_SOFTMAX_END = 13,    // ... and ends (P in registers, O rescaled)
};

#define GL_TRACE_SLOTS_PER_CTA 4  // team/producer, consumer0, consumer1, writeback
#define GL_TRACE_HEADER_WORDS 8   // gt0, clk0, gt1, clk1, smid|count<<32, block, role, -

#if GL_TRACE
__device__ u64* gl_trace_buf;   // set by the runtime
__device__ u32 gl_trace_events;  // capacity per slot, in events
#endif

struct Tracer {
  u32 role;
#if GL_TRACE
  u64* cursor;  // next free event of this recorder's slot (nullptr on threads that do not record)
  u32 left;     // events the slot still holds (the slot's start follows from these: fewer live registers)
#endif
  GL_DEVICE Tracer(u32 role_id, int slot_idx, bool recorder) : role(role_id) {
#if GL_TRACE
    cursor = nullptr;
    left = 0;
    if (recorder && gl_trace_buf != nullptr) {
      const u64 events = gl_trace_events;
      const u64 block = blockIdx.x + (u64)gridDim.x * blockIdx.y;
      u64* slot = gl_trace_buf + (block * GL_TRACE_SLOTS_PER_CTA + slot_idx) * (GL_TRACE_HEADER_WORDS + 2 * events);
      cursor = slot + GL_TRACE_HEADER_WORDS;
      left = (u32)events;
      slot[0] = globaltimer_ns();
      slot[1] = clock64();
      slot[5] = block;
      slot[6] = role_id;
    }
#else
    (void)slot_idx; (void)recorder;
#endif
  }
  // One 16-byte store per event and no loads: the recorder sits on its role's critical path.
  GL_DEVICE void event(u32 kind, u32 barrier = 0, u32 stage = 0, u32 phase = 0, u32 k = 0,
                       u32 tile = 0) {
#if GL_TRACE
    if (left > 0) {
      const u64 info = (u64)(kind & 0xff) | ((u64)(barrier & 0xff) << 8) | ((u64)(stage & 0xff) << 16) |
                       ((u64)(phase & 1) << 24) | ((u64)(k & 0xffff) << 32) | ((u64)(tile & 0xffff) << 48);
      asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(cursor), "l"((u64)clock64()), "l"(info) : "memory");
      cursor += 2;
      --left;
    }
#else
    (void)kind; (void)barrier; (void)stage; (void)phase; (void)k; (void)tile;
#endif
  }
  GL_DEVICE void finish() {
#if GL_TRACE
    if (cursor != nullptr) {
      const u64 written = gl_trace_events - left;
      u64* slot = cursor - 2 * written - GL_TRACE_HEADER_WORDS;
      slot[2] = globaltimer_ns();
      slot[3] = clock64();
      slot[4] = (u64)smid() | (written << 32);
    }
#endif
  }
};
