// Step A5 — intra-warpgroup pipelining. Forced move: the wait between Q K^T and its softmax.
// In A4 a consumer issues P V_j and Q K^T_{j+1}, then waits for both before its softmax of
// block j+1, so its own P V_j stands between the scores and the exponentials. Now the next
// block's Q K^T is issued first and waited for alone (wait_group 1): the softmax of block j+1
// runs while P V_j is still on the tensor core. P V_j reads the probabilities of block j from
// registers, so block j+1's scores need registers of their own (s_next), and O is rescaled
// only once P V_j has retired. The turns are A4's.
#include "attn_warpspec.cuh"

struct SharedStorage : WsTiles {
  Turns turns;  // turn[c]: consumer c may issue its MMAs
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "AttnStep.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_a5_intra_overlap(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                      const __grid_constant__ CUtensorMap tmap_v, u16* out, float* lse, int Sq, int Sk, int Hq,
                      int group, int tiles, float scale_log2, int* tile_counter, int section) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_q, &tmap_k, &tmap_v);
  if (threadIdx.x == 0) {
    s.init();
    s.turns.init(4);  // one arrival per warp of the consumer passing the turn
    fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup_idx() == 0) {  // ── PRODUCER ─────────────────────────────────────────────
    setmaxnreg_dec<PRODUCER_REGS>();
    if (warp_idx() == 0 && elect_one()) s.produce(&tmap_q, &tmap_k, &tmap_v, AttnWalk(Sq, Sk, Hq, group, tiles, section),
                                                        tile_counter);
  } else {  // ── CONSUMERS ─────────────────────────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;
    Tracer tr(ROLE_CONSUMER, 1 + cw, threadIdx.x % 128 == 0);
    Consumer me(s, cw, tr);
    const AttnWalk walk(Sq, Sk, Hq, group, tiles, section);  // the producer's order
    auto turn = s.turns.member(cw, tr);
    float sc[BN / 2];
    u32 p[BN / 16][4];
    float corr[2];
    for (int i = blockIdx.x; (i = me.next_tile(s, i)) < walk.tiles; i += gridDim.x) {
      const AttnTile t = walk.tile(i);
      tr.event(EV_TILE_BEGIN, 0, 0, 0, 0, i);
      const int rows0 = t.q0 + cw * WG_ROWS;
      OnlineSoftmax sm(rows0);
      float o[HEAD_D / 2];
      zero_acc(o);
      me.wait_q(s);
      BlockRecord first = me.block(0, BLOCK_TURN | BLOCK_K | BLOCK_QK_ISSUE | BLOCK_QK_DONE | BLOCK_SOFTMAX);
      first.wait_turn(turn);
      wgmma_fence();
      mma_qk(sc, s.q[cw], me.wait_k(s, first));
      wgmma_commit();
      first.span(QK_ISSUED);
      first.pass_turn(turn, me.warp_leader);
      wgmma_wait<0>();
      fence_acc(sc);
      first.span(QK_RETIRED);
      me.release_k(first);
      softmax_block(sm, sc, 0, rows0, Sk, scale_log2, corr, first);
      first.write();
      to_operand(p, sc);
      // The loop issues Q K^T_{j+1} unconditionally (a wgmma group count that depends on a branch
      // makes ptxas serialize every wgmma of the kernel): the last block's P V follows it alone.
      const int last = t.blocks - 1;
      if (last == 0) me.release_q(s);
      for (int j = 0; j < last; ++j) {
        BlockRecord rec = me.block(j + 1, BLOCK_TURN | BLOCK_K | BLOCK_QK_ISSUE | BLOCK_QK_DONE | BLOCK_SOFTMAX |
                                              BLOCK_V | BLOCK_PV | BLOCK_V_LAG);
        rec.wait_turn(turn);
        wgmma_fence();
        mma_qk(sc, s.q[cw], me.wait_k(s, rec));  // intra-warpgroup: the next block's scores first
        wgmma_commit();
        rec.span(QK_ISSUED);
        mma_pv(o, p, me.wait_v(s, rec));
        wgmma_commit();
        rec.span(PV_ISSUED);
        rec.pass_turn(turn, me.warp_leader);
        wgmma_wait<1>();  // intra-warpgroup: Q K^T_{j+1} retired, P V_j may still run
        fence_acc(sc);
        rec.span(QK_RETIRED);
        me.release_k(rec);
        if (j + 1 == last) me.release_q(s);
        softmax_block(sm, sc, j + 1, rows0, Sk, scale_log2, corr, rec);  // under P V_j
        wgmma_wait<0>();
        fence_acc(o);
        rec.span(PV_RETIRED);
        fence_operand(p);
        me.release_v(rec);
        rescale_o(o, corr);  // only now: P V_j accumulated at the old scale
        to_operand(p, sc);
        rec.write();
      }
      BlockRecord last_pv = me.block(last + 1, BLOCK_TURN | BLOCK_V | BLOCK_PV | BLOCK_V_LAG);
      last_pv.wait_turn(turn);
      wgmma_fence();
      mma_pv(o, p, me.wait_v(s, last_pv));
      wgmma_commit();
      last_pv.span(PV_ISSUED);
      last_pv.pass_turn(turn, me.warp_leader);
      wgmma_wait<0>();
      fence_acc(o);
      last_pv.span(PV_RETIRED);
      fence_operand(p);
      me.release_v(last_pv);
      last_pv.write();
      store_rows(o, sm, scale_log2, out, lse, Sq, Hq, t);
    }
    tr.finish();
  }
}
