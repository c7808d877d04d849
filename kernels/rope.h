// Rotary position embedding on a slice of each head, in place, fp32.
// For pair i of the rope slice (i < rope_dim/2), angle = position * inv_freq[i] (fp32, as HF's
// GlmMoeDsaRotaryEmbedding computes it), and (a, b) -> (a cos - b sin, b cos + a sin) where
//   interleave = false (HF apply_rotary_pos_emb, "rotate_half"): a = x[i], b = x[i + rope_dim/2]
//   interleave = true  (DeepSeek reference apply_rotary_emb):     a = x[2i], b = x[2i + 1]
// cos/sin are multiplied by `attention_scaling` (1 except YaRN).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace glm5 {

struct RopeParams {
  float* x;                  // [rows, heads, ...]: head h of row r starts at x + r*row_stride + h*head_stride
  const int32_t* positions;  // [rows] token position of each row
  const float* inv_freq;     // [rope_dim/2] inverse frequencies (host or device, like x)
  int rows = 0;
  int heads = 0;
  int row_stride = 0;        // floats between rows
  int head_stride = 0;       // floats between heads
  int offset = 0;            // first rope element inside the head
  int rope_dim = 0;          // rotated elements (even)
  bool interleave = false;
  float attention_scaling = 1.f;
};

// Throws glm5::Error naming the field unless x, positions, inv_freq are non-null, rows, heads > 0,
// rope_dim > 0 and even, offset >= 0, head_stride >= offset + rope_dim (when heads > 1) and
// row_stride covers one row's heads (when rows > 1). `op` names the caller. Both twins call it.
void validate_rope_params(const RopeParams& p, const char* op);

void rope_cpu(const RopeParams& p);
void rope_cuda(const RopeParams& p, cudaStream_t stream);

}  // namespace glm5
