// gemm_epilogue.cuh — what the production epilogue adds to the ladder's chunked epilogue
// (gl_warpspec.cuh): chunks staged in the operand stage the tile's last k-tile drained.
#pragma once
#include "gl_warpspec.cuh"

// Consumer: a chunk staged outside the epilogue ring, in the operand stage that the tile's
// last k-tile drained (the family's borrow_stage). No slot to acquire: nothing writes that
// stage until the writeback hands it back to the producer(s). Stage, fence, meet, and one
// thread of each consumer warpgroup signals chunk `slot` (its count: the consumer warpgroups).
// The signalling side keeps no phase (a register the consumers do not have): its events record 0.
template <class Lent, class Stage>
GL_DEVICE void stage_and_signal(const Lent& lent, u32 named_barrier, bool leader, u32 slot, u32 k, int tile,
                                Stage stage) {
  lent.tr.event(EV_EPI_BEGIN, BAR_LENT_FULL, slot, 0, k, tile);
  stage();
  fence_proxy_async_smem();
  named_barrier_sync(named_barrier, 128);
  lent.tr.event(EV_EPI_END, BAR_LENT_FULL, slot, 0, k, tile);
  if (leader) lent.signal(slot);
}

// Writeback: the borrowed-stage counterpart of store_staged, without the wait for the copy
// engine's reads (the caller waits once, before it hands the whole stage back).
template <int ROWS, int COLS, class Lent>
GL_DEVICE void store_signalled(const Lent& lent, u32 slot, u32 phase, const CUtensorMap* map, const u16* staging,
                               int x, int y, u32 k, int tile) {
  lent.wait(slot, phase, k, tile);
  tma_store_tile<ROWS, COLS>(map, staging, x, y);
  tma_store_commit();
  lent.tr.event(EV_STORE_ISSUE, BAR_LENT_FULL, slot, phase, k, tile);
}
