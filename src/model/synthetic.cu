// Synthetic weight generation on the GPU (and its host twin): full GLM-5 weights are tens of GB, so
// the device path writes BF16 / F32 values straight into device memory without a host copy.
#include "model/synthetic.h"

#include <string>

#include "common/error.h"

namespace glm5 {

namespace {

template <class T>
__global__ void synthetic_fill_kernel(T* __restrict__ out, int64_t n, SyntheticFill f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = synthetic_value(f, uint64_t(i));
    if constexpr (sizeof(T) == 2) out[i] = float_to_bf16_bits(v);
    else out[i] = v;
  }
}

void check_dtype(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw Error("synthetic weights: unsupported dtype " + dtype_name(dtype) + " (supported: F32, BF16)");
}

}  // namespace

void synthetic_fill_host(void* out, DType dtype, int64_t n, const SyntheticFill& f) {
  check_dtype(dtype);
  if (dtype == DType::BF16) {
    uint16_t* o = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = float_to_bf16_bits(synthetic_value(f, uint64_t(i)));
  } else {
    float* o = static_cast<float*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = synthetic_value(f, uint64_t(i));
  }
}

void synthetic_fill_cuda(void* out, DType dtype, int64_t n, const SyntheticFill& f, cudaStream_t stream) {
  check_dtype(dtype);
  if (n <= 0) return;
  const int threads = 256;
  // Grid-stride loop: enough blocks to fill the GPU many times over, capped to keep the grid small.
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = int(want < 65536 ? want : 65536);
  if (dtype == DType::BF16)
    synthetic_fill_kernel<uint16_t><<<blocks, threads, 0, stream>>>(static_cast<uint16_t*>(out), n, f);
  else
    synthetic_fill_kernel<float><<<blocks, threads, 0, stream>>>(static_cast<float*>(out), n, f);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
