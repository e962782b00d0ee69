// Step A4 — ping-pong. Forced move: the softmax on the tensor core's critical path.
// In A3 both consumers reach their softmax at about the same time, and while they compute
// exponentials the tensor core has nothing queued. Now an ordered barrier (gl_pipeline.cuh's
// OrderedBarrier, the GEMM's step 10) makes the two consumers take turns issuing MMAs, and a
// turn issues one block's P V together with the next block's Q K^T: while consumer 0 runs
// its softmax, consumer 1's two MMAs occupy the tensor core, and the other way round. The loop
// is A3's, rotated so that the MMAs issued back to back sit inside one turn.
#include "attn_warpspec.cuh"

struct SharedStorage : WsTiles {
  OrderedBarrier<CONSUMERS> turns;  // turn[c]: consumer c may issue its MMAs
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "AttnStep.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_a4_pingpong(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                 const __grid_constant__ CUtensorMap tmap_v, u16* out, float* lse, int Sq, int Sk, int Hq, int group,
                 int tiles, float scale_log2) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_q, &tmap_k, &tmap_v);
  if (threadIdx.x == 0) {
    s.init();
    s.turns.init(4);  // ping-pong: one arrival per warp of the consumer passing the turn
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
      // ping-pong: the first block's Q K^T in a turn of its own
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
      if (t.blocks == 1) me.release_q(s);
      softmax_block(sm, sc, 0, rows0, Sk, scale_log2, corr, tr);  // O is still zero: nothing to rescale
      to_operand(p, sc);
      for (int j = 0; j < t.blocks; ++j) {
        const bool next = j + 1 < t.blocks;
        turn.wait_turn(j + 1);  // ping-pong: this block's P V and the next block's Q K^T, back to back
        wgmma_fence();
        mma_pv(o, p, me.wait_v(s, j));
        wgmma_commit();
        trace_mma(tr, EV_MMA_ISSUE, BAR_V_FULL, j);
        if (next) {
          mma_qk(sc, s.q[cw], me.wait_k(s, j + 1));
          wgmma_commit();
          trace_mma(tr, EV_MMA_ISSUE, BAR_K_FULL, j + 1);
        }
        turn.pass_turn(me.warp_leader, j + 1);
        wgmma_wait<0>();  // the other consumer's MMAs run while this one waits, then computes
        fence_acc(o);
        fence_acc(sc);
        trace_mma(tr, EV_MMA_DONE, BAR_V_FULL, j);  // Q K^T_{j+1} retired by the same wait
        fence_operand(p);
        me.release_v(j);
        if (next) {
          me.release_k(j + 1);
          if (j + 2 == t.blocks) me.release_q(s);
          softmax_block(sm, sc, j + 1, rows0, Sk, scale_log2, corr, tr);
          rescale_o(o, corr);
          to_operand(p, sc);
        }
      }
      store_rows(o, sm, scale_log2, out, lse, Sq, Hq, t);
    }
    tr.finish();
  }
}
