// Device bodies of the RMSNorm / LayerNorm kernels (norm.cu), one row per block, callable from fused
// kernels (attn_prologue.cu) so a fused launch does exactly the standalone kernel's arithmetic.
#pragma once
#include <cstdint>

#include "kernels/kv_layout.h"
#include "kernels/norm.h"

namespace glm5 {
namespace norm_dev {

// Sum of `v` over the block; every thread gets the total. Needs blockDim.x a multiple of 32.
__device__ __forceinline__ float block_sum(float v) {
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

// HF GlmMoeDsaRMSNorm: y = w * (x * rsqrt(mean(x^2) + eps)) of row `row`, any blockDim. In place is
// safe: each thread rewrites only the elements it read after the reduction.
__device__ __forceinline__ void rmsnorm_row(const NormParams& p, int row) {
  const float* x = p.x + size_t(row) * p.x_stride;
  float* y = p.y + size_t(row) * p.y_stride;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) sum_sq += x[i] * x[i];
  sum_sq = block_sum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / p.dim + p.eps);
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) y[i] = p.weight[i] * (x[i] * inv_rms);
}

// RMSNorm, vector path (dim % 4 == 0, 16-byte aligned rows, dim <= 16 * blockDim.x): each thread keeps
// its <= 4 float4 of x in registers (one global read of x), so a decode-sized row (B = 1, dim 6144)
// costs one round trip instead of dim / 256 dependent ones (the scalar loop measured 9.3 us per GLM-5
// norm on the H200, latency-bound on one SM).
// `nthreads` (<= blockDim.x, a multiple of 32) threads hold the row; the others add zeros, so any
// block of >= nthreads threads gives the bits of a block of exactly nthreads.
constexpr int kVecPerThread = 4;
__host__ __device__ __forceinline__ int rmsnorm_vec_threads(int dim) {
  const int n4 = dim / 4, t = ((n4 + kVecPerThread - 1) / kVecPerThread + 31) / 32 * 32;
  return t < 32 ? 32 : (t > 1024 ? 1024 : t);
}
// The second half of rmsnorm_vec_row, for a row already in registers: v[j] holds float4 threadIdx.x + j * nthreads
// of the row (zeros past the row and in threads >= nthreads); writes y_row (float4 index i as v's). Shared by
// rmsnorm_vec_row and kernels that produce the row themselves (moe.cu's combine with the next norm), so both
// do exactly this arithmetic.
__device__ __forceinline__ void rmsnorm_vec_regs(const float4 (&v)[kVecPerThread], const float* weight, float* y_row,
                                                 int dim, float eps, int nthreads) {
  const float4* w = reinterpret_cast<const float4*>(weight);
  float4* y = reinterpret_cast<float4*>(y_row);
  const int n4 = dim / 4;
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) sum_sq += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  sum_sq = block_sum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / dim + eps);
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = threadIdx.x + j * nthreads;
    if (i < n4 && int(threadIdx.x) < nthreads) {
      const float4 wv = w[i];
      y[i] = make_float4(wv.x * (v[j].x * inv_rms), wv.y * (v[j].y * inv_rms), wv.z * (v[j].z * inv_rms),
                         wv.w * (v[j].w * inv_rms));
    }
  }
}
__device__ __forceinline__ void rmsnorm_vec_row(const NormParams& p, int row, int nthreads) {
  const float4* x = reinterpret_cast<const float4*>(p.x + size_t(row) * p.x_stride);
  const int n4 = p.dim / 4;
  float4 v[kVecPerThread];
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = threadIdx.x + j * nthreads;
    v[j] = i < n4 && int(threadIdx.x) < nthreads ? x[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  rmsnorm_vec_regs(v, p.weight, p.y + size_t(row) * p.y_stride, p.dim, p.eps, nthreads);
}


// Whether rmsnorm_vec_row handles p in a block of `max_threads` threads (with rmsnorm_vec_threads).
__host__ __device__ __forceinline__ bool rmsnorm_vec_ok(const NormParams& p, int max_threads) {
  return p.dim % 4 == 0 && p.x_stride % 4 == 0 && p.y_stride % 4 == 0 && aligned16(p.x) && aligned16(p.y) &&
         aligned16(p.weight) && p.dim / 4 <= kVecPerThread * 1024 && rmsnorm_vec_threads(p.dim) <= max_threads;
}

// torch.nn.LayerNorm: two passes (mean, then biased variance of x - mean), eps inside the sqrt.
__device__ __forceinline__ void layernorm_row(const NormParams& p, int row) {
  const float* x = p.x + size_t(row) * p.x_stride;
  float* y = p.y + size_t(row) * p.y_stride;
  float sum = 0.f;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) sum += x[i];
  const float mean = block_sum(sum) / p.dim;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float inv_std = 1.0f / sqrtf(block_sum(sum_sq) / p.dim + p.eps);
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x)
    y[i] = (x[i] - mean) * inv_std * p.weight[i] + (p.bias ? p.bias[i] : 0.f);
}

}  // namespace norm_dev
}  // namespace glm5
