// gl_trace.cuh — optional in-kernel event tracing (-DGL_TRACE=1).
//
// One recording thread per role ("lane" of the timeline) writes 16-byte events into its own
// slot of a global buffer: clock64 (per-SM cycle counter) plus a packed description. Each
// slot's header anchors clock64 to %globaltimer at its start and end, so the host can put
// every SM on one nanosecond axis. With GL_TRACE=0 every call compiles to nothing.
//
// The consumers' k-loop is where the recorder costs the kernel time: with one consumer issuing
// (steps 7, 8, 10) its loop, not the tensor core, sets the pace, and five events per k-tile
// (each a branch around ~14 instructions) made the traced builds 24-32 % slower. So the loop
// takes clock stamps (one instruction each) and writes the k-tile as one EV_KTILE record of
// two slots, in two halves without a branch (Tracer::ktile_head, ktile_tail); the decoder
// expands it into the five events. The producer's loop does the same with its three
// (EV_STAGE_LOAD, Tracer::stage_load): it sets the fill's pace. The attention consumers' key
// block is one record of four slots the same way (EV_ATTN_BLOCK, attn_warpspec.cuh's BlockRecord):
// up to fifteen events a block made their traced builds 12-28 % slower.
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
  EV_KTILE = 14,       // a consumer's k-tile in one record of two slots (Tracer::ktile_head)
  EV_STAGE_LOAD = 15,  // a producer's stage (wait until free, loads issued) in one record (Tracer::stage_load)
  EV_ATTN_BLOCK = 16,  // an attention consumer's key block in one record of four slots (attn_warpspec.cuh)
};

// The events an attention block record (EV_ATTN_BLOCK) holds: its flags (the decoder reads these names).
enum GlBlockFlag : unsigned {
  BLOCK_TURN = 1,      // the turn's wait and its pass (ping-pong)
  BLOCK_K = 2,         // the wait for K's block and its release
  BLOCK_QK_ISSUE = 4,  // Q K^T issued
  BLOCK_QK_DONE = 8,   // Q K^T retired (seen alone: not in A4, where it retires with P V's wait)
  BLOCK_SOFTMAX = 16,  // the softmax's begin and end
  BLOCK_V = 32,        // the wait for V's block and its release
  BLOCK_PV = 64,       // P V issued and retired
  BLOCK_V_LAG = 128,   // V's block is the one before K's (A4, A5: P V_j goes with Q K^T_{j+1})
};

#define GL_TRACE_SLOTS_PER_CTA 4  // team/producer, consumer0, consumer1, writeback
#define GL_TRACE_HEADER_WORDS 8   // gt0, clk0, gt1, clk1, smid|count<<32, block, role, -

#if GL_TRACE
__device__ u64* gl_trace_buf;   // set by the runtime
__device__ u32 gl_trace_events;  // capacity per slot, in events
#endif

// The clock stamps (the low 32 bits of clock64: %clock) of one consumer k-tile (mma_mainloop):
// when its wait for the stage began and returned, its wgmma group was issued, the oldest
// group in flight retired and that group's stage was released. A producer's stage
// (producer_loop) uses the first three: its wait for the free stage, and its loads' issue.
// 32 bits keep the loop's live registers down; the decoder unwraps them against the slot's
// previous event (records of one slot are in time order, less than 2^32 clocks apart).
struct KTileStamps {
  u32 wait_begin, wait_end, issued, retired, released;
};

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
  // A clock stamp for a record (%clock, the low 32 bits of clock64). Nothing is read
  // untraced, so the untraced kernel is the same instruction for instruction.
  GL_DEVICE u32 stamp() const {
#if GL_TRACE
    u32 c;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
    return c;
#else
    return 0;
#endif
  }
  // One k-tile as two slots (four words), written in two halves without a branch (every
  // thread runs them; the stores are predicated on the recorder's room), so the consumer's
  // registers and its warp's convergence are spared. The head, once the wgmma group is
  // issued: 0: the wait's start (bits 0-31) and the cycles to its return (32-63); 1: the info
  // word of the wait (EV_KTILE, the full barrier, stage, phase, k, tile) with the stage of the
  // group that retires in this k-tile in bits 25-30 and its phase in bit 31. The tail, at the
  // k-tile's end: 2: the clock at the issue (0-31) and at the retirement (32-63); 3: cycles from
  // the retirement to the release (0-15, saturated), the lag (16-23: the retired group is
  // k - lag), the empty barrier (24-31), whether a group retired (32: not in the first `lag`
  // k-tiles). A record that does not fit is left out (the host sees the slot full).
  GL_DEVICE void ktile_head(const KTileStamps& s, u32 full_bar, u32 stage, u32 phase, u32 k, u32 tile,
                            u32 retiring_stage, u32 retiring_phase) const {
    // no masks: a ring's stages (< 64), a phase (0, 1), k and the tile (< 2^16) fit their fields
    const u32 where = EV_KTILE | full_bar << 8 | stage << 16 | phase << 24 | retiring_stage << 25 | retiring_phase << 31;
    const u64 info = (u64)where | ((u64)(k | tile << 16) << 32);
    record_part<0, 2>(words(s.wait_begin, s.wait_end - s.wait_begin), info);
  }
  GL_DEVICE void ktile_tail(const KTileStamps& s, bool retired, u32 empty_bar, u32 lag) {
    const u32 release = retired ? s.released - s.retired : 0u;
    const u64 done = (u64)(release < 0xffffu ? release : 0xffffu) | ((u64)(lag & 0xff) << 16) |
                     ((u64)(empty_bar & 0xff) << 24) | ((u64)retired << 32);
    record_part<1, 2>(words(s.issued, retired ? s.retired : 0u), done);
    record_end<2>();
  }
  // Slot PART (two words) of a record of SLOTS slots at the cursor, stored only where the whole
  // record fits: a predicated store, no branch, so every thread of the warp runs it and the
  // recorder's warp stays converged (the threads that do not record have no room).
  template <int PART, int SLOTS>
  GL_DEVICE void record_part(u64 w0, u64 w1) const {
#if GL_TRACE
    asm volatile("{\n .reg .pred p;\n setp.ge.u32 p, %3, %4;\n @p st.global.v2.u64 [%0+%5], {%1, %2};\n}"
                 ::"l"(cursor), "l"(w0), "l"(w1), "r"(left), "n"(SLOTS), "n"(16 * PART) : "memory");
#else
    (void)w0; (void)w1;
#endif
  }
  // After a record's parts: the cursor passes it (where it fitted).
  template <int SLOTS>
  GL_DEVICE void record_end() {
#if GL_TRACE
    const bool room = left >= SLOTS;
    cursor += room ? 2 * SLOTS : 0;
    left -= room ? SLOTS : 0;
#endif
  }
  // A whole record of four slots (eight words) in one predicated asm, then the cursor past it.
  // As four record_parts, ptxas moved the words' moves and the stores under a branch around
  // them, one the recorder's warp diverges on.
  GL_DEVICE void record4(const u64 (&w)[8]) {
#if GL_TRACE
    asm volatile("{\n .reg .pred p;\n setp.ge.u32 p, %9, 4;\n @p st.global.v2.u64 [%0], {%1, %2};\n"
                 " @p st.global.v2.u64 [%0+16], {%3, %4};\n @p st.global.v2.u64 [%0+32], {%5, %6};\n"
                 " @p st.global.v2.u64 [%0+48], {%7, %8};\n}"
                 ::"l"(cursor), "l"(w[0]), "l"(w[1]), "l"(w[2]), "l"(w[3]), "l"(w[4]), "l"(w[5]), "l"(w[6]), "l"(w[7]),
                 "r"(left) : "memory");
    record_end<4>();
#else
    (void)w;
#endif
  }
  // Two 32-bit fields as one record word (the first in the low half).
  static GL_DEVICE u64 words(u32 lo, u32 hi) { return (u64)lo | ((u64)hi << 32); }
  // A producer's stage as two slots. 0: the start of its wait for the free stage (bits 0-31)
  // and the cycles to its return (32-63). 1: the info word of the load (EV_STAGE_LOAD, the
  // full barrier, stage, phase, k, tile). 2: cycles from the start to the loads' issue (0-31)
  // and the empty barrier (32-39). 3: unused.
  GL_DEVICE void stage_load(const KTileStamps& s, u32 full_bar, u32 empty_bar, u32 stage, u32 phase, u32 k,
                            u32 tile) {
    const u64 info = (u64)EV_STAGE_LOAD | ((u64)(full_bar & 0xff) << 8) | ((u64)(stage & 0xff) << 16) |
                     ((u64)(phase & 1) << 24) | ((u64)(k & 0xffff) << 32) | ((u64)(tile & 0xffff) << 48);
    const u32 t0 = s.wait_begin;
    record_part<0, 2>(words(t0, s.wait_end - t0), info);
    record_part<1, 2>(words(s.issued - t0, empty_bar & 0xff), 0ull);
    record_end<2>();
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
