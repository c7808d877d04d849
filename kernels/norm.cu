// CUDA RMSNorm / LayerNorm: one block per row, fp32 sums reduced with warp shuffles then across
// warps in shared memory. Bytes per launch: rows * dim * 8 (read x, write y) + dim * 4 (weight).
#include "common/error.h"
#include "kernels/norm.h"

namespace glm5 {

namespace {

constexpr int kThreads = 256;

// Sum of `v` over the block; every thread gets the total. Needs blockDim.x a multiple of 32.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial[] may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x / 32) ? partial[lane] : 0.f;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// HF GlmMoeDsaRMSNorm: y = w * (x * rsqrt(mean(x^2) + eps)). In place is safe: each thread
// rewrites only the elements it read after the reduction.
__global__ void rmsnorm_kernel(NormParams p) {
  const float* x = p.x + size_t(blockIdx.x) * p.x_stride;
  float* y = p.y + size_t(blockIdx.x) * p.y_stride;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) sum_sq += x[i] * x[i];
  sum_sq = block_sum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / p.dim + p.eps);
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) y[i] = p.weight[i] * (x[i] * inv_rms);
}

// torch.nn.LayerNorm: two passes (mean, then biased variance of x - mean), eps inside the sqrt.
__global__ void layernorm_kernel(NormParams p) {
  const float* x = p.x + size_t(blockIdx.x) * p.x_stride;
  float* y = p.y + size_t(blockIdx.x) * p.y_stride;
  float sum = 0.f;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) sum += x[i];
  const float mean = block_sum(sum) / p.dim;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float inv_std = 1.0f / sqrtf(block_sum(sum_sq) / p.dim + p.eps);
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x)
    y[i] = (x[i] - mean) * inv_std * p.weight[i] + (p.bias ? p.bias[i] : 0.f);
}

}  // namespace

void rmsnorm_cuda(const NormParams& p, cudaStream_t stream) {
  validate_norm_params(p, "rmsnorm_cuda");
  rmsnorm_kernel<<<p.rows, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void layernorm_cuda(const NormParams& p, cudaStream_t stream) {
  validate_norm_params(p, "layernorm_cuda");
  layernorm_kernel<<<p.rows, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
