// CUDA kernel of kernels/l2_prefetch.h.
#include <cstdint>

#include "common/error.h"
#include "kernels/l2_prefetch.h"
#include "kernels/launch.cuh"

namespace glm5 {
namespace {

constexpr int kPrefetchThreads = 256;

// Thread i issues request i (l2_prefetch_request). It reads and writes nothing, so its requests go out before pdl_wait();
// the wait comes last only to keep launch.cuh's contract (no grid completes before its predecessor).
__global__ void __launch_bounds__(kPrefetchThreads) l2_prefetch_kernel(L2PrefetchParams p, int64_t requests) {
  const int64_t i = int64_t(blockIdx.x) * kPrefetchThreads + threadIdx.x;
  if (i < requests) {
    const L2PrefetchRequest r = l2_prefetch_request(p, i);
    const uint8_t* a = static_cast<const uint8_t*>(p.base) + r.offset;
    if (p.evict_last) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      uint64_t policy;
      asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
      if (r.bytes)
        asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(a), "r"(r.bytes), "l"(policy)
                     : "memory");
#endif
    } else {
      prefetch_l2(a, r.bytes);
    }
  }
  pdl_wait();
}

}  // namespace

void l2_prefetch_cuda(const L2PrefetchParams& p, cudaStream_t stream) {
  validate_l2_prefetch_params(p);
  const int64_t n = l2_prefetch_requests(p);
  launch_kernel(l2_prefetch_kernel, unsigned((n + kPrefetchThreads - 1) / kPrefetchThreads), kPrefetchThreads, 0,
                stream, p, n);
}

}  // namespace glm5
