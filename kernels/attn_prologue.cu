// CUDA kernels of attn_prologue.h. Blocks of kv_dev::kThreads (128) threads, one role per block range;
// each role runs the standalone kernels' device functions on its row in order, with a block barrier
// between dependent steps (the row a step wrote in global memory is read by other threads of the block
// in the next step). The RMSNorm vector path reduces over exactly the standalone launch's thread count
// (norm_dev::rmsnorm_vec_threads; the other threads add zeros), RoPE does not depend on the block size
// and the writes are kv_dev's own code: bitwise the unfused results (GPU test). The indexer key's
// LayerNorm (the same source, 128 instead of 256 threads) measured last-bit differences on some keys. (RMSNorm rows too long for the vector path in 128 threads take the scalar loop,
// which reduces in a different order than the standalone 256-thread kernel: fp32-order differences.)
#include <algorithm>

#include "common/error.h"
#include "kernels/attn_prologue.h"
#include "kernels/kv_cache.cuh"
#include "kernels/norm.cuh"
#include "kernels/rope.cuh"
#include "kernels/launch.cuh"

namespace glm5 {

namespace {

constexpr int kThreads = kv_dev::kThreads;

__device__ __forceinline__ void rmsnorm_part(const NormParams& p, int row) {
  if (norm_dev::rmsnorm_vec_ok(p, kThreads)) norm_dev::rmsnorm_vec_row(p, row, norm_dev::rmsnorm_vec_threads(p.dim));
  else norm_dev::rmsnorm_row(p, row);
}

template <bool kSlim>
__global__ void __launch_bounds__(kThreads, kSlim ? 16 : 1) attn_prologue_kernel(AttnPrologueParams p) {
  pdl_begin();
  __shared__ float red[kThreads / 32];
  const int B = p.kv_write.B, part = blockIdx.x / B + (p.q_part ? 0 : 1), b = blockIdx.x % B;
  if (part == 0) {
    rmsnorm_part(p.q_a_norm, b);
  } else if (part == 1) {
    rmsnorm_part(p.kv_a_norm, b);
    rope_dev::rope_head(p.k_rope, b, 0);  // the rope part: disjoint from the normalized latent
    __syncthreads();                      // both visible to the whole block before the write reads them
    kv_dev::kv_write_row(p.kv_write, b, red);
  } else {
    norm_dev::layernorm_row(p.idx_k_norm, b);
    __syncthreads();
    rope_dev::rope_head(p.idx_k_rope, b, 0);
    __syncthreads();
    kv_dev::indexer_key_write_row(p.idx_k_write, b, red);
  }
}

__global__ void rope2_kernel(Rope2Params p) {
  pdl_begin();
  const int na = p.a.rows * p.a.heads;
  const int i = blockIdx.x;
  if (i < na) rope_dev::rope_head(p.a, i / p.a.heads, i % p.a.heads);
  else rope_dev::rope_head(p.b, (i - na) / p.b.heads, (i - na) % p.b.heads);
}

}  // namespace

void attn_prologue_cuda(const AttnPrologueParams& p, cudaStream_t stream) {
  validate_attn_prologue_params(p);
  if (p.kv_write.B == 0) return;
  launch_kernel(p.slim ? attn_prologue_kernel<true> : attn_prologue_kernel<false>,
                p.kv_write.B * ((p.q_part ? 1 : 0) + 1 + (p.indexer ? 1 : 0)), kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void rope2_cuda(const Rope2Params& p, cudaStream_t stream) {
  validate_rope_params(p.a, "rope2_cuda a");
  validate_rope_params(p.b, "rope2_cuda b");
  const int blocks = p.a.rows * p.a.heads + p.b.rows * p.b.heads;
  if (blocks == 0) return;
  const int half = std::max(p.a.rope_dim, p.b.rope_dim) / 2;
  const int threads = half >= 128 ? 128 : (half + 31) / 32 * 32;
  launch_kernel(rope2_kernel, blocks, threads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
