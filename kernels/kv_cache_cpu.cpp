// CPU twins of kv_cache.h: quantize this step's latent / rope / indexer key into the paged pool.
// Plain loops; the CUDA kernels in kv_cache.cu produce the same bytes.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"

namespace glm5 {
namespace {

// Writes one latent row: FP8 (per-group amax/448 scales, e4m3 values, bf16 rope) or BF16.
void write_latent_row(const float* latent, const float* rope, const LatentLayout& l, uint8_t* row) {
  if (l.fp8) {
    for (int g = 0; g < l.num_groups(); ++g) {
      const float* x = latent + g * l.group;
      float amax = 0.f;
      for (int i = 0; i < l.group; ++i) amax = std::fmax(amax, std::fabs(x[i]));
      float scale = fp8_group_scale(amax);
      for (int i = 0; i < l.group; ++i) row[g * l.group + i] = float_to_e4m3_bits(x[i] / scale);
      std::memcpy(row + l.scale_offset() + 4 * g, &scale, 4);
    }
  } else {
    for (int i = 0; i < l.latent_dim; ++i) {
      uint16_t b = float_to_bf16_bits(latent[i]);
      std::memcpy(row + 2 * i, &b, 2);
    }
  }
  for (int i = 0; i < l.rope_dim; ++i) {
    uint16_t b = float_to_bf16_bits(rope[i]);
    std::memcpy(row + l.rope_offset() + 2 * i, &b, 2);
  }
}

void write_indexer_key(const float* key, int64_t slot, const IndexerLayout& l, uint8_t* cache) {
  if (l.fp8) {
    float amax = 0.f;
    for (int i = 0; i < l.dim; ++i) amax = std::fmax(amax, std::fabs(key[i]));
    float scale = fp8_group_scale(amax);
    uint8_t* k = cache + indexer_key_offset(slot, l.dim);
    for (int i = 0; i < l.dim; ++i) k[i] = float_to_e4m3_bits(key[i] / scale);
    std::memcpy(cache + indexer_scale_offset(slot, l.dim), &scale, 4);
  } else {
    uint8_t* k = cache + slot * 2 * l.dim;
    for (int i = 0; i < l.dim; ++i) {
      uint16_t b = float_to_bf16_bits(key[i]);
      std::memcpy(k + 2 * i, &b, 2);
    }
  }
}

}  // namespace

void validate_kv_write_params(const KvWriteParams& p) {
  check_latent_layout(p.layout, "kv_write");
  require(p.B >= 0, "kv_write: B = " + std::to_string(p.B) + ", expected >= 0");
  if (p.B == 0) return;
  require(p.latent && p.rope && p.slots && p.pool, "kv_write: latent, rope, slots and pool must be non-null");
  require(p.latent_stride >= p.layout.latent_dim,
          "kv_write: latent_stride = " + std::to_string(p.latent_stride) + ", expected >= L = " +
              std::to_string(p.layout.latent_dim));
  require(p.rope_stride >= p.layout.rope_dim, "kv_write: rope_stride = " + std::to_string(p.rope_stride) +
                                                  ", expected >= R = " + std::to_string(p.layout.rope_dim));
}

void kv_write_cpu(const KvWriteParams& p) {
  validate_kv_write_params(p);
  for (int b = 0; b < p.B; ++b) {
    int64_t slot = p.slots[b];
    if (slot < 0) continue;
    write_latent_row(p.latent + int64_t(b) * p.latent_stride, p.rope + int64_t(b) * p.rope_stride, p.layout,
                     p.pool + slot * p.layout.row_bytes);
  }
}

void validate_indexer_key_write_params(const IndexerKeyWriteParams& p) {
  check_indexer_layout(p.layout, "indexer_key_write");
  require(p.B >= 0, "indexer_key_write: B = " + std::to_string(p.B) + ", expected >= 0");
  if (p.B == 0) return;
  require(p.key && p.slots && p.cache, "indexer_key_write: key, slots and cache must be non-null");
}

void indexer_key_write_cpu(const IndexerKeyWriteParams& p) {
  validate_indexer_key_write_params(p);
  for (int b = 0; b < p.B; ++b) {
    if (p.slots[b] < 0) continue;
    write_indexer_key(p.key + int64_t(b) * p.layout.dim, p.slots[b], p.layout, p.cache);
  }
}

void validate_kv_fill_params(const KvFillParams& p) {
  check_latent_layout(p.layout, "kv_fill_random");
  require(p.first_slot >= 0 && p.rows >= 0, "kv_fill_random: first_slot = " + std::to_string(p.first_slot) +
                                                ", rows = " + std::to_string(p.rows) + ", expected both >= 0");
  require(p.pool || p.rows == 0, "kv_fill_random: pool must be non-null");
  if (p.indexer_cache) check_indexer_layout(p.indexer_layout, "kv_fill_random");
}

void kv_fill_random_cpu(const KvFillParams& p) {
  validate_kv_fill_params(p);
  const LatentLayout& l = p.layout;
  std::vector<float> latent(l.latent_dim), rope(l.rope_dim), key(p.indexer_layout.dim);
  for (int64_t r = 0; r < p.rows; ++r) {
    uint64_t slot = uint64_t(p.first_slot + r);
    for (int i = 0; i < l.latent_dim; ++i) latent[i] = rng_normal(p.seed, kFillStreamLatent, slot * l.latent_dim + i);
    for (int i = 0; i < l.rope_dim; ++i) rope[i] = rng_normal(p.seed, kFillStreamRope, slot * l.rope_dim + i);
    write_latent_row(latent.data(), rope.data(), l, p.pool + int64_t(slot) * l.row_bytes);
    if (p.indexer_cache) {
      int d = p.indexer_layout.dim;
      for (int i = 0; i < d; ++i) key[i] = rng_normal(p.seed, kFillStreamIndexer, slot * d + i);
      write_indexer_key(key.data(), int64_t(slot), p.indexer_layout, p.indexer_cache);
    }
  }
}

}  // namespace glm5
