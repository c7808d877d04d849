// Appending this step's tokens to the KV pool: quantize the normalized latent (and copy the
// rotated rope part) into the latent cache row, and the rotated indexer key into the indexer cache.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/kv_layout.h"

namespace glm5 {

struct KvWriteParams {
  const float* latent;   // [B, latent_stride]: normalized latent (first L floats of each row)
  const float* rope;     // [B, rope_stride]: rotated k_pe (first R floats of each row)
  int latent_stride = 0;
  int rope_stride = 0;
  const int32_t* slots;  // [B] pool slot each request's new token goes to
  uint8_t* pool;         // [capacity, layout.row_bytes]
  LatentLayout layout;
  int B = 0;
};
// Slots < 0 are skipped (padding requests). Throws glm5::Error on null pointers, B < 0, strides
// shorter than L / R, or a layout not made by make_latent_layout.
void validate_kv_write_params(const KvWriteParams& p);
void kv_write_cpu(const KvWriteParams& p);
void kv_write_cuda(const KvWriteParams& p, cudaStream_t stream);

struct IndexerKeyWriteParams {
  const float* key;      // [B, D] rotated, normalized indexer key
  const int32_t* slots;  // [B] pool slot of each new token (same slots as the latent cache)
  uint8_t* cache;        // paged indexer cache (see kv_layout.h)
  IndexerLayout layout;
  int B = 0;
};
// Slots < 0 are skipped. FP8: scale = amax/448 over the token's D values.
void validate_indexer_key_write_params(const IndexerKeyWriteParams& p);
void indexer_key_write_cpu(const IndexerKeyWriteParams& p);
void indexer_key_write_cuda(const IndexerKeyWriteParams& p, cudaStream_t stream);

// Fills `rows` latent rows (slots [first_slot, first_slot + rows)) and the matching indexer keys
// with seeded pseudo-random values (latent ~ N(0,1)-like, rope ~ N(0,1)-like, indexer keys likewise),
// quantized as the writers would. Stands in for a prefilled context when profiling; values depend
// only on (seed, slot, element). `indexer_cache` may be null.
struct KvFillParams {
  uint8_t* pool;
  LatentLayout layout;
  uint8_t* indexer_cache;
  IndexerLayout indexer_layout;
  int64_t first_slot = 0;
  int64_t rows = 0;
  uint64_t seed = 0;
};
// Values: latent[slot, i] = rng_normal(seed, kFillStreamLatent, slot*L + i), rope likewise with
// kFillStreamRope and slot*R + i, indexer key with kFillStreamIndexer and slot*D + i (common/rng.h);
// bytes identical on CPU and GPU.
constexpr uint64_t kFillStreamLatent = 0x6c6174656e74ull;   // "latent"
constexpr uint64_t kFillStreamRope = 0x726f7065ull;         // "rope"
constexpr uint64_t kFillStreamIndexer = 0x696e646578ull;    // "index"
void validate_kv_fill_params(const KvFillParams& p);
void kv_fill_random_cpu(const KvFillParams& p);
void kv_fill_random_cuda(const KvFillParams& p, cudaStream_t stream);

}  // namespace glm5
