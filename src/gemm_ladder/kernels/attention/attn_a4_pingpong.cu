// Step A4 — ping-pong. Forced move: the softmax on the tensor core's critical path.
// In A3 both consumers reach their softmax at about the same time, and while they compute
// exponentials the tensor core has nothing queued. Now an ordered barrier (gl_pipeline.cuh's
// OrderedBarrier, the GEMM's step 10) makes the two consumers take turns issuing MMAs, and a
// turn issues one block's P V together with the next block's Q K^T: while consumer 0 runs
// its softmax, consumer 1's two MMAs occupy the tensor core, and the other way round. The loop
// is A3's, rotated so that the MMAs issued back to back sit inside one turn.
#include "attn_warpspec.cuh"

struct SharedStorage : WsTiles {
  Turns turns;  // turn[c]: consumer c may issue its MMAs
};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "AttnStep.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_a4_pingpong(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                 const __grid_constant__ CUtensorMap tmap_v, u16* out, float* lse, int Sq, int Sk, int Hq, int group,
                 int tiles, float scale_log2, int* tile_counter, int section) {
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
      // ping-pong: the first block's Q K^T in a turn of its own
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
      if (t.blocks == 1) me.release_q(s);
      softmax_block(sm, sc, 0, rows0, Sk, scale_log2, corr, first);  // O is still zero: nothing to rescale
      first.write();
      to_operand(p, sc);
      for (int j = 0; j < t.blocks; ++j) {
        const bool next = j + 1 < t.blocks;
        // the turn, V_j and P V_j, and with a next block its K, Q K^T and softmax (Q K^T_{j+1}
        // retires with P V_j's wait: no retirement of its own)
        BlockRecord rec = me.block(j + 1, BLOCK_TURN | BLOCK_V | BLOCK_PV | BLOCK_V_LAG |
                                              (next ? BLOCK_K | BLOCK_QK_ISSUE | BLOCK_SOFTMAX : 0u));
        rec.wait_turn(turn);  // ping-pong: this block's P V and the next block's Q K^T, back to back
        wgmma_fence();
        mma_pv(o, p, me.wait_v(s, rec));
        wgmma_commit();
        rec.span(PV_ISSUED);
        if (next) {
          mma_qk(sc, s.q[cw], me.wait_k(s, rec));
          wgmma_commit();
          rec.span(QK_ISSUED);
        }
        rec.pass_turn(turn, me.warp_leader);
        wgmma_wait<0>();  // the other consumer's MMAs run while this one waits, then computes
        fence_acc(o);
        fence_acc(sc);
        rec.span(PV_RETIRED);  // Q K^T_{j+1} retired by the same wait
        fence_operand(p);
        me.release_v(rec);
        if (next) {
          me.release_k(rec);
          if (j + 2 == t.blocks) me.release_q(s);
          softmax_block(sm, sc, j + 1, rows0, Sk, scale_log2, corr, rec);
          rescale_o(o, corr);
          to_operand(p, sc);
        }
        rec.write();
      }
      store_rows(o, sm, scale_log2, out, lse, Sq, Hq, t);
    }
    tr.finish();
  }
}
