// attn_warpspec.cuh — the warp-specialized attention CTA (A3-A5): a producer warpgroup whose
// one thread loads a tile's Q and then its K and V blocks through their own rings, and two
// consumer warpgroups of 64 query rows each. The steps differ only in their consumers' loop.
// A CTA takes tiles blockIdx.x, + gridDim.x, ...: one, in the ladder's grid of every tile, or
// several in the library's persistent grid (a CTA per SM), where the next tile's Q and first
// K/V blocks load while the consumers finish the last one.
#pragma once
#include "attn_common.cuh"
#include "gl_pipeline.cuh"

#ifndef GL_ATTN_CONSUMERS
#error "a warp-specialized attention step takes GL_ATTN_CONSUMERS from families/attention.py"
#endif
constexpr int CONSUMERS = GL_ATTN_CONSUMERS;  // two (the ladder), or three at head dim 64 (the library)
static_assert(CONSUMERS == 2 || CONSUMERS == 3, "two or three consumer warpgroups");
constexpr int BM = WG_ROWS * CONSUMERS;  // query rows per CTA
constexpr u32 THREADS = 128 * (1 + CONSUMERS);
// The producer's one thread needs few registers; the consumers hold O (D / 2 floats), S
// (BN / 2) and P (BN / 4): 128 x 24 + 256 x 240 <= 64K, or 128 x 24 + 384 x 160.
constexpr u32 PRODUCER_REGS = 24, CONSUMER_REGS = CONSUMERS == 2 ? 240 : 160;
constexpr u32 CONSUMER_WARPS = 4 * CONSUMERS;  // every consumer warp releases a stage it read
// Separate rings: V's load is not held up by K's stage (it lands under Q K^T), and a consumer
// releases K as soon as Q K^T retires, before its softmax.
using KRing = Pipeline<DEPTH, 1, BAR_K_FULL, BAR_K_EMPTY>;
using VRing = Pipeline<DEPTH, 1, BAR_V_FULL, BAR_V_EMPTY>;

// The tiles and barriers every warp-specialized step has.
struct WsTiles {
  QTile q[CONSUMERS];  // consumer c's 64 rows
  KvTile k[DEPTH];
  KvTile v[DEPTH];
  KRing kr;  // k_full[s]: key block in stage s; k_empty[s]: both consumers' Q K^T retired
  VRing vr;  // v_full[s], v_empty[s]: the same for value blocks and P V
  u64 q_full;   // a tile's query rows landed
  u64 q_empty;  // the consumers' last Q K^T of the tile retired: the next tile's Q may land

  // One thread, before the CTA barrier that publishes them.
  GL_DEVICE void init() {
    kr.init(1, CONSUMER_WARPS);  // the producer's arrive.expect_tx; every consumer warp
    vr.init(1, CONSUMER_WARPS);
    mbar_init(&q_full, 1);
    mbar_init(&q_empty, CONSUMER_WARPS);
  }

  // The producer: per tile, Q (every consumer's rows on one barrier), then each key block's K
  // and V; the rings run on across tiles.
  GL_DEVICE void produce(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv, int Sq, int Sk, int Hq,
                         int group, int tiles) {
    Tracer tr(ROLE_PRODUCER, 0, true);
    const auto kp = kr.bind(tr, KvTile::BYTES);
    const auto vp = vr.bind(tr, KvTile::BYTES);
    auto ks = KRing::State::producer();
    auto vs = GL_ABLATE_V_RING_PHASE ? VRing::State::consumer() : VRing::State::producer();  // the what-if: phase 0
    auto qs = PipelineState<1>::producer();  // the Q buffer: a ring of one
    for (int i = blockIdx.x; i < tiles; i += gridDim.x) {
      const AttnTile t = attn_tile(i, BM, Sq, Sk, Hq, group);
      traced_wait(&q_empty, BAR_Q_EMPTY, 0, qs.phase, 0, tr);
      qs.advance();
      mbar_arrive_expect_tx(&q_full, CONSUMERS * QTile::BYTES);
#pragma unroll
      for (int c = 0; c < CONSUMERS; ++c) q[c].load(tq, &q_full, t.q0 + c * WG_ROWS, t.head, t.batch);
      for (int j = 0; j < t.blocks; ++j) {
        kp.producer_acquire(ks, j);
        k[ks.stage].load(tk, kp.producer_barrier(ks), j * BN, t.kv_head, t.batch);
        tr.event(EV_LOAD_ISSUE, BAR_K_FULL, ks.stage, ks.phase, j);
        ks.advance();
        vp.producer_acquire(vs, j);
        v[vs.stage].load(tv, vp.producer_barrier(vs), j * BN, t.kv_head, t.batch);
        tr.event(EV_LOAD_ISSUE, BAR_V_FULL, vs.stage, vs.phase, j);
        vs.advance();
      }
    }
    tr.finish();
  }
};

// A consumer warpgroup's view: its rows, the two rings' ports (recorded by its tracer) and states.
struct Consumer {
  int cw;  // which 64 rows of the CTA's 128
  bool warp_leader;
  KRing::Port kp;
  VRing::Port vp;
  KRing::State ks;
  VRing::State vs;
  PipelineState<1> qs;

  GL_DEVICE Consumer(WsTiles& s, int cw_, Tracer& tr)
      : cw(cw_), warp_leader(lane_idx() == 0), kp(s.kr.bind(tr)), vp(s.vr.bind(tr)),
        ks(KRing::State::consumer()), vs(VRing::State::consumer()), qs(PipelineState<1>::consumer()) {}

  // The tile's query rows; handed back once the tile's last Q K^T has retired.
  GL_DEVICE void wait_q(WsTiles& s) {
    traced_wait(&s.q_full, BAR_Q_FULL, 0, qs.phase, 0, kp.tr);
    qs.advance();
  }
  GL_DEVICE void release_q(WsTiles& s) {
    if (warp_leader) mbar_arrive(&s.q_empty);
  }

  // S = Q K^T of the next key block, issued (the caller commits and waits).
  GL_DEVICE const KvTile& wait_k(WsTiles& s, int j) {
    kp.consumer_wait(ks, j);
    return s.k[ks.stage];
  }
  GL_DEVICE void release_k(int j) {
    if (warp_leader) kp.consumer_release(ks, j);
    ks.advance();
  }
  GL_DEVICE const KvTile& wait_v(WsTiles& s, int j) {
    vp.consumer_wait(vs, j);
    return s.v[vs.stage];
  }
  GL_DEVICE void release_v(int j) {
    if (warp_leader) vp.consumer_release(vs, j);
    vs.advance();
  }
};

// Keep the probabilities' registers live until the P V that reads them has retired.
GL_DEVICE void fence_operand(u32 (&p)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(p[kk][i])::"memory");
}
