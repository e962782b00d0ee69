// gl_cluster.cuh — thread-block clusters (sm_90): a CTA's rank, the cluster-wide barrier,
// and arriving on an mbarrier in a peer CTA's shared memory.
#pragma once
#include "gl_common.cuh"

// This CTA's rank inside its cluster (0 .. cluster size - 1).
GL_DEVICE u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// How many CTAs the cluster has (1 without a cluster launch).
GL_DEVICE u32 cluster_size() {
  u32 n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}

// Every thread of every CTA of the cluster meets here. arrive.release publishes this thread's
// earlier writes (barrier inits, shared stores) to the cluster; wait.acquire sees the peers'.
// Not .aligned: threads of one warp may reach it from different branches.
GL_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n"
               "barrier.cluster.wait.acquire;" ::: "memory");
}

// Before a CTA of a cluster exits: its peers may still multicast into its shared memory or
// arrive on its barriers until their last k-tile, so nobody leaves before everybody is done.
// (The what-if GL_ABLATE_NO_EXIT_SYNC leaves it out.)
GL_DEVICE void cluster_sync_before_exit() {
  if constexpr (!GL_ABLATE_NO_EXIT_SYNC) cluster_sync();
}

// cluster_sync in its two halves, for a thread with work between them: arrive publishes what it
// wrote, and the others need not wait for what it does before its wait.
GL_DEVICE void cluster_arrive() { asm volatile("barrier.cluster.arrive.release;" ::: "memory"); }
GL_DEVICE void cluster_wait() { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }

// The shared::cluster address of the same variable in the CTA of rank `rank`.
GL_DEVICE u32 map_to_cta(const void* smem, u32 rank) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(smem)), "r"(rank));
  return remote;
}

// Read 16 bytes of a peer CTA's shared memory (address from map_to_cta): distributed shared
// memory, ordered after the peer's writes by a cluster_sync in between.
GL_DEVICE float4 ld_cluster_f4(u32 cluster_addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(cluster_addr) : "memory");
  return v;
}

// Arrive on an mbarrier anywhere in the cluster (address from map_to_cta). Default semantics
// (release at CTA scope): the stage's readers here are wgmma and TMA, whose reads have
// completed when wgmma.wait_group returned, so no cluster-scope fence is needed — with
// .release.cluster ptxas puts a MEMBAR.ALL.GPU in front of every arrive.
GL_DEVICE void mbar_arrive_cluster(u32 cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(cluster_addr) : "memory");
}
GL_DEVICE void mbar_arrive_cluster_n(u32 cluster_addr, u32 count) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0], %1;" ::"r"(cluster_addr), "r"(count) : "memory");
}
