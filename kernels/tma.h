// Host side of the Tensor Memory Accelerator (sm_90): cuTensorMapEncodeTiled through the CUDA runtime's driver
// entry point, so nothing links against libcuda. Used by the TMA-fed FP8 GEMV (linear_fp8_tma.cu; until session 8
// also by the wgmma MLA decode's rope rows). The device side (cp.async.bulk.tensor) is tma_load_2d in
// kernels/mbarrier.cuh.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace glm5 {

// The driver's cuTensorMapEncodeTiled (looked up once per thread). Throws glm5::Error naming `who` when the
// driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_fn(const char* who) {
  static thread_local PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    require(q == cudaDriverEntryPointSuccess && f, std::string(who) + ": the driver has no cuTensorMapEncodeTiled");
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }
  return fn;
}

}  // namespace glm5
