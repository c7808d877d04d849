// Device bodies of the KV-pool writes (kv_cache.cu): quantize latent / rope / indexer keys of one
// token into the paged pool, with blocks of kv_dev::kThreads threads. Shared with fused kernels
// (attn_prologue.cu) so a fused launch writes exactly the bytes the standalone kernels write.
// A group's amax is a block reduction; each thread quantizes strided values with cvt.rn.satfinite
// (bytes identical to the CPU twin's float_to_e4m3_bits).
#pragma once
#include <cstdint>

#include "kernels/kv_cache.h"
#include "kernels/kv_cast.cuh"

namespace glm5 {
namespace kv_dev {

constexpr int kThreads = 128;

__device__ __forceinline__ float block_max(float v, float* red) {
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
__device__ __forceinline__ void quantize_group(Value value, int n, uint8_t* codes, uint8_t* scale_out, float* red) {
  float amax = 0.f;
  for (int i = threadIdx.x; i < n; i += kThreads) amax = fmaxf(amax, fabsf(value(i)));
  const float scale = fp8_group_scale(block_max(amax, red));
  for (int i = threadIdx.x; i < n; i += kThreads) codes[i] = float_to_e4m3_device(value(i) / scale);
  if (threadIdx.x == 0) memcpy(scale_out, &scale, 4);
}

template <class Latent, class Rope>
__device__ __forceinline__ void write_latent_row(Latent latent, Rope rope, const LatentLayout& l, uint8_t* row, float* red) {
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
__device__ __forceinline__ void write_indexer_key(Key key, int64_t slot, const IndexerLayout& l, uint8_t* cache, float* red) {
  if (l.fp8) {
    quantize_group(key, l.dim, cache + indexer_key_offset(slot, l.dim), cache + indexer_scale_offset(slot, l.dim), red);
  } else {
    uint16_t* k = reinterpret_cast<uint16_t*>(cache + slot * 2 * l.dim);
    for (int i = threadIdx.x; i < l.dim; i += kThreads) k[i] = float_to_bf16_bits(key(i));
  }
}

// Row b of p (slot < 0: nothing). `red`: kThreads / 32 floats of shared memory.
__device__ __forceinline__ void kv_write_row(const KvWriteParams& p, int b, float* red) {
  const int64_t slot = p.slots[b];
  if (slot < 0) return;
  const float* latent = p.latent + int64_t(b) * p.latent_stride;
  const float* rope = p.rope + int64_t(b) * p.rope_stride;
  write_latent_row([&](int i) { return latent[i]; }, [&](int i) { return rope[i]; }, p.layout,
                   p.pool + slot * p.layout.row_bytes, red);
}

__device__ __forceinline__ void indexer_key_write_row(const IndexerKeyWriteParams& p, int b, float* red) {
  const int64_t slot = p.slots[b];
  if (slot < 0) return;
  const float* key = p.key + int64_t(b) * p.layout.dim;
  write_indexer_key([&](int i) { return key[i]; }, slot, p.layout, p.cache, red);
}

}  // namespace kv_dev
}  // namespace glm5
