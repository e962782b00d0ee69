// gl_roles.cuh — the names of roles and barriers, shared by the debug-wait reports and
// the tracer. The Python side reads these enums from this file, so keep one per line.
#pragma once

enum GlRole : unsigned {
  ROLE_TEAM = 1,       // lockstep steps: one team loads, computes and writes in turn
  ROLE_PRODUCER = 2,   // TMA producer warp
  ROLE_CONSUMER = 3,   // wgmma consumer warpgroup
  ROLE_WRITEBACK = 4,  // TMA-store writeback warp
};

enum GlBarrier : unsigned {
  BAR_FULL = 1,     // lockstep ring: stage loaded (TMA -> team)
  BAR_TMA2MMA = 2,  // operand ring: stage loaded, MMA may read it
  BAR_MMA2TMA = 3,  // operand ring: MMA done with stage, TMA may refill it
  BAR_MMA2LD = 4,   // epilogue ring: accumulators staged in SMEM, writeback may store
  BAR_LD2MMA = 5,   // epilogue ring: staging buffer free, MMA may stage the next tile
  BAR_TURN = 6,     // ping-pong: the other consumer has issued its mainloop, this one may start
  BAR_FIXUP = 7,    // stream-K fixup: a later CTA's fp32 piece of this tile is in its slot (a global flag)
  BAR_LENT_FULL = 8,  // borrowed stage: a chunk staged in the drained operand stage, writeback may store
  BAR_Q_FULL = 9,   // attention: the CTA's query tile landed
  BAR_K_FULL = 10,  // attention K ring: a key block landed, QK^T may read it
  BAR_K_EMPTY = 11, // attention K ring: QK^T done with the block, TMA may refill it
  BAR_V_FULL = 12,  // attention V ring: a value block landed, PV may read it
  BAR_V_EMPTY = 13, // attention V ring: PV done with the block, TMA may refill it
  BAR_Q_EMPTY = 14, // attention: the consumers' last Q K^T of a tile retired, the next tile's Q may land
  BAR_CLUSTER = 15, // a cluster barrier: every thread of every CTA of the cluster (stage: which meeting)
};
