// gl_fixup.cuh — stream-K's fixup, written once: a tile split along K over several CTAs of
// one resident wave is summed inside the kernel. A CTA whose piece starts inside the tile
// (k0 > 0) stores it in fp32 to its own slot and raises its flag; the CTA holding the tile's
// first k-tiles (the owner) waits for the flags of the later CTAs that share the tile, adds
// their slots in CTA order (a fixed order: bit-identical results run to run), lowers each
// flag once read (a zeroed buffer stays valid launch after launch on one stream) and writes C.
// The buffer `ws`: one int flag per (CTA, consumer), padded to 256 bytes, then one BM x BN
// fp32 slot per CTA (the host's workspace sizes compute the same). A consumer's 64 x N
// fragment is stored in fragment order (float4 i of thread t at (i * 128 + t) * 4): every
// warp's access is 512 contiguous bytes, and the owner reads it back with the same indexing.
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
GL_DEVICE void store_slot(const float (&acc)[R], float* slot) {
  const int t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < R / 4; ++i)
    __stcg(reinterpret_cast<float4*>(slot) + i * 128 + t,
           make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
}
template <int R>
GL_DEVICE void add_slot(float (&acc)[R], const float* slot) {
  const int t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(slot) + i * 128 + t);  // L2: written by another SM
    acc[4 * i] += v.x; acc[4 * i + 1] += v.y; acc[4 * i + 2] += v.z; acc[4 * i + 3] += v.w;
  }
}
// The owner's reads through shared memory: cp.async (LDGSTS) copies 16 bytes from global to
// shared memory without a register, so all of a thread's 16-byte pieces of the slot are in
// flight at once; it then reads back what it copied itself (no barrier) and adds. Read
// straight into registers, the loads would go nearly one at a time: beside the 128
// accumulators there are no registers to hold more.
GL_DEVICE void cp_async_16(u32 smem_addr, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr), "l"(src) : "memory");
}
GL_DEVICE void cp_async_wait_all() { asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory"); }
template <int R>
GL_DEVICE void add_slot_staged(float (&acc)[R], const float* slot, float* stage) {
  const int t = threadIdx.x % 128;
  const float4* src = reinterpret_cast<const float4*>(slot) + t;
  const u32 dst = smem_u32(reinterpret_cast<float4*>(stage) + t);
#pragma unroll 1
  for (int i = 0; i < R / 4; ++i) cp_async_16(dst + i * 128 * 16, src + i * 128);  // a rolled loop: two pointers live
  cp_async_wait_all();
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    // volatile: the shared loads stay in program order, two in flight at most (hoisted
    // together they would need as many registers again as the accumulators)
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(dst + i * 128 * 16));
    acc[4 * i] += v.x; acc[4 * i + 1] += v.y; acc[4 * i + 2] += v.z; acc[4 * i + 3] += v.w;
  }
}
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

// A later piece (one consumer warpgroup's fragment): to this CTA's slot, then its flag.
// `named_barrier`: this warpgroup's own (128 threads).
template <int BM, int BN, int CONSUMERS, int R>
GL_DEVICE void fixup_publish(const float (&acc)[R], const FixupSlots<BM, BN, CONSUMERS>& fx, int cta, int cw,
                             u32 named_barrier) {
  store_slot(acc, fx.slot(cta, cw));
  __threadfence();
  named_barrier_sync(named_barrier, 128);
  if (threadIdx.x % 128 == 0) flag_raise(fx.flag(cta, cw));
}
// The owner: the pieces of CTAs cta + 1 .. last_cta added in CTA order. Each of those CTAs
// holds a piece of the tile: the deal gives every CTA a non-empty run. STAGED: read the slots
// through `stage`, this consumer's 64 x N fp32 of idle shared memory (add_slot_staged);
// else straight into registers.
template <bool STAGED = false, int BM, int BN, int CONSUMERS, int R>
GL_DEVICE void fixup_collect(float (&acc)[R], const FixupSlots<BM, BN, CONSUMERS>& fx, int cta, int last_cta, int cw,
                             u32 named_barrier, float* stage = nullptr) {
  for (int q = cta + 1; q <= last_cta; ++q) {
    int* flag = fx.flag(q, cw);
    if (threadIdx.x % 128 == 0) flag_wait(flag, q);
    named_barrier_sync(named_barrier, 128);
    if constexpr (STAGED)
      add_slot_staged(acc, fx.slot(q, cw), stage);
    else
      add_slot(acc, fx.slot(q, cw));
    named_barrier_sync(named_barrier, 128);  // all have read: the flag goes down for the next launch
    if (threadIdx.x % 128 == 0) flag_lower(flag);
  }
}
