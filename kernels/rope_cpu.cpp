// CPU twin of rotary position embedding: fp32 throughout, angle = float(position) * inv_freq[i] as
// HF's GlmMoeDsaRotaryEmbedding (inv_freq @ position_ids in fp32), cos/sin in fp32.
#include <cmath>
#include <string>

#include "common/error.h"
#include "kernels/rope.h"

namespace glm5 {

void validate_rope_params(const RopeParams& p, const char* op) {
  const std::string where = std::string(op) + ": RopeParams.";
  require(p.x != nullptr, where + "x is null");
  require(p.positions != nullptr, where + "positions is null");
  require(p.inv_freq != nullptr, where + "inv_freq is null");
  require(p.rows > 0, where + "rows = " + std::to_string(p.rows) + ", expected > 0");
  require(p.heads > 0, where + "heads = " + std::to_string(p.heads) + ", expected > 0");
  require(p.rope_dim > 0 && p.rope_dim % 2 == 0,
          where + "rope_dim = " + std::to_string(p.rope_dim) + ", expected a positive even number");
  require(p.offset >= 0, where + "offset = " + std::to_string(p.offset) + ", expected >= 0");
  require(p.heads == 1 || p.head_stride >= p.offset + p.rope_dim,
          where + "head_stride = " + std::to_string(p.head_stride) + ", expected >= offset + rope_dim = " +
              std::to_string(p.offset + p.rope_dim));
  require(p.rows == 1 || p.row_stride >= (p.heads - 1) * p.head_stride + p.offset + p.rope_dim,
          where + "row_stride = " + std::to_string(p.row_stride) + ", expected >= the span of one row's heads (" +
              std::to_string((p.heads - 1) * p.head_stride + p.offset + p.rope_dim) + ")");
}

void rope_cpu(const RopeParams& p) {
  validate_rope_params(p, "rope_cpu");
  const int half = p.rope_dim / 2;
  for (int r = 0; r < p.rows; ++r) {
    const float position = float(p.positions[r]);
    for (int h = 0; h < p.heads; ++h) {
      float* x = p.x + size_t(r) * p.row_stride + size_t(h) * p.head_stride + p.offset;
      for (int i = 0; i < half; ++i) {
        const float angle = position * p.inv_freq[i];
        const float c = std::cos(angle) * p.attention_scaling;
        const float s = std::sin(angle) * p.attention_scaling;
        float* a = p.interleave ? &x[2 * i] : &x[i];
        float* b = p.interleave ? &x[2 * i + 1] : &x[i + half];
        const float a0 = *a, b0 = *b;
        *a = a0 * c - b0 * s;
        *b = b0 * c + a0 * s;
      }
    }
  }
}

}  // namespace glm5
