// Shared-memory transaction barriers (PTX ISA "mbarrier"), sm_90: the producer / consumer handshake of
// the TMA-fed GEMV (linear_fp8_tma.cu) and the warp-specialized MLA decode (sm90a/mla_decode_wgmma.cu).
// A barrier completes a phase when `count` arrivals (and, with expect_tx, the announced bytes) are in;
// waiters name the phase by its parity (0, 1, 0, ...). The first wait of a fresh barrier on parity 1
// returns at once (the "previous" phase counts as complete), the usual way to start a ring of empty slots.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/launch.cuh"

namespace glm5 {

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes the initialized barriers visible to the async proxy (TMA) and to the other threads' mbarrier ops;
// follow with __syncthreads().
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// One arrival that also announces `bytes` transaction bytes for the current phase (mbarrier.arrive.expect_tx): it
// counts toward the barrier's arrival count like mbar_arrive.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// cp.async.bulk global -> shared (sm_90): `bytes` (a multiple of 16; both addresses 16-byte aligned) land at dst
// and complete that many of bar's transaction bytes (announce them first with mbar_expect_tx). The async proxy
// writes dst: generic writes to it before must be ordered with fence_proxy_async (below).
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
// Makes this thread's generic-proxy writes to shared memory (st.shared) visible to the async proxy (TMA bulk
// stores, wgmma's operand reads); follow with a barrier before the async operation is issued.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// cp.async.bulk shared -> global (sm_90): `bytes` (a multiple of 16; both addresses 16-byte aligned) from src to dst,
// committed as one bulk group of the issuing thread (wait with bulk_wait_read / bulk_wait_all, same thread).
__device__ __forceinline__ void bulk_store_s2g(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_u32(src)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Waits until at most N of this thread's bulk groups still read their shared-memory source (it may be rewritten).
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Waits until all of this thread's bulk groups are complete (their writes done).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// One 2-D box (columns c0.., rows r0..) of a tensor map (kernels/tma.h) into shared memory, completing that many
// of bar's transaction bytes; the map must live in kernel-parameter (__grid_constant__), constant or global memory.
// With a swizzled map the 16-byte chunks land permuted by the destination's shared-memory address bits.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int r0, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(r0), "r"(smem_u32(bar))
      : "memory");
}
// One arrival (release semantics: this thread's earlier writes are visible to the thread whose wait sees
// the phase complete).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// One arrival on the mbarrier at bar's CTA-relative offset in CTA `rank` of this thread-block cluster (this CTA's own
// rank included). For "this thread is done reading a buffer" (a write-after-read hand-off: the reads, e.g. a wgmma
// this thread waited for, have completed before the arrival is issued), not for publishing writes: its release is at
// CTA scope (PTX's default for mbarrier.arrive), as CUTLASS's ClusterBarrier::arrive(cta_id) releases a remote
// producer's stage. (In the PTX memory model a CTA-scope release does not synchronize with another CTA's acquire; the
// hand-off rests on the reads having completed before the arrival is issued -- wgmma::wait<0> in the MLA kernel -- as
// CUTLASS's multicast pipelines and FlashAttention-3's buffer releases do.) A .release.cluster arrival costs a round
// trip to L2 per arrival (the cluster-scope fence; NVIDIA/cccl issue 9994 says so of cluster barriers): session 33's
// probe (H100) saw the MLA crossover's consumer phases that hold this arrival take 3414 / 5458 cycles per tile against
// 1591 / 1318 without crossover. GLM5_MLA_XO_RELEASE_CLUSTER (probe builds only) keeps that form for the A/B.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
#if defined(GLM5_MLA_XO_RELEASE_CLUSTER)
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
#elif defined(GLM5_MLA_XO_RELAXED)  // probe builds only (session 34's A/B), UNSAFE: no ordering at all
  asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
#else
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
#endif
}
// mbar_wait with acquire semantics at cluster scope: pairs with the complete_tx of copies
// (bulk_copy_s2cluster, kernels/cluster.cuh) from other CTAs of the cluster.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// One arrival on bar, made once all of this thread's earlier cp.async copies (16-byte LDGSTS, not cp.async.bulk) have
// landed (cp.async.mbarrier.arrive.noinc: the arrival counts toward bar's init count).
__device__ __forceinline__ void cp_async_mbar_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Spins until the phase of parity `parity` has completed (acquire semantics).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace glm5
