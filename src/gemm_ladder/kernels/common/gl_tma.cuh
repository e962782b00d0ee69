// gl_tma.cuh — the Tensor Memory Accelerator: bulk tensor copies between global memory
// and 128B-swizzled shared memory, issued by one thread, completing on an mbarrier
// (loads) or on a bulk async-group (stores).
#pragma once
#include "gl_common.cuh"
#include "gl_stage.cuh"  // the library's staging copy rides in every TMA kernel's module

// Load the box at (x = inner/column coordinate, y = row coordinate) into smem_dst; the
// copy engine credits its bytes to `bar` (complete_tx), which must expect them.
GL_DEVICE void tma_load_2d(void* smem_dst, const CUtensorMap* map, u64* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];"
      ::"r"(smem_u32(smem_dst)), "l"((u64)map), "r"(smem_u32(bar)), "r"(x), "r"(y)
      : "memory");
}

// The box at (x, y, z, w) of a 4-D map (attention's (B, H, S, D) tensors in their own strides:
// x along the head dim, y along the sequence, z the head, w the batch); rows past the
// sequence's end land as zeros.
GL_DEVICE void tma_load_4d(void* smem_dst, const CUtensorMap* map, u64* bar, int x, int y, int z, int w) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];"
      ::"r"(smem_u32(smem_dst)), "l"((u64)map), "r"(smem_u32(bar)), "r"(x), "r"(y), "r"(z), "r"(w)
      : "memory");
}

// The same box, delivered to the same shared-memory offset in every CTA of the cluster whose
// bit is set in `cta_mask`; each receiving CTA's barrier at that offset gets the bytes that
// land in its own shared memory.
GL_DEVICE void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map, u64* bar, int x, int y,
                                     u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;"
      ::"r"(smem_u32(smem_dst)), "l"((u64)map), "r"(smem_u32(bar)), "r"(x), "r"(y), "h"(cta_mask)
      : "memory");
}

// Store the box at (x, y) from smem_src; completion is tracked by bulk async-groups.
GL_DEVICE void tma_store_2d(const CUtensorMap* map, const void* smem_src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"((u64)map), "r"(smem_u32(smem_src)), "r"(x), "r"(y) : "memory");
}
// The same for a 3-D map: the box at (x, y, z) (the fp8 family's split-K partials, one plane per split).
GL_DEVICE void tma_store_3d(const CUtensorMap* map, const void* smem_src, int x, int y, int z) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
               ::"l"((u64)map), "r"(smem_u32(smem_src)), "r"(x), "r"(y), "r"(z) : "memory");
}
GL_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most N committed store groups still READ shared memory (buffer reusable).
template <int N> GL_DEVICE void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Wait until at most N committed store groups are still in flight at all (data in global).
template <int N> GL_DEVICE void tma_store_wait_all() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// A storing role's last wait before it exits: the staging must outlive the copy engine's reads
// of it; the writes themselves reach global memory before the grid completes (nothing in the
// kernel reads them back). Waiting for them too measured the same (docs/perf-notes.md, item 34).
GL_DEVICE void tma_store_wait_exit() { tma_store_wait_read<0>(); }

// Bring a tensor map's descriptor into the TMA unit's cache before its first copy needs it.
GL_DEVICE void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"((u64)map) : "memory");
}

// Bring box (x, y) of a 2-D map from global memory into L2, nothing into shared memory and
// no barrier: a hint with no effect on what any thread reads (L2 is the point of coherence,
// so a line fetched before another grid writes it is updated in place). Used to start
// streaming a kernel's weights while it still waits for the previous grid (griddepcontrol.wait).
GL_DEVICE void tma_prefetch_l2_2d(const CUtensorMap* map, int x, int y) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"((u64)map), "r"(x), "r"(y)
               : "memory");
}

// Every map of the kernel, fetched at entry by a thread that is idle while thread 0 initialises
// the barriers: the fetches overlap the set-up (barrier init, the cluster barrier, setmaxnreg)
// instead of standing in front of the first load. -DGL_ABLATE_NO_PREFETCH=1 leaves them out
// (each map is then fetched by its first copy), to measure what they are worth.
template <typename... Maps> GL_DEVICE void tma_prefetch_descriptors(const Maps*... maps) {
  if constexpr (!GL_ABLATE_NO_PREFETCH) (tma_prefetch_descriptor(maps), ...);
}
