// CUDA kernels of the small memory-bound ops: embedding lookup, residual add, SwiGLU, argmax and
// fp32 -> bf16 conversion. Each launcher validates its Params (see elementwise.h) and checks the launch.
#include <cuda_bf16.h>

#include <cmath>

#include "common/error.h"
#include "kernels/elementwise.h"
#include "kernels/launch.cuh"

namespace glm5 {

namespace {

constexpr int kThreads = 256;

// Blocks for n elements, capped at 4096: the kernels loop grid-stride over the rest.
int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return int(blocks < 4096 ? blocks : 4096);
}

// One block per row: out[r, :] = table[tokens[r], :]. Bytes: rows * dim * (table elt + 4).
template <typename T>
__global__ void embedding_kernel(EmbeddingParams p) {
  pdl_begin();
  const int r = blockIdx.x;
  const T* row = static_cast<const T*>(p.table) + size_t(p.tokens[r]) * p.dim;
  float* out = p.out + size_t(r) * p.dim;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) {
    if constexpr (sizeof(T) == 4) out[i] = row[i];
    else out[i] = bf16_bits_to_float(row[i]);
  }
}

__global__ void add_inplace_kernel(AddParams p) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n; i += int64_t(gridDim.x) * blockDim.x)
    p.y[i] += p.x[i];
}

__global__ void silu_mul_kernel(SiluMulParams p) {
  pdl_begin();
  const int64_t n = int64_t(p.rows) * p.inter;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = idx / p.inter, i = idx % p.inter;
    const float g = p.gate_up[r * 2 * p.inter + i];
    const float u = p.gate_up[r * 2 * p.inter + p.inter + i];
    p.out[idx] = g / (1.0f + expf(-g)) * u;
  }
}

// (value, index) ordering of argmax: larger value wins, equal values go to the lower index.
__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
  return v > best_v || (v == best_v && i < best_i);
}

// One block per row; NaN is read as -inf, so a row of NaN/-inf returns 0 (the first index).
__global__ void argmax_kernel(ArgmaxParams p) {
  pdl_begin();
  const float* row = p.logits + size_t(blockIdx.x) * p.n;
  float best_v = -INFINITY;
  int best_i = 0x7fffffff;
  for (int j = threadIdx.x; j < p.n; j += blockDim.x) {
    float v = row[j];
    if (isnan(v)) v = -INFINITY;
    if (better(v, j, best_v, best_i)) { best_v = v; best_i = j; }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_down_sync(0xffffffffu, best_v, off);
    const int oi = __shfl_down_sync(0xffffffffu, best_i, off);
    if (better(ov, oi, best_v, best_i)) { best_v = ov; best_i = oi; }
  }
  __shared__ float warp_v[32];
  __shared__ int warp_i[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { warp_v[warp] = best_v; warp_i[warp] = best_i; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x / 32); ++w)
      if (better(warp_v[w], warp_i[w], best_v, best_i)) { best_v = warp_v[w]; best_i = warp_i[w]; }
    p.out[blockIdx.x] = best_i < p.n ? best_i : 0;
  }
}

__global__ void f32_to_bf16_kernel(const float* src, uint16_t* dst, int64_t n) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

}  // namespace

void embedding_cuda(const EmbeddingParams& p, cudaStream_t stream) {
  validate_embedding_params(p, "embedding_cuda");
  if (p.table_dtype == DType::F32) launch_kernel(embedding_kernel<float>, p.rows, kThreads, 0, stream, p);
  else launch_kernel(embedding_kernel<uint16_t>, p.rows, kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void add_inplace_cuda(const AddParams& p, cudaStream_t stream) {
  validate_add_params(p, "add_inplace_cuda");
  launch_kernel(add_inplace_kernel, grid_for(p.n), kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void silu_mul_cuda(const SiluMulParams& p, cudaStream_t stream) {
  validate_silu_mul_params(p, "silu_mul_cuda");
  launch_kernel(silu_mul_kernel, grid_for(int64_t(p.rows) * p.inter), kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void argmax_cuda(const ArgmaxParams& p, cudaStream_t stream) {
  validate_argmax_params(p, "argmax_cuda");
  launch_kernel(argmax_kernel, p.rows, 1024, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void f32_to_bf16_cuda(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  require(src != nullptr, "f32_to_bf16_cuda: src is null");
  require(dst != nullptr, "f32_to_bf16_cuda: dst is null");
  require(n > 0, "f32_to_bf16_cuda: n = " + std::to_string(n) + ", expected > 0");
  launch_kernel(f32_to_bf16_kernel, grid_for(n), kThreads, 0, stream, src, dst, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
