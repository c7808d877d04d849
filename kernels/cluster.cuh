// Thread-block cluster helpers (sm_90, PTX ISA "barrier.cluster", "mapa", "ld.shared::cluster", special registers
// %cluster_ctarank / %cluster_nctarank): barriers over the cluster's non-exited threads and loads from another CTA's
// shared memory (distributed shared memory) and bulk copies into it. Used by the wgmma MLA decode's split-K merge and
// crossover (sm90a/mla_decode_wgmma.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/launch.cuh"  // smem_u32

namespace glm5 {

// Every non-exited thread of the cluster arrives (release: its earlier writes, shared memory included, become visible
// to the other CTAs) and waits for the others (acquire).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
// The same barrier without release ordering: enough to keep a CTA's shared memory alive until its partners' reads of
// it are done when those reads' values have already been consumed (the merge's last barrier), and it spares the
// MEMBAR.GPU a release arrive waits behind the CTA's pending global stores.
__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\n\tbarrier.cluster.wait;" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_ctas() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}
// The shared::cluster address of `local` (a pointer into this CTA's shared memory) in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t dsmem_addr(const void* local, uint32_t rank) {
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32(local)), "r"(rank));
  return a;
}
__device__ __forceinline__ float ld_dsmem(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ float4 ld_dsmem4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
  return v;
}

// cp.async.bulk shared::cta -> shared::cluster (sm_90, PTX ISA "cp.async.bulk"): `bytes` (a multiple of 16; both
// addresses 16-byte aligned) from this CTA's shared memory at `src` to the shared::cluster address `dst` in another CTA
// of the cluster (dsmem_addr), by the copy engine, completing that many transaction bytes of the mbarrier at
// shared::cluster address `bar` in the destination CTA. The source's generic-proxy writes must be ordered before the
// copy by fence.proxy.async (every writer fences, then a barrier, then one thread issues the copy). The source may be
// overwritten only after the copy has read it: its only completion signal is `bar`, in the destination CTA.
__device__ __forceinline__ void bulk_copy_s2cluster(uint32_t dst, const void* src, unsigned bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "r"(smem_u32(src)), "r"(bytes), "r"(bar)
               : "memory");
}

}  // namespace glm5
