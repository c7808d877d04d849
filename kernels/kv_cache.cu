// CUDA kernels of kv_cache.h: quantize latent / rope / indexer keys into the paged pool, and the
// seeded fill. One block per row; a group's amax is a block reduction; each thread quantizes
// strided values with cvt.rn.satfinite (bytes identical to the CPU twin's float_to_e4m3_bits).
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cache.cuh"
#include "kernels/kv_cast.cuh"
#include "kernels/launch.cuh"

namespace glm5 {
namespace {

using namespace kv_dev;

__global__ void __launch_bounds__(kThreads) kv_write_kernel(KvWriteParams p) {
  pdl_begin();
  __shared__ float red[kThreads / 32];
  kv_write_row(p, blockIdx.x, red);
}

__global__ void __launch_bounds__(kThreads) indexer_key_write_kernel(IndexerKeyWriteParams p) {
  pdl_begin();
  __shared__ float red[kThreads / 32];
  indexer_key_write_row(p, blockIdx.x, red);
}

__global__ void __launch_bounds__(kThreads) kv_fill_kernel(KvFillParams p) {
  pdl_begin();
  __shared__ float red[kThreads / 32];
  const int L = p.layout.latent_dim, R = p.layout.rope_dim, D = p.indexer_layout.dim;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const uint64_t slot = uint64_t(p.first_slot + r);
    write_latent_row([&](int i) { return rng_normal(p.seed, kFillStreamLatent, slot * L + i); },
                     [&](int i) { return rng_normal(p.seed, kFillStreamRope, slot * R + i); }, p.layout,
                     p.pool + int64_t(slot) * p.layout.row_bytes, red);
    if (p.indexer_cache)
      write_indexer_key([&](int i) { return rng_normal(p.seed, kFillStreamIndexer, slot * D + i); }, int64_t(slot),
                        p.indexer_layout, p.indexer_cache, red);
  }
}

}  // namespace

void kv_write_cuda(const KvWriteParams& p, cudaStream_t stream) {
  validate_kv_write_params(p);
  if (p.B == 0) return;
  launch_kernel(kv_write_kernel, p.B, kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void indexer_key_write_cuda(const IndexerKeyWriteParams& p, cudaStream_t stream) {
  validate_indexer_key_write_params(p);
  if (p.B == 0) return;
  launch_kernel(indexer_key_write_kernel, p.B, kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void kv_fill_random_cuda(const KvFillParams& p, cudaStream_t stream) {
  validate_kv_fill_params(p);
  if (p.rows == 0) return;
  const int grid = int(std::min<int64_t>(p.rows, 65536));
  launch_kernel(kv_fill_kernel, grid, kThreads, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
