// Device bodies of the RMSNorm / LayerNorm kernels (norm.cu), one row per block, callable from fused
// kernels (attn_prologue.cu) so a fused launch does exactly the standalone kernel's arithmetic.
#pragma once
#include <cstdint>

#include "kernels/kv_layout.h"
#include "kernels/norm.h"

namespace glm5 {
namespace norm_dev {

// Sum of `v` over the warp by xor shuffles (16, 8, 4, 2, 1); every lane gets it. The one reduction tree
// of block_sum's two levels (and of rmsnorm_vec_inv_rms, which must give its bits).
__device__ __forceinline__ float warp_allsum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum of `v` over the block; every thread gets the total. Needs blockDim.x a multiple of 32.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_allsum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial[] may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x / 32) ? partial[lane] : 0.f;
  return warp_allsum(v);
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
// Thread t's share of rmsnorm_vec_row's sum of squares (t < nthreads): its float4s t + j * nthreads
// (j < kVecPerThread) of the row's n4, kept in v (zeros past n4; n4 = 0 gives all zeros).
__device__ __forceinline__ float rmsnorm_vec_thread_sumsq(const float4* x, int t, int nthreads, int n4,
                                                          float4 (&v)[kVecPerThread]) {
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = t + j * nthreads;
    v[j] = i < n4 ? x[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    sum_sq += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  }
  return sum_sq;
}

__device__ __forceinline__ void rmsnorm_vec_row(const NormParams& p, int row, int nthreads) {
  const float4* x = reinterpret_cast<const float4*>(p.x + size_t(row) * p.x_stride);
  float4* y = reinterpret_cast<float4*>(p.y + size_t(row) * p.y_stride);
  const float4* w = reinterpret_cast<const float4*>(p.weight);
  const int n4 = p.dim / 4;
  float4 v[kVecPerThread];
  float sum_sq = rmsnorm_vec_thread_sumsq(x, threadIdx.x, nthreads, int(threadIdx.x) < nthreads ? n4 : 0, v);
  sum_sq = block_sum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / p.dim + p.eps);
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

// rmsnorm_vec_row's inv_rms = 1 / sqrt(mean(x^2) + eps) of one row x[dim] (dim % 4 == 0, x 16-byte aligned,
// rmsnorm_vec_threads(dim) <= 1024), computed by ANY block (blockDim.x a multiple of 32) with the same bits:
// warp w of the block takes the virtual warps w, w + nwarps, ... of the rmsnorm_vec_threads(dim)-thread block
// rmsnorm_cuda launches, each reduced by the same shuffle tree, then block_sum's second level over their
// sums (lanes past the virtual warp count add +0, as that block's absent warps do). For kernels that
// normalize their own input (the FP8 GEMV with a fused RMSNorm, kernels/linear_fp8.cu). `red`: [32]
// shared floats. Every thread of the block must call it; barriers inside.
__device__ __forceinline__ float rmsnorm_vec_inv_rms(const float* x, int dim, float eps, float* red) {
  const int nthreads = rmsnorm_vec_threads(dim), vwarps = nthreads / 32, n4 = dim / 4;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  for (int vw = warp; vw < vwarps; vw += nwarps) {
    float4 v[kVecPerThread];
    const float s = warp_allsum(rmsnorm_vec_thread_sumsq(reinterpret_cast<const float4*>(x), vw * 32 + lane,
                                                          nthreads, n4, v));
    if (lane == 0) red[vw] = s;
  }
  __syncthreads();
  const float sum_sq = warp_allsum(lane < vwarps ? red[lane] : 0.f);
  __syncthreads();  // red[] is free again for the caller
  return 1.0f / sqrtf(sum_sq / dim + eps);
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
