// gl_fixup.cuh — stream-K's fixup, written once: a tile split along K over several CTAs of
// one resident wave is summed inside the kernel. Two forms:
//  - an owner (the small-M kernel): a CTA whose piece starts inside the tile (k0 > 0) stores
//    it in fp32 to its own slot and raises its flag; the CTA holding the tile's first k-tiles
//    (the owner) waits for the flags of the later CTAs that share the tile, adds their slots
//    in CTA order (a fixed order: bit-identical results run to run), lowers each flag once
//    read (a zeroed buffer stays valid launch after launch on one stream) and writes C;
//  - column slices (step 9): each of the P CTAs holding a piece writes one slice of the
//    tile's 64-column chunks. It publishes the other chunks of its piece, then adds the other
//    pieces' parts of its own chunks, in piece order: the reads of a tile are spread over its
//    P SMs instead of all landing on one (one SM reads L2 at ~60 GB/s).
// The buffer `ws`: one int flag per (CTA, consumer), padded to 256 bytes, then one BM x BN
// fp32 slot per CTA (the host's workspace sizes compute the same). A consumer's 64 x N
// fragment is stored in fragment order (float4 i of thread t at (i * 128 + t) * 4): every
// warp's access is 512 contiguous bytes, and the readers read it back with the same indexing.
#pragma once
#include "gl_common.cuh"
#include "gl_mbarrier.cuh"

template <int BM, int BN, int CONSUMERS>
struct FixupSlots {
  float* ws;
  GL_DEVICE int* flag(int cta, int cw) const { return reinterpret_cast<int*>(ws) + cta * CONSUMERS + cw; }
  GL_DEVICE float* slot(int cta, int cw) const {
    const int flag_floats = (gridDim.x * CONSUMERS * 4 + 255) / 256 * 64;
    return ws + flag_floats + (long long)cta * BM * BN + cw * (BM / CONSUMERS) * BN;
  }
};

template <int R>
GL_DEVICE void add_slot(float (&acc)[R], const float* slot) {
  const int t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(slot) + i * 128 + t);  // L2: written by another SM
    acc[4 * i] += v.x; acc[4 * i + 1] += v.y; acc[4 * i + 2] += v.z; acc[4 * i + 3] += v.w;
  }
}
// cp.async (LDGSTS): 16 bytes from global to shared memory without passing through a
// register, so all of a thread's pieces of a slot can be in flight at once (beside 128
// accumulators there are no registers to hold them).
GL_DEVICE void cp_async_16(u32 smem_addr, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr), "l"(src) : "memory");
}
GL_DEVICE void cp_async_wait_all() { asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory"); }
GL_DEVICE void flag_raise(int* flag) { asm volatile("st.release.gpu.global.b32 [%0], 1;" ::"l"(flag) : "memory"); }
GL_DEVICE void flag_lower(int* flag) { asm volatile("st.relaxed.gpu.global.b32 [%0], 0;" ::"l"(flag) : "memory"); }
// Spin until the later CTA `cta`'s piece is in its slot (debug builds: bounded, reported as
// the consumer waiting on BAR_FIXUP with the CTA in the stage field).
GL_DEVICE void flag_wait(const int* flag, u32 cta) {
  int v = 0;
#if GL_DEBUG_WAITS
  const u64 t0 = globaltimer_ns();
#endif
  while (true) {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    if (v) return;
#if GL_DEBUG_WAITS
    const u64 waited = globaltimer_ns() - t0;
    if (waited > GL_WAIT_TIMEOUT_NS) gl_report_stuck(ROLE_CONSUMER, BAR_FIXUP, cta, 1, waited);
#else
    (void)cta;
#endif
  }
}

// Publish one consumer warpgroup's fragment to this CTA's slot, then raise its flag: the
// chunks outside [c0, c1) — all of them by default (a later piece, for its owner); a column
// slice keeps its own chunks [c0, c1), which the other pieces do not read. Chunk c of a 64 x N
// fragment is its float4s [8c, 8c + 8) (8-column blocks). `named_barrier`: this warpgroup's
// own (128 threads).
template <int BM, int BN, int CONSUMERS, int R>
GL_DEVICE void publish_slot(const float (&acc)[R], const FixupSlots<BM, BN, CONSUMERS>& fx, int cta, int cw,
                            u32 named_barrier, int c0 = 0, int c1 = 0) {
  const int t = threadIdx.x % 128;
  float4* slot = reinterpret_cast<float4*>(fx.slot(cta, cw)) + t;
#pragma unroll
  for (int i = 0; i < R / 4; ++i)
    if (i / 8 < c0 || i / 8 >= c1) __stcg(slot + i * 128, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  __threadfence();
  named_barrier_sync(named_barrier, 128);
  if (t == 0) flag_raise(fx.flag(cta, cw));
}
// Gather: CTA q's part of chunks [c0, c1), added to the accumulators, read through `stage`
// (this consumer's 64 x N fp32 of idle shared memory) with cp.async, then read back by each
// thread from what it copied itself (no barrier). Each of the `readers` CTAs reading q's
// slot counts itself on q's flag; the last one lowers it for the next launch.
template <int BM, int BN, int CONSUMERS, int R>
GL_DEVICE void slice_gather(float (&acc)[R], const FixupSlots<BM, BN, CONSUMERS>& fx, int q, int cw, u32 named_barrier,
                            int c0, int c1, int readers, float* stage) {
  const int t = threadIdx.x % 128;
  int* flag = fx.flag(q, cw);
  if (t == 0) flag_wait(flag, q);
  named_barrier_sync(named_barrier, 128);
  const float4* src = reinterpret_cast<const float4*>(fx.slot(q, cw)) + t;
  const u32 dst = smem_u32(reinterpret_cast<float4*>(stage) + t);
#pragma unroll 1
  for (int i = 8 * c0; i < 8 * c1; ++i) cp_async_16(dst + i * 128 * 16, src + i * 128);
  cp_async_wait_all();
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    if (i / 8 < c0 || i / 8 >= c1) continue;
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(dst + i * 128 * 16));
    acc[4 * i] += v.x; acc[4 * i + 1] += v.y; acc[4 * i + 2] += v.z; acc[4 * i + 3] += v.w;
  }
  named_barrier_sync(named_barrier, 128);  // all have read
  if (t == 0 && atomicAdd(flag, 1) == readers) flag_lower(flag);  // raised = 1, then one count per reader
}

// The owner: the pieces of CTAs cta + 1 .. last_cta added in CTA order. Each of those CTAs
// holds a piece of the tile: the deal gives every CTA a non-empty run.
template <int BM, int BN, int CONSUMERS, int R>
GL_DEVICE void fixup_collect(float (&acc)[R], const FixupSlots<BM, BN, CONSUMERS>& fx, int cta, int last_cta, int cw,
                             u32 named_barrier) {
  for (int q = cta + 1; q <= last_cta; ++q) {
    int* flag = fx.flag(q, cw);
    if (threadIdx.x % 128 == 0) flag_wait(flag, q);
    named_barrier_sync(named_barrier, 128);
    add_slot(acc, fx.slot(q, cw));
    named_barrier_sync(named_barrier, 128);  // all have read: the flag goes down for the next launch
    if (threadIdx.x % 128 == 0) flag_lower(flag);
  }
}
