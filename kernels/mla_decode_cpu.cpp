// CPU twin of mla_decode.h: sparse MLA decode in latent space, plain fp32 loops, two-pass softmax.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/dtype.h"  // round_f16
#include "common/error.h"
#include "kernels/kv_cast.h"
#include "kernels/mla_decode.h"

namespace glm5 {

void validate_mla_decode_params(const MlaDecodeParams& p) {
  check_latent_layout(p.layout, "mla_decode");
  require(p.B >= 0 && p.H >= 0 && p.topk >= 0, "mla_decode: B = " + std::to_string(p.B) + ", H = " +
                                                    std::to_string(p.H) + ", topk = " + std::to_string(p.topk) +
                                                    ", expected all >= 0");
  require(p.s_q >= 1, "mla_decode: s_q = " + std::to_string(p.s_q) + ", expected >= 1 query tokens per request");
  require(p.crossover >= 0 && p.crossover <= 2,
          "mla_decode: crossover = " + std::to_string(p.crossover) + ", expected 0 (auto), 1 (off) or 2 (on)");
  if (p.B == 0 || p.H == 0) return;
  require(p.q_latent && p.q_rope && p.out, "mla_decode: q_latent, q_rope and out must be non-null");
  require(p.topk == 0 || (p.kv && p.indices), "mla_decode: kv and indices must be non-null when topk > 0");
  require(p.q_rope_head_stride >= p.layout.rope_dim || p.H == 1,
          "mla_decode: q_rope_head_stride = " + std::to_string(p.q_rope_head_stride) + ", expected >= R = " +
              std::to_string(p.layout.rope_dim));
  require(p.q_rope_row_stride >= 0, "mla_decode: q_rope_row_stride must be >= 0");
  if (p.l2_prefetch) {
    require(p.l2_prefetch_head_bytes > 0 && p.l2_prefetch_head_bytes % 16 == 0,
            "mla_decode: l2_prefetch_head_bytes = " + std::to_string(p.l2_prefetch_head_bytes) +
                ", expected a positive multiple of 16 when l2_prefetch is set");
    require(p.l2_prefetch_head_stride >= 0 && p.l2_prefetch_head_stride % 16 == 0 &&
                (reinterpret_cast<uintptr_t>(p.l2_prefetch) & 15u) == 0,
            "mla_decode: l2_prefetch and l2_prefetch_head_stride (" + std::to_string(p.l2_prefetch_head_stride) +
                ") must be 16-byte aligned");
  }
}

int mla_decode_heads_per_cta(const MlaDecodeParams& p) {
  if (p.heads_per_cta > 0) return p.heads_per_cta;
  // One request of more than 16 query heads: 16-head slices. Measured on the H200 (2026-11-29, bench
  // kernels --only mla, GLM-5 H = 64, top-k 2048, FP8 rows): 20.8 us with 16-head slices and 32 splits
  // against 26.1 us with 64 heads and 64 splits; at B = 8 the 64-head CTAs win (40.9 vs 61.6 us).
  const int hq = p.H * p.s_q;
  return p.B == 1 && hq > 16 && hq <= 64 ? 16 : 64;
}

int mla_decode_num_splits(int B, int H, int topk, int heads_per_cta) {
  // The tensor-core kernel runs one CTA per SM (~165 KB of shared memory) and one CTA per (request,
  // 64 heads, chunk): split until the grid holds about one wave of the H200's 132 SMs, never more.
  constexpr int kRowsPerTile = 32, kSms = 132;
  const int kHeadsPerBlock = heads_per_cta > 0 ? heads_per_cta : 64;
  if (B <= 0 || H <= 0 || topk <= kRowsPerTile) return 1;
  const int64_t tiles = (topk + kRowsPerTile - 1) / kRowsPerTile;
  const int64_t blocks = int64_t(B) * ((H + kHeadsPerBlock - 1) / kHeadsPerBlock);
  int64_t s = std::min<int64_t>(kSms / blocks, tiles);
  if (s <= 1) return 1;
  const int64_t tiles_per_split = (tiles + s - 1) / s;
  return int((tiles + tiles_per_split - 1) / tiles_per_split);
}

size_t mla_decode_workspace_bytes(int B, int H, int topk, int L) {
  const int s = mla_decode_num_splits(B, H, topk);
  if (s <= 1 || L <= 0) return 0;
  return size_t(B) * size_t(H) * size_t(s) * (size_t(L) + 2) * sizeof(float);
}

// FP8 row -> the fp32 values of its L + R fp16 operands in the WgmmaF16 kernel: latent i is
// f16(e4m3(code) * f16(scale)) (kv_cast.cuh's e4m3x2_mul_f16x2: the code exact in fp16, one rounded product), the
// rope f16(bf16).
void dequant_latent_row_f16(const uint8_t* row, const LatentLayout& l, float* out) {
  for (int i = 0; i < l.latent_dim; ++i) {
    float scale;
    std::memcpy(&scale, row + l.scale_offset() + 4 * (i / l.group), 4);
    out[i] = round_f16(e4m3_bits_to_float(row[i]) * round_f16(scale));
  }
  for (int i = 0; i < l.rope_dim; ++i) {
    uint16_t b;
    std::memcpy(&b, row + l.rope_offset() + 2 * i, 2);
    out[l.latent_dim + i] = round_f16(bf16_bits_to_float(b));
  }
}

void mla_decode_cpu(const MlaDecodeParams& p) {
  validate_mla_decode_params(p);
  const int L = p.layout.latent_dim, R = p.layout.rope_dim, W = L + R;
  const bool f16_rows = p.kernel == MlaDecodeKernel::WgmmaF16 && p.layout.fp8;
  std::vector<float> rows(size_t(p.topk) * W);
  std::vector<char> valid(p.topk);
  std::vector<uint16_t> bf(W);
  std::vector<float> s(p.topk);
  for (int b = 0; b < p.B; ++b) {
    // Selected rows of this request as fp32 (latent then rope).
    for (int j = 0; j < p.topk; ++j) {
      int32_t t = p.indices[int64_t(b) * p.topk + j];
      valid[j] = t >= 0;
      if (!valid[j]) continue;
      const uint8_t* row = p.kv + int64_t(t) * p.layout.row_bytes;
      if (f16_rows) {
        dequant_latent_row_f16(row, p.layout, &rows[size_t(j) * W]);
        continue;
      }
      if (p.layout.fp8) dequant_latent_row_bf16(row, p.layout, bf.data());
      else std::memcpy(bf.data(), row, 2 * W);
      for (int i = 0; i < W; ++i) rows[size_t(j) * W + i] = bf16_bits_to_float(bf[i]);
    }
    for (int hq = 0; hq < p.s_q * p.H; ++hq) {  // query head hq = t * H + h of request b
      const int64_t bt = int64_t(b) * p.s_q + hq / p.H, h = hq % p.H;
      const float* ql = p.q_latent + (bt * p.H + h) * L;
      const float* qr = p.q_rope + bt * p.q_rope_row_stride + h * p.q_rope_head_stride;
      float* o = p.out + (bt * p.H + h) * L;
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < p.topk; ++j) {
        if (!valid[j]) continue;
        const float* c = &rows[size_t(j) * W];
        float dot = 0.f;
        for (int i = 0; i < L; ++i) dot += ql[i] * c[i];
        for (int i = 0; i < R; ++i) dot += qr[i] * c[L + i];
        s[j] = p.scale * dot;
        m = std::fmax(m, s[j]);
      }
      for (int i = 0; i < L; ++i) o[i] = 0.f;
      if (m == -std::numeric_limits<float>::infinity()) {  // no valid index: out = 0, lse = -inf
        if (p.lse) p.lse[bt * p.H + h] = m;
        continue;
      }
      float sum = 0.f;
      for (int j = 0; j < p.topk; ++j) {
        if (!valid[j]) continue;
        float e = std::exp(s[j] - m);
        sum += e;
        const float* c = &rows[size_t(j) * W];
        for (int i = 0; i < L; ++i) o[i] += e * c[i];
      }
      for (int i = 0; i < L; ++i) o[i] /= sum;
      if (p.lse) p.lse[bt * p.H + h] = m + std::log(sum);
    }
  }
}

}  // namespace glm5
