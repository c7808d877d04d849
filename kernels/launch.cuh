// Kernel launch with programmatic dependent launch (PDL; CUDA programming guide, "Programmatic
// Dependent Launch and Synchronization", sm_90+; PTX ISA `griddepcontrol`).
//
// Why: a batch-1 decode step is a chain of ~1,800 dependent kernels, most of which move a few KB to a
// few MB. Between two ordinary launches on one stream the GPU drains the first grid, flushes its
// writes, and only then schedules the second grid's CTAs, which then start their first DRAM round
// trip: 2-4 us of fixed cost per kernel (reports/2026-11-29-h200-decode-step.md). With PDL the next
// grid is launched while the previous one is still running; its CTAs do work that does not depend on
// the previous kernel (index math, shared-memory setup, prefetching weights into L2) and then block in
// pdl_wait() until the previous grid has completed and its memory is visible.
//
// The contract every kernel in kernels/ keeps (launched through launch_kernel):
//   - pdl_wait() runs in every CTA before its first read of memory that an earlier kernel on the
//     stream writes and before its first global write (the previous grid may still read it), and
//     before any early return (a grid whose CTAs all returned without waiting could complete before
//     its predecessor, and a third kernel waiting on it would then overlap the first).
//   - pdl_launch_dependents() may come right after pdl_wait(): the next grid's CTAs may then be
//     scheduled as soon as this grid's CTAs have all started (they wait in their own pdl_wait()).
//   - Work before pdl_wait() only reads memory no kernel of the step writes (weights, scales).
// Without the launch attribute (GLM5_PDL=0, or a predecessor that is not a kernel) both instructions
// return immediately and the launch behaves like <<<grid, block, smem, stream>>>.
// Under stream capture the attribute becomes a programmatic edge between the two kernel nodes, so
// CUDA-graph replays overlap the same way (CUDA 12.3+).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include <string>
#include <utility>

#include "common/error.h"

#ifndef GLM5_PDL
#define GLM5_PDL 1  // CMake option GLM5_PDL (ON): build with -DGLM5_PDL=OFF to measure without PDL
#endif

namespace glm5 {

// Blocks until every grid this one programmatically depends on has completed and its writes are
// visible (griddepcontrol.wait; a no-op when launched without the PDL attribute).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next PDL-launched grid on the stream start scheduling its CTAs (griddepcontrol.launch_dependents).
// Says nothing about this grid's memory: the dependent still waits for completion in pdl_wait().
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// The opening of a kernel whose whole body depends on its predecessor: wait for it (pdl_wait), then let
// the next grid start scheduling (pdl_launch_dependents).
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_launch_dependents();
}

// Grid-scope hand-offs between CTAs of one grid (the MoE pair kernel's tile counters, the flat top-k's verdict):
// a load that no later memory operation of the thread passes (ld.acquire.gpu), and a store that no earlier one
// passes (st.release.gpu). PTX ISA, "Memory Consistency Model".
__device__ __forceinline__ int ld_acquire_gpu(const int* a) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
  return v;
}
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* a) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(unsigned* a, unsigned v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(a), "r"(v) : "memory");
}

// The 32-bit shared-state-space address of a generic pointer into shared memory (the operand form of
// cp.async, mbarrier, TMA and wgmma descriptors).
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Hints L2 to fetch [p, p + bytes) (cp.async.bulk.prefetch.L2, sm_90; bytes rounded down to 16, p
// 16-byte aligned). For the weight bytes a CTA streams first, issued before pdl_wait().
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  bytes &= ~15u;
  if (bytes) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute (GLM5_PDL=1) through
// cudaLaunchKernelEx; `args` convert to the kernel's parameter types as in a <<<>>> launch. With `cluster`
// other than (1, 1, 1), the CTAs form thread-block clusters of that shape (cudaLaunchAttributeClusterDimension;
// the grid must be a multiple of it; sm_90+).
// Throws glm5::Error (CUDA_CHECK) on a bad configuration, like CUDA_CHECK_LAUNCH() after <<<>>>.
// launch_kernel_cluster with the PDL attribute only when `pdl` (and GLM5_PDL). pdl = false: none of this grid's CTAs
// is scheduled before the previous grid completes (S14e-f: attn.o_proj on the FP8 tensor-core linear,
// LinearContext::fp8_mma_pdl).
template <typename... Params, typename... Args>
void launch_kernel_ex(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, dim3 cluster,
                      bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (GLM5_PDL && pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}
template <typename... Params, typename... Args>
void launch_kernel_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                           dim3 cluster, Args&&... args) {
  launch_kernel_ex(kernel, grid, block, smem, stream, cluster, true, std::forward<Args>(args)...);
}
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_kernel_cluster(kernel, grid, block, smem, stream, dim3(1, 1, 1), std::forward<Args>(args)...);
}

// The current device's SM count (cudaDevAttrMultiProcessorCount): what launchers size one wave of CTAs by.
// Throws glm5::Error (CUDA_CHECK) when the query fails.
inline int current_device_sm_count() {
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// "" when the current device runs sm_90a machine code (compute capability 9.0: H100 / H200), else what is missing as
// the end of a sentence: "a compute capability 9.0 GPU (found 8.0)" or "(found no CUDA device)". For the launchers
// of kernels/sm90a/, which exist only as sm_90a code.
inline std::string sm90a_device_missing() {
  int dev = 0, major = 0, minor = 0;
  const bool have = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess;
  if (have && major == 9 && minor == 0) return "";
  return "a compute capability 9.0 GPU (found " +
         (have ? std::to_string(major) + "." + std::to_string(minor) : std::string("no CUDA device")) + ")";
}

}  // namespace glm5
