// Synthetic weight generation on the GPU (and its host twin): full GLM-5 weights are tens of GB, so
// the device path writes BF16 / F32 values straight into device memory without a host copy.
#include "model/synthetic.h"

#include <algorithm>
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

// Element i of `mats` stacked [rows, cols] matrices: its block's linear index.
__host__ __device__ inline uint64_t block_of(int64_t i, int64_t rows, int64_t cols) {
  const int64_t c = i % cols, r = (i / cols) % rows, e = i / (rows * cols);
  const int64_t rb = (rows + 127) / 128, cb = (cols + 127) / 128;
  return uint64_t((e * rb + r / 128) * cb + c / 128);
}

__global__ void synthetic_fp8_codes_kernel(uint8_t* __restrict__ out, int64_t n, int64_t rows, int64_t cols, SyntheticFill f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = float_to_e4m3_bits(synthetic_value(f, uint64_t(i)) / synthetic_block_scale(f, block_of(i, rows, cols)));
}

__global__ void synthetic_fp8_scales_kernel(float* __restrict__ out, int64_t n, SyntheticFill f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = synthetic_block_scale(f, uint64_t(i));
}

int grid_for(int64_t n) { return int(std::min<int64_t>((n + 255) / 256, 65536)); }

void check_dtype(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw Error("synthetic weights: unsupported dtype " + dtype_name(dtype) + " (supported: F32, BF16)");
}

}  // namespace

void synthetic_fill_fp8_host(uint8_t* codes, float* scales, int64_t mats, int64_t rows, int64_t cols,
                             const SyntheticFill& f) {
  const int64_t n = mats * rows * cols, nb = mats * ((rows + 127) / 128) * ((cols + 127) / 128);
  for (int64_t b = 0; b < nb; ++b) scales[b] = synthetic_block_scale(f, uint64_t(b));
  for (int64_t i = 0; i < n; ++i)
    codes[i] = float_to_e4m3_bits(synthetic_value(f, uint64_t(i)) / synthetic_block_scale(f, block_of(i, rows, cols)));
}

void synthetic_fill_fp8_cuda(uint8_t* codes, float* scales, int64_t mats, int64_t rows, int64_t cols,
                             const SyntheticFill& f, cudaStream_t stream) {
  const int64_t n = mats * rows * cols, nb = mats * ((rows + 127) / 128) * ((cols + 127) / 128);
  if (n <= 0) return;
  synthetic_fp8_codes_kernel<<<grid_for(n), 256, 0, stream>>>(codes, n, rows, cols, f);
  CUDA_CHECK_LAUNCH();
  synthetic_fp8_scales_kernel<<<grid_for(nb), 256, 0, stream>>>(scales, nb, f);
  CUDA_CHECK_LAUNCH();
}

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
