// Byte layouts of the paged KV pool (DESIGN.md "KV cache layout"). A pool slot is a token's row:
// slot = page * page_size + offset_in_page. Rows of the latent cache are contiguous per token.
//
// Latent cache row, FP8 (GLM-5: 656 bytes):
//   [0, L)                 L x e4m3 latent values            (L = kv_lora_rank = 512)
//   [L, L + 4*L/G)         L/G x fp32 scales, scale = amax/448 over each group of G = 128 values
//   [L + 4*L/G, +2R)       R x bf16 rope values (not quantized) (R = qk_rope_head_dim = 64)
// Latent cache row, BF16: (L + R) x bf16 = 1152 bytes for GLM-5 (latent then rope).
// A value dequantizes as e4m3_value * scale[group]; G = 128 when L % 128 == 0, else G = L.
//
// Indexer key cache (DSA), FP8 (GLM-5: 132 bytes per token): per page of 64 tokens,
//   [64 x D e4m3 keys][64 x fp32 scales (amax/448 over the token's D values)]
// BF16: D x bf16 per token, contiguous.
#pragma once
#include <cstdint>

#include "common/dtype.h"

namespace glm5 {

constexpr int kPageSize = 64;  // tokens per page of the KV pool

struct LatentLayout {
  int latent_dim = 512;   // L
  int rope_dim = 64;      // R
  bool fp8 = true;
  int group = 128;        // G, values per fp32 scale (fp8 only)
  int row_bytes = 656;    // bytes per token row
  GLM5_HD int num_groups() const { return latent_dim / group; }
  GLM5_HD int scale_offset() const { return latent_dim; }                    // fp8: byte offset of scales
  GLM5_HD int rope_offset() const { return fp8 ? latent_dim + 4 * num_groups() : 2 * latent_dim; }
};
// Throws glm5::Error unless latent_dim % 16 == 0 (and > 0) and rope_dim is even (and >= 0).
// fp8: G = 128 when L % 128 == 0, else G = L; row_bytes = L + 4*L/G + 2*R (GLM-5: 656, glm5-tiny
// L=64, R=32: 132). bf16: row_bytes = 2*(L + R). Rows are always 4-byte multiples, not always 16.
LatentLayout make_latent_layout(int latent_dim, int rope_dim, bool fp8);
// Throws glm5::Error naming `who` unless `l` equals make_latent_layout(l.latent_dim, l.rope_dim, l.fp8)
// (every launcher calls this: a hand-built layout with a stale row_bytes is caught here).
void check_latent_layout(const LatentLayout& l, const char* who);
// BF16 row layout used by the cast paths' scratch buffers (2*(L+R) bytes, latent then rope).
inline LatentLayout bf16_layout_of(const LatentLayout& l) {
  LatentLayout b = l;
  b.fp8 = false;
  b.group = l.latent_dim;
  b.row_bytes = 2 * (l.latent_dim + l.rope_dim);
  return b;
}

struct IndexerLayout {
  int dim = 128;          // D = index_head_dim
  bool fp8 = true;
  GLM5_HD int bytes_per_token() const { return fp8 ? dim + 4 : 2 * dim; }
  GLM5_HD int64_t page_bytes() const { return int64_t(kPageSize) * bytes_per_token(); }
};
// Throws glm5::Error naming `who` unless dim > 0 and dim % 4 == 0.
void check_indexer_layout(const IndexerLayout& l, const char* who);

// FP8 quantization shared by the CPU twins and the CUDA kernels (DESIGN.md "KV cache layout"):
// scale = amax / 448 over a group (1 when amax == 0), q = e4m3(x / scale) rounded to nearest even,
// saturating; a value dequantizes as e4m3(q) * scale.
constexpr float kE4m3Max = 448.f;
GLM5_HD float fp8_group_scale(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }

// Whether `ptr` is 16-byte aligned (the vector paths' 16-byte loads and stores need it).
GLM5_HD bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Byte offsets in the paged FP8 indexer key cache of pool slot `slot` (page = slot / 64).
GLM5_HD int64_t indexer_key_offset(int64_t slot, int dim) {
  return (slot / kPageSize) * int64_t(kPageSize) * (dim + 4) + (slot % kPageSize) * dim;
}
GLM5_HD int64_t indexer_scale_offset(int64_t slot, int dim) {
  return (slot / kPageSize) * int64_t(kPageSize) * (dim + 4) + int64_t(kPageSize) * dim + (slot % kPageSize) * 4;
}

}  // namespace glm5
