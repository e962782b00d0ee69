// skeleton.cu — where a small kernel's fixed cost goes (perf-notes item 111). An empty kernel,
// then the small-M kernel's pieces added one level at a time (SK_LEVEL, cumulative):
//   0 return at once
//   1 barrier init by thread 0 (and the tensor maps' prefetch by thread 32), then __syncthreads
//   2 the register hand-over (setmaxnreg; 384 threads: warpgroup 0 gives, 1 and 2 take)
//   3 warpgroup 1 writes a 64 x 64 tile to shared memory and stores it through C's map
//   4 before that, thread 0 loads one 64 x 64 tile of A through A's map into the stage, and
//     warpgroup 1 waits for it on the full barrier (what it stores is then A's tile)
//   5 the producer's griddepcontrol.wait before the load, and launch_dependents after the sync
// Launch shape (threads, dynamic shared memory, grid, cluster) comes from the probe.
#include "gl_common.cuh"
#include "gl_mbarrier.cuh"
#include "gl_tma.cuh"

#ifndef SK_LEVEL
#error "SK_LEVEL (0-5) must be defined"
#endif
#ifndef SK_THREADS
#error "SK_THREADS (128 or 384) must be defined"
#endif

extern "C" __global__ void __launch_bounds__(SK_THREADS, 1)
skeleton(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_c, int tiles_m) {
  extern __shared__ u8 smem_raw[];
  if constexpr (SK_LEVEL == 0) return;
  u8* base = align_1024(smem_raw);
  u16* tile = reinterpret_cast<u16*>(base);           // 64 x 64 fp16, 8 KB
  u64* full = reinterpret_cast<u64*>(base + 8192);
  const int m0 = (blockIdx.x % tiles_m) * 64, n0 = (blockIdx.x / tiles_m) * 64;
  if (threadIdx.x == 32) {
    tma_prefetch_descriptor(&tmap_a);
    tma_prefetch_descriptor(&tmap_c);
  }
  if (threadIdx.x == 0) {
    mbar_init(full, 1);
    fence_barrier_init();
  }
  __syncthreads();
  if constexpr (SK_LEVEL >= 5) {
    if (threadIdx.x == 0) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  if constexpr (SK_LEVEL < 2) return;
  auto load = [&] {  // one thread: A's rows m0.. of its first 64 columns into the tile
    if constexpr (SK_LEVEL >= 5) asm volatile("griddepcontrol.wait;" ::: "memory");
    mbar_arrive_expect_tx(full, 64 * 64 * 2);
    tma_load_2d(tile, &tmap_a, full, 0, m0);
  };
  auto store = [&] {  // one warpgroup: the tile to C at (m0, n0)
    if constexpr (SK_LEVEL >= 4) {
      while (!mbar_try_wait(smem_u32(full), 0)) {
      }
    } else {
      for (int i = threadIdx.x % 128; i < 64 * 64; i += 128) tile[i] = (u16)0x3c00u;  // 1.0 in fp16
      fence_proxy_async_smem();
    }
    named_barrier_sync(1, 128);
    if (threadIdx.x % 128 == 0) {
      tma_store_2d(&tmap_c, tile, n0, m0);
      tma_store_commit();
      tma_store_wait_exit();
    }
  };
  if constexpr (SK_THREADS == 384) {
    if (warpgroup_idx() == 0) {
      if constexpr (SK_LEVEL >= 2) setmaxnreg_dec<40>();
      if (SK_LEVEL >= 4 && threadIdx.x == 0) load();
    } else {
      if constexpr (SK_LEVEL >= 2) setmaxnreg_inc<232>();
      if (SK_LEVEL >= 3 && warpgroup_idx() == 1) store();
    }
  } else {
    if (SK_LEVEL >= 4 && threadIdx.x == 0) load();
    if (SK_LEVEL >= 3) store();
  }
}
