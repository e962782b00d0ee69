// Step A3 — warp specialization. Forced move: one team loading and computing in turn.
// In A2 the warpgroup that computes also waits for every load it issued, and a stage is freed
// only when the whole team has passed a CTA barrier. Now the roles split (attn_warpspec.cuh):
// a producer warpgroup (setmaxnreg down) whose one thread loads a tile's Q and then walks K and V
// through their own rings, so V's load runs under Q K^T and K's stage is handed back as soon
// as Q K^T retires; two consumer warpgroups (setmaxnreg up) own 64 query rows each, so a CTA
// covers 128 rows and each K/V block is loaded once for both. Each consumer's loop is A2's.
#include "attn_warpspec.cuh"

struct SharedStorage : WsTiles {};
static_assert(sizeof(SharedStorage) + 1024 <= GL_DYNAMIC_SMEM, "AttnStep.dynamic_smem is too small");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_a3_warp_specialized(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                         const __grid_constant__ CUtensorMap tmap_v, u16* out, float* lse, int Sq, int Sk, int Hq,
                         int group, int tiles, float scale_log2, int* tile_counter, int section) {
  extern __shared__ u8 smem_raw[];
  SharedStorage& s = *reinterpret_cast<SharedStorage*>(align_1024(smem_raw));
  if (threadIdx.x == 32) tma_prefetch_descriptors(&tmap_q, &tmap_k, &tmap_v);
  if (threadIdx.x == 0) {
    s.init();
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
    float sc[BN / 2];
    u32 p[BN / 16][4];
    for (int i = blockIdx.x; (i = me.next_tile(s, i)) < walk.tiles; i += gridDim.x) {
      const AttnTile t = walk.tile(i);
      tr.event(EV_TILE_BEGIN, 0, 0, 0, 0, i);
      const int rows0 = t.q0 + cw * WG_ROWS;
      OnlineSoftmax sm(rows0);
      float o[HEAD_D / 2];
      zero_acc(o);
      me.wait_q(s);
      for (int j = 0; j < t.blocks; ++j) {
        BlockRecord rec = me.block(j, BLOCK_K | BLOCK_QK_ISSUE | BLOCK_QK_DONE | BLOCK_SOFTMAX | BLOCK_V | BLOCK_PV);
        const KvTile& k = me.wait_k(s, rec);
        wgmma_fence();
        mma_qk(sc, s.q[cw], k);
        wgmma_commit();
        rec.span(QK_ISSUED);
        wgmma_wait<0>();
        fence_acc(sc);
        rec.span(QK_RETIRED);
        me.release_k(rec);  // before the softmax: the producer refills K under it
        if (j == t.blocks - 1) me.release_q(s);
        float corr[2];
        softmax_block(sm, sc, j, rows0, Sk, scale_log2, corr, rec);
        rescale_o(o, corr);
        to_operand(p, sc);
        const KvTile& v = me.wait_v(s, rec);
        wgmma_fence();
        mma_pv(o, p, v);
        wgmma_commit();
        rec.span(PV_ISSUED);
        wgmma_wait<0>();
        fence_acc(o);
        rec.span(PV_RETIRED);
        fence_operand(p);
        me.release_v(rec);
        rec.write();
      }
      store_rows(o, sm, scale_log2, out, lse, Sq, Hq, t);
    }
    tr.finish();
  }
}
