// Step A5 — intra-warpgroup pipelining. Forced move: the wait between Q K^T and its softmax.
// In A4 a consumer issues P V_j and Q K^T_{j+1}, then waits for both before its softmax of
// block j+1, so its own P V_j stands between the scores and the exponentials. Now the next
// block's Q K^T is issued first and waited for alone (wait_group 1): the softmax of block j+1
// runs while P V_j is still on the tensor core. P V_j reads the probabilities of block j from
// registers, so block j+1's scores need registers of their own (s_next), and O is rescaled
// only once P V_j has retired. The turns are A4's.
#include "attn_warpspec.cuh"

struct SharedStorage : WsTiles {
  OrderedBarrier<CONSUMERS> turns;  // turn[c]: consumer c may issue its MMAs
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "AttnStep.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_a5_intra_overlap(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                      const __grid_constant__ CUtensorMap tmap_v, u16* out, float* lse, int Sq, int Sk, int Hq,
                      int group, int tiles, float scale_log2) {
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
    if (warp_idx() == 0 && elect_one()) s.produce(&tmap_q, &tmap_k, &tmap_v, Sq, Sk, Hq, group, tiles);
  } else {  // ── CONSUMERS ─────────────────────────────────────────────────────────────
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup_idx() - 1;
    Tracer tr(ROLE_CONSUMER, 1 + cw, threadIdx.x % 128 == 0);
    Consumer me(s, cw, tr);
    auto turn = s.turns.member(cw, tr);
    float sc[BN / 2];
    u32 p[BN / 16][4];
    float corr[2];
    for (int i = blockIdx.x; i < tiles; i += gridDim.x) {
      const AttnTile t = attn_tile(i, BM, Sq, Sk, Hq, group);
      tr.event(EV_TILE_BEGIN, 0, 0, 0, 0, i);
      const int rows0 = t.q0 + cw * WG_ROWS;
      OnlineSoftmax sm(rows0);
      float o[HEAD_D / 2];
      zero_acc(o);
      me.wait_q(s);
      turn.wait_turn(0);
      wgmma_fence();
      mma_qk(sc, s.q[cw], me.wait_k(s, 0));
      wgmma_commit();
      trace_mma(tr, EV_MMA_ISSUE, BAR_K_FULL, 0);
      turn.pass_turn(me.warp_leader, 0);
      wgmma_wait<0>();
      fence_acc(sc);
      trace_mma(tr, EV_MMA_DONE, BAR_K_FULL, 0);
      me.release_k(0);
      softmax_block(sm, sc, 0, rows0, Sk, scale_log2, corr, tr);
      to_operand(p, sc);
      // The loop issues Q K^T_{j+1} unconditionally (a wgmma group count that depends on a branch
      // makes ptxas serialize every wgmma of the kernel): the last block's P V follows it alone.
      const int last = t.blocks - 1;
      if (last == 0) me.release_q(s);
      for (int j = 0; j < last; ++j) {
        turn.wait_turn(j + 1);
        wgmma_fence();
        mma_qk(sc, s.q[cw], me.wait_k(s, j + 1));  // intra-warpgroup: the next block's scores first
        wgmma_commit();
        trace_mma(tr, EV_MMA_ISSUE, BAR_K_FULL, j + 1);
        mma_pv(o, p, me.wait_v(s, j));
        wgmma_commit();
        trace_mma(tr, EV_MMA_ISSUE, BAR_V_FULL, j);
        turn.pass_turn(me.warp_leader, j + 1);
        wgmma_wait<1>();  // intra-warpgroup: Q K^T_{j+1} retired, P V_j may still run
        fence_acc(sc);
        trace_mma(tr, EV_MMA_DONE, BAR_K_FULL, j + 1);
        me.release_k(j + 1);
        if (j + 1 == last) me.release_q(s);
        softmax_block(sm, sc, j + 1, rows0, Sk, scale_log2, corr, tr);  // under P V_j
        wgmma_wait<0>();
        fence_acc(o);
        trace_mma(tr, EV_MMA_DONE, BAR_V_FULL, j);
        fence_operand(p);
        me.release_v(j);
        rescale_o(o, corr);  // only now: P V_j accumulated at the old scale
        to_operand(p, sc);
      }
      turn.wait_turn(last + 1);
      wgmma_fence();
      mma_pv(o, p, me.wait_v(s, last));
      wgmma_commit();
      trace_mma(tr, EV_MMA_ISSUE, BAR_V_FULL, last);
      turn.pass_turn(me.warp_leader, last + 1);
      wgmma_wait<0>();
      fence_acc(o);
      trace_mma(tr, EV_MMA_DONE, BAR_V_FULL, last);
      fence_operand(p);
      me.release_v(last);
      store_rows(o, sm, scale_log2, out, lse, Sq, Hq, t);
    }
    tr.finish();
  }
}
