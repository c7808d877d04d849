// CUDA rotary position embedding, in place: one block per (row, head), one thread per rotated pair
// (the body, rope_dev::rope_head, is in rope.cuh).
// Bytes per launch: rows * heads * rope_dim * 8 (read and write x).
#include "common/error.h"
#include "kernels/rope.h"
#include "kernels/rope.cuh"
#include "kernels/launch.cuh"

namespace glm5 {

namespace {

__global__ void rope_kernel(RopeParams p) {
  pdl_begin();
  rope_dev::rope_head(p, blockIdx.x / p.heads, blockIdx.x % p.heads);
}

}  // namespace

void rope_cuda(const RopeParams& p, cudaStream_t stream) {
  validate_rope_params(p, "rope_cuda");
  const int half = p.rope_dim / 2;
  const int threads = half >= 128 ? 128 : (half + 31) / 32 * 32;
  launch_kernel(rope_kernel, p.rows * p.heads, threads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
