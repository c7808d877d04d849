// CUDA kernels of kv_cache.h: quantize latent / rope / indexer keys into the paged pool, and the
// seeded fill. One block per row; a group's amax is a block reduction; each thread quantizes
// strided values with cvt.rn.satfinite (bytes identical to the CPU twin's float_to_e4m3_bits).
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.cuh"

namespace glm5 {
namespace {

constexpr int kThreads = 128;

__device__ float block_max(float v, float* red) {
  v = warp_max(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float m = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();  // red is reused by the next call
  return m;
}

// Quantizes n values value(i) into codes[i] with one scale (amax/448), written to *scale_out.
template <class Value>
__device__ void quantize_group(Value value, int n, uint8_t* codes, uint8_t* scale_out, float* red) {
  float amax = 0.f;
  for (int i = threadIdx.x; i < n; i += kThreads) amax = fmaxf(amax, fabsf(value(i)));
  const float scale = fp8_group_scale(block_max(amax, red));
  for (int i = threadIdx.x; i < n; i += kThreads) codes[i] = float_to_e4m3_device(value(i) / scale);
  if (threadIdx.x == 0) memcpy(scale_out, &scale, 4);
}

template <class Latent, class Rope>
__device__ void write_latent_row(Latent latent, Rope rope, const LatentLayout& l, uint8_t* row, float* red) {
  if (l.fp8) {
    for (int g = 0; g < l.num_groups(); ++g) {
      const int base = g * l.group;
      quantize_group([&](int i) { return latent(base + i); }, l.group, row + base, row + l.scale_offset() + 4 * g, red);
    }
  } else {
    for (int i = threadIdx.x; i < l.latent_dim; i += kThreads)
      reinterpret_cast<uint16_t*>(row)[i] = float_to_bf16_bits(latent(i));
  }
  uint16_t* r = reinterpret_cast<uint16_t*>(row + l.rope_offset());
  for (int i = threadIdx.x; i < l.rope_dim; i += kThreads) r[i] = float_to_bf16_bits(rope(i));
}

template <class Key>
__device__ void write_indexer_key(Key key, int64_t slot, const IndexerLayout& l, uint8_t* cache, float* red) {
  if (l.fp8) {
    quantize_group(key, l.dim, cache + indexer_key_offset(slot, l.dim), cache + indexer_scale_offset(slot, l.dim), red);
  } else {
    uint16_t* k = reinterpret_cast<uint16_t*>(cache + slot * 2 * l.dim);
    for (int i = threadIdx.x; i < l.dim; i += kThreads) k[i] = float_to_bf16_bits(key(i));
  }
}

__global__ void __launch_bounds__(kThreads) kv_write_kernel(KvWriteParams p) {
  __shared__ float red[kThreads / 32];
  const int b = blockIdx.x;
  const int64_t slot = p.slots[b];
  if (slot < 0) return;
  const float* latent = p.latent + int64_t(b) * p.latent_stride;
  const float* rope = p.rope + int64_t(b) * p.rope_stride;
  write_latent_row([&](int i) { return latent[i]; }, [&](int i) { return rope[i]; }, p.layout,
                   p.pool + slot * p.layout.row_bytes, red);
}

__global__ void __launch_bounds__(kThreads) indexer_key_write_kernel(IndexerKeyWriteParams p) {
  __shared__ float red[kThreads / 32];
  const int b = blockIdx.x;
  const int64_t slot = p.slots[b];
  if (slot < 0) return;
  const float* key = p.key + int64_t(b) * p.layout.dim;
  write_indexer_key([&](int i) { return key[i]; }, slot, p.layout, p.cache, red);
}

__global__ void __launch_bounds__(kThreads) kv_fill_kernel(KvFillParams p) {
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
  kv_write_kernel<<<p.B, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void indexer_key_write_cuda(const IndexerKeyWriteParams& p, cudaStream_t stream) {
  validate_indexer_key_write_params(p);
  if (p.B == 0) return;
  indexer_key_write_kernel<<<p.B, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void kv_fill_random_cuda(const KvFillParams& p, cudaStream_t stream) {
  validate_kv_fill_params(p);
  if (p.rows == 0) return;
  const int grid = int(std::min<int64_t>(p.rows, 65536));
  kv_fill_kernel<<<grid, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
