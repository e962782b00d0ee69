// attn_warpspec.cuh — the warp-specialized attention CTA (A3-A5): a producer warpgroup whose
// one thread loads a tile's Q and then its K and V blocks through their own rings, and two
// consumer warpgroups of 64 query rows each. The steps differ only in their consumers' loop.
// A CTA takes tiles blockIdx.x, + gridDim.x, ...: one, in the ladder's grid of every tile, or
// several in the library's persistent grid (a CTA per SM), where the next tile's Q and first
// K/V blocks load while the consumers finish the last one. The dynamic walk (the library's
// A5:d builds): past the grid's first tiles, a CTA's next tile is the next one no CTA has taken,
// from a counter; causal tiles differ in length, and a fixed walk drifts apart. Its producer
// takes the tile and publishes its number with the tile's Q; the consumers follow.
#pragma once
#include "attn_common.cuh"
#include "gl_pipeline.cuh"

#ifndef GL_ATTN_CONSUMERS
#error "a warp-specialized attention step takes GL_ATTN_CONSUMERS from families/attention.py"
#endif
#ifndef GL_ATTN_DYNAMIC
#error "a warp-specialized attention step takes GL_ATTN_DYNAMIC (its walk) from families/attention.py"
#endif
constexpr bool DYNAMIC_WALK = GL_ATTN_DYNAMIC;
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
using Turns = OrderedBarrier<CONSUMERS>;  // ping-pong (A4, A5)
static_assert(DEPTH <= 16, "a block record holds a ring's stage in 4 bits");

// The walk's order, shared by the producer and the consumers: attn_tile's arguments taken once
// (the dynamic walk's sections of `section` (batch, head) pairs; the fixed walk's one head at a
// time), so both sides name each tile the same way.
struct AttnWalk {
  int Sq, Sk, Hq, group, tiles, section, pairs;
  GL_DEVICE AttnWalk(int Sq_, int Sk_, int Hq_, int group_, int tiles_, int section_)
      : Sq(Sq_), Sk(Sk_), Hq(Hq_), group(group_), tiles(tiles_), section(DYNAMIC_WALK ? section_ : 1),
        pairs(tiles_ / ceil_div(Sq_, BM)) {}
  GL_DEVICE AttnTile tile(int i) const { return attn_tile(i, BM, Sq, Sk, Hq, group, section, pairs); }
};

// The tiles and barriers every warp-specialized step has.
struct WsTiles {
  QTile q[CONSUMERS];  // consumer c's 64 rows
  KvTile k[DEPTH];
  KvTile v[DEPTH];
  KRing kr;  // k_full[s]: key block in stage s; k_empty[s]: both consumers' Q K^T retired
  VRing vr;  // v_full[s], v_empty[s]: the same for value blocks and P V
  u64 q_full;   // a tile's query rows landed
  u64 q_empty;  // the consumers' last Q K^T of the tile retired: the next tile's Q may land
  int tile;     // the dynamic walk: the tile whose Q q_full announces (past the last: the end)

  // One thread, before the CTA barrier that publishes them.
  GL_DEVICE void init() {
    kr.init(1, CONSUMER_WARPS);  // the producer's arrive.expect_tx; every consumer warp
    vr.init(1, CONSUMER_WARPS);
    mbar_init(&q_full, 1);
    mbar_init(&q_empty, CONSUMER_WARPS);
  }

  // The producer: per tile, Q (every consumer's rows on one barrier), then each key block's K
  // and V; the rings run on across tiles. The dynamic walk takes each next tile from `counter`
  // (one atomicAdd a tile) in attn_tile's order with `section` pairs per section, once this
  // tile's loads are issued: the CTA holds no reservation while it has a whole tile to run, and
  // the atomic's round trip passes under the wait for the consumers to free the Q buffer.
  GL_DEVICE void produce(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv, const AttnWalk& walk,
                         int* counter) {
    Tracer tr(ROLE_PRODUCER, 0, true);
    const auto kp = kr.bind(tr, KvTile::BYTES);
    const auto vp = vr.bind(tr, KvTile::BYTES);
    auto ks = KRing::State::producer();
    auto vs = GL_ABLATE_V_RING_PHASE ? VRing::State::consumer() : VRing::State::producer();  // the what-if: phase 0
    auto qs = PipelineState<1>::producer();  // the Q buffer: a ring of one
    for (int i = blockIdx.x, next; i < walk.tiles; i = next) {
      if (!DYNAMIC_WALK) next = i + (int)gridDim.x;
      const AttnTile t = walk.tile(i);
      traced_wait(&q_empty, BAR_Q_EMPTY, 0, qs.phase, 0, tr);
      qs.advance();
      if (DYNAMIC_WALK) atomicExch(&tile, i);  // q_full's arrive releases it to the consumers' wait (an atomic:
                                               // racecheck does not see the mbarrier order the handoff)
      mbar_arrive_expect_tx(&q_full, CONSUMERS * QTile::BYTES);
#pragma unroll
      for (int c = 0; c < CONSUMERS; ++c) q[c].load(tq, &q_full, t.q0 + c * WG_ROWS, t.head, t.batch);
      for (int j = 0; j < t.blocks; ++j) {
        KTileStamps ts;  // traced: each stage one record, as the GEMM's producer (gl_trace.cuh)
        kp.producer_acquire_stamped(ks, ts);
        k[ks.stage].load(tk, kp.producer_barrier(ks), j * BN, t.kv_head, t.batch);
        ts.issued = tr.stamp();
        kp.record_stage_load(ts, ks, j, 0);
        ks.advance();
        vp.producer_acquire_stamped(vs, ts);
        v[vs.stage].load(tv, vp.producer_barrier(vs), j * BN, t.kv_head, t.batch);
        ts.issued = tr.stamp();
        vp.record_stage_load(ts, vs, j, 0);
        vs.advance();
      }
      if (DYNAMIC_WALK) next = (int)gridDim.x + atomicAdd(counter, 1);
    }
    if (DYNAMIC_WALK) {  // the end: once the last tile's Q is handed back, a phase with no bytes
      traced_wait(&q_empty, BAR_Q_EMPTY, 0, qs.phase, 0, tr);
      atomicExch(&tile, walk.tiles);
      mbar_arrive(&q_full);
    }
    tr.finish();
  }
};

// A consumer's key block as one trace record (EV_ATTN_BLOCK, four slots; gl_trace.cuh). The
// loop used to record up to fifteen events a block, each a branch around a store, and its
// traced builds ran 12-28 % slower; now it takes clock stamps (%clock, one instruction each)
// and writes them at the block's end in four predicated stores. The decoder
// (choreography/trace.py: expand_attn_block) expands the record into those events. Its
// sixteen 32-bit words (a slot's first word in the low half):
//    0 K's wait begins    1 ends               2 EV_ATTN_BLOCK | k << 8 | flags << 24
//    3 where | cycles from K's wait's end to Q K^T's issue << 16 (saturated)
//    4 Q K^T retired      5 K released         6 softmax begins     7 ends
//    8 V's wait begins    9 ends              10 P V retired       11 V released
//   12 turn's wait begins 13 ends             14 turn passed       15 cycles from V's wait's end to P V's issue
// where: K's stage (bits 0-3) and phase (4), V's (5-8, 9), the turn's group (10-11) and the
// phase it waits for (12), the group it passes to (13-14) and its phase then (15). k: the
// block of K, Q K^T, the softmax and the turn; V's is k - 1 with BLOCK_V_LAG, else k. The flags
// (GlBlockFlag) say which events the block has; at head dim 256 none of the MMAs or softmax.
// Untraced, the record holds nothing and its calls compile to nothing: the kernel is the same
// instruction for instruction (a record that held stamps, even unused, reordered its code).
enum BlockStamp {
  K_WAIT, K_WAITED, QK_ISSUED, QK_RETIRED, K_RELEASED, SOFTMAX_BEGIN, SOFTMAX_END,
  V_WAIT, V_WAITED, PV_ISSUED, PV_RETIRED, V_RELEASED, TURN_WAIT, TURN_WAITED, TURN_PASSED, BLOCK_STAMPS
};
struct BlockRecord {
#if GL_TRACE
  Tracer& tr;
  u32 info, where;
  u32 at[BLOCK_STAMPS] = {};  // the stamps (%clock) of the events the block has; the rest stay 0
#endif

  GL_DEVICE BlockRecord(Tracer& tr_, u32 k, u32 flags, u32 rings)
#if GL_TRACE
      : tr(tr_), info(EV_ATTN_BLOCK | (k & 0xffffu) << 8 | recorded(flags) << 24), where(rings)
#endif
  {
#if !GL_TRACE
    (void)tr_; (void)k; (void)flags; (void)rings;
#endif
  }
  // The flags of the events recorded: at head dim 256 none of the MMAs' or the softmax's.
  static GL_DEVICE u32 recorded(u32 flags) {
    return TRACE_SPANS ? flags : flags & ~(u32)(BLOCK_QK_ISSUE | BLOCK_QK_DONE | BLOCK_SOFTMAX | BLOCK_PV);
  }
  GL_DEVICE void stamp(BlockStamp s) {
#if GL_TRACE
    at[s] = tr.stamp();
#else
    (void)s;
#endif
  }
  // An MMA's or the softmax's stamp (TRACE_SPANS).
  GL_DEVICE void span(BlockStamp s) {
    if constexpr (TRACE_SPANS) stamp(s);
  }
  GL_DEVICE void wait_turn(Turns::Member& turn) {
#if GL_TRACE
    where |= (u32)turn.group << 10 | turn.st.phase << 12 | (u32)turn.next_group() << 13;
    turn.wait_turn_stamped(at[TURN_WAIT], at[TURN_WAITED]);
    where |= turn.st.phase << 15;
#else
    turn.wait_turn();  // untraced: the call it always was
#endif
  }
  GL_DEVICE void pass_turn(const Turns::Member& turn, bool arriving) {
    turn.pass_turn<false>(arriving);
    stamp(TURN_PASSED);
  }
  GL_DEVICE void write() {
#if GL_TRACE
    const auto sat16 = [](u32 c) { return c < 0xffffu ? c : 0xffffu; };
    const auto part = [&](BlockStamp a, BlockStamp b) { return Tracer::words(at[a], at[b]); };
    tr.record4({part(K_WAIT, K_WAITED), Tracer::words(info, where | sat16(at[QK_ISSUED] - at[K_WAITED]) << 16),
                part(QK_RETIRED, K_RELEASED), part(SOFTMAX_BEGIN, SOFTMAX_END),
                part(V_WAIT, V_WAITED), part(PV_RETIRED, V_RELEASED),
                part(TURN_WAIT, TURN_WAITED), Tracer::words(at[TURN_PASSED], sat16(at[PV_ISSUED] - at[V_WAITED]))});
#endif
  }
};

// The softmax step of a block, stamped for its record.
GL_DEVICE void softmax_block(OnlineSoftmax& sm, float (&sc)[BN / 2], int j, int rows0, int Sk, float scale_log2,
                             float (&corr)[2], BlockRecord& rec) {
  rec.span(SOFTMAX_BEGIN);
  softmax_step(sm, sc, j, rows0, Sk, scale_log2, corr);
  rec.span(SOFTMAX_END);
}

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

  // The tile's query rows; handed back once the tile's last Q K^T has retired. The dynamic
  // walk waited for them in next_tile.
  GL_DEVICE void wait_q(WsTiles& s) {
    if (DYNAMIC_WALK) return;
    traced_wait(&s.q_full, BAR_Q_FULL, 0, qs.phase, 0, kp.tr);
    qs.advance();
  }
  // The consumers' walk: tile i of the fixed walk (blockIdx.x, + gridDim.x, ...); in the
  // dynamic walk the tile whose Q the producer announced (>= tiles: the end), read by lane 0
  // and broadcast, so that ptxas knows the loops it bounds are warp-uniform. The wait is a
  // plain spin, untraced and unbounded in debug builds too: with the tracer's events or the
  // debug timeout around it ptxas put the MMAs the tile bounds on a divergent path and
  // serialized them. It ends when the producer moves on, and a stalled producer times out
  // (and is named) in its own debug waits.
  GL_DEVICE int next_tile(WsTiles& s, int i) {
    if (!DYNAMIC_WALK) return i;
    const u32 q_full = smem_u32(&s.q_full);
    while (!mbar_try_wait(q_full, qs.phase)) {
    }
    qs.advance();
    const int mine = lane_idx() == 0 ? atomicAdd(&s.tile, 0) : 0;  // lane 0 reads (an atomic: see produce)
    return __shfl_sync(0xffffffffu, mine, 0);
  }
  GL_DEVICE void release_q(WsTiles& s) {
    if (warp_leader) mbar_arrive(&s.q_empty);
  }

  // The record of key block k (K's; V's with BLOCK_V_LAG the one before): the rings' stages and
  // phases it will wait on are where the consumer's states stand now.
  GL_DEVICE BlockRecord block(int k, u32 flags) const {
    return BlockRecord(kp.tr, (u32)k, flags,
                       (kp.first + ks.stage) | ks.phase << 4 | (vp.first + vs.stage) << 5 | vs.phase << 9);
  }
  // The next key block's K (for Q K^T: the caller issues, commits and waits), and its release.
  GL_DEVICE const KvTile& wait_k(WsTiles& s, BlockRecord& rec) {
    rec.stamp(K_WAIT);
    kp.consumer_wait_unrecorded(ks);
    rec.stamp(K_WAITED);
    return s.k[ks.stage];
  }
  GL_DEVICE void release_k(BlockRecord& rec) {
    if (warp_leader) kp.consumer_release_for<false>(ks, 1);
    rec.stamp(K_RELEASED);
    ks.advance();
  }
  GL_DEVICE const KvTile& wait_v(WsTiles& s, BlockRecord& rec) {
    rec.stamp(V_WAIT);
    vp.consumer_wait_unrecorded(vs);
    rec.stamp(V_WAITED);
    return s.v[vs.stage];
  }
  GL_DEVICE void release_v(BlockRecord& rec) {
    if (warp_leader) vp.consumer_release_for<false>(vs, 1);
    rec.stamp(V_RELEASED);
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
