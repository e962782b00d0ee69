// Step A2 — fused attention, online softmax. Forced move: S in memory.
// A1 writes the B·H·Sq·Sk scores to memory, reads them for the softmax, writes P, and reads P
// again for P·V: at long sequences the bytes, not the FLOPs, set its time. Now one warpgroup
// owns 64 query rows and walks the keys in blocks of BN: S = Q K^T stays in its registers,
// a running max and sum per row rescale what O has gathered so far (the online softmax), and
// the probabilities, converted to 16 bits in place, are the second wgmma's register operand.
// K and V blocks arrive through a TMA ring (step 5's lockstep ring: one team loads and
// computes in turn). Nothing of size Sq·Sk exists anywhere.
#include "attn_common.cuh"
#include "gl_pipeline.cuh"

constexpr int BM = WG_ROWS;  // one warpgroup: 64 query rows per CTA
using KvRing = LockstepPipeline<DEPTH>;

struct SharedStorage {
  QTile q;
  KvTile k[DEPTH];
  KvTile v[DEPTH];
  KvRing ring;  // full[s]: block's K and V landed in stage s
  u64 q_full;   // the query tile landed
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "AttnStep.dynamic_smem is too small");

// Key block `j` into the ring's next stage (the leader, in the order the team drains them).
GL_DEVICE void load_kv(SharedStorage& s, const KvRing::Port& ring, PipelineState<DEPTH>& ld, const CUtensorMap* tk,
                       const CUtensorMap* tv, int j, const AttnTile& t) {
  ring.producer_acquire(ld);
  s.k[ld.stage].load(tk, ring.producer_barrier(ld), j * BN, t.kv_head, t.batch);
  s.v[ld.stage].load(tv, ring.producer_barrier(ld), j * BN, t.kv_head, t.batch);
  ring.tr.event(EV_LOAD_ISSUE, BAR_FULL, ld.stage, ld.phase, j);
  ld.advance();
}

extern "C" __global__ void __launch_bounds__(128, 1)
attn_a2_fused(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
              const __grid_constant__ CUtensorMap tmap_v, u16* out, float* lse, int Sq, int Sk, int Hq, int group,
              int tiles, float scale_log2) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  const AttnTile t = attn_tile(blockIdx.x, BM, Sq, Sk, Hq, group);  // a CTA per tile
  (void)tiles;
  const bool leader = threadIdx.x == 0;
  Tracer tr(ROLE_TEAM, 0, leader);

  if (leader) {
    tma_prefetch_descriptors(&tmap_q, &tmap_k, &tmap_v);
    s.ring.init();
    mbar_init(&s.q_full, 1);
    fence_barrier_init();
  }
  __syncthreads();
  const auto ring = s.ring.bind(tr, 2 * KvTile::BYTES);  // a stage: one block of K and one of V
  auto ld = KvRing::producer_state();
  if (leader) {
    mbar_arrive_expect_tx(&s.q_full, QTile::BYTES);
    s.q.load(&tmap_q, &s.q_full, t.q0, t.head, t.batch);
    for (int j = 0; j < DEPTH && j < t.blocks; ++j) load_kv(s, ring, ld, &tmap_k, &tmap_v, j, t);
  }

  OnlineSoftmax sm(t.q0);
  float o[HEAD_D / 2];
  zero_acc(o);
  float sc[BN / 2];
  u32 p[BN / 16][4];
  auto rd = KvRing::State::consumer();
  mbar_wait(&s.q_full, 0, ROLE_TEAM, BAR_Q_FULL, 0);
  for (int j = 0; j < t.blocks; ++j) {
    ring.consumer_wait(rd, j);
    wgmma_fence();
    mma_qk(sc, s.q, s.k[rd.stage]);
    wgmma_commit();
    trace_mma(tr, EV_MMA_ISSUE, BAR_K_FULL, j);
    wgmma_wait<0>();
    fence_acc(sc);
    trace_mma(tr, EV_MMA_DONE, BAR_K_FULL, j);
    float corr[2];
    softmax_block(sm, sc, j, t.q0, Sk, scale_log2, corr, tr);
    rescale_o(o, corr);
    to_operand(p, sc);
    wgmma_fence();
    mma_pv(o, p, s.v[rd.stage]);
    wgmma_commit();
    trace_mma(tr, EV_MMA_ISSUE, BAR_V_FULL, j);
    wgmma_wait<0>();
    fence_acc(o);
    trace_mma(tr, EV_MMA_DONE, BAR_V_FULL, j);
    __syncthreads();  // the team is done with the stage: the leader may refill it
    if (leader && j + DEPTH < t.blocks) load_kv(s, ring, ld, &tmap_k, &tmap_v, j + DEPTH, t);
    rd.advance();
  }
  store_rows(o, sm, scale_log2, out, lse, Sq, Hq, t);
  tr.finish();
}
