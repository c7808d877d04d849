// CUDA RMSNorm / LayerNorm: one block per row (RMSNorm's vector path: up to 1024 threads, x held in
// registers), fp32 sums reduced with warp shuffles then across
// warps in shared memory. Bytes per launch: rows * dim * 8 (read x, write y) + dim * 4 (weight).
#include <algorithm>
#include <cstdint>

#include "common/error.h"
#include "kernels/norm.h"
#include "kernels/norm.cuh"
#include "kernels/launch.cuh"

namespace glm5 {

namespace {

constexpr int kThreads = 256;

__global__ void rmsnorm_kernel(NormParams p) {
  pdl_begin();
  norm_dev::rmsnorm_row(p, blockIdx.x);
}
__global__ void __launch_bounds__(1024) rmsnorm_vec_kernel(NormParams p) {
  pdl_begin();
  norm_dev::rmsnorm_vec_row(p, blockIdx.x, blockDim.x);
}
__global__ void layernorm_kernel(NormParams p) {
  pdl_begin();
  norm_dev::layernorm_row(p, blockIdx.x);
}

}  // namespace

void rmsnorm_cuda(const NormParams& p, cudaStream_t stream) {
  validate_norm_params(p, "rmsnorm_cuda");
  if (norm_dev::rmsnorm_vec_ok(p, 1024)) {
    launch_kernel(rmsnorm_vec_kernel, p.rows, norm_dev::rmsnorm_vec_threads(p.dim), 0, stream, p);
  } else {
    launch_kernel(rmsnorm_kernel, p.rows, kThreads, 0, stream, p);
  }
  CUDA_CHECK_LAUNCH();
}

void layernorm_cuda(const NormParams& p, cudaStream_t stream) {
  validate_norm_params(p, "layernorm_cuda");
  launch_kernel(layernorm_kernel, p.rows, kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
