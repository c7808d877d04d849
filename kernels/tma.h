// Host side of the Tensor Memory Accelerator (sm_90): cuTensorMapEncodeTiled through the CUDA runtime's driver
// entry point, so nothing links against libcuda. Used by the TMA-fed FP8 GEMV (linear_fp8_tma.cu; until session 8
// also by the wgmma MLA decode's rope rows). The device side (cp.async.bulk.tensor) is tma_load_2d in
// kernels/mbarrier.cuh.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
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

// A 2-D byte tensor of `rows` rows of `cols` bytes, `row_bytes` apart (a multiple of 16; base 16-byte aligned), read
// in boxes of [box_rows x 128 bytes] with the 128-byte swizzle (wgmma's K-major layout, kernels/wgmma.cuh); rows past
// `rows` arrive as zeros. Throws glm5::Error "<who>: cuTensorMapEncodeTiled refused <what> (...)" when the driver does.
inline CUtensorMap tma_map_bytes_sw128(const void* base, int64_t cols, int64_t rows, int64_t row_bytes, int box_rows,
                                       const char* who, const char* what) {
  CUtensorMap m;
  std::memset(&m, 0, sizeof(m));
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(row_bytes)};
  const cuuint32_t box[2] = {128u, cuuint32_t(box_rows)};
  const cuuint32_t estrides[2] = {1, 1};
  const CUresult rc = tensor_map_encode_fn(who)(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims,
                                                strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  require(rc == CUDA_SUCCESS, std::string(who) + ": cuTensorMapEncodeTiled refused " + what + " (" +
                                  std::to_string(rows) + " x " + std::to_string(cols) + " bytes, row stride " +
                                  std::to_string(row_bytes) + " B): error " + std::to_string(int(rc)));
  return m;
}

}  // namespace glm5
