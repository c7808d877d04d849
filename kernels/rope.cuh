// Device body of the rotary position embedding kernel (rope.cu): head h of row r, in place, any
// blockDim (threads stride over the rotated pairs). Shared with fused kernels (attn_prologue.cu).
// Accurate cosf/sinf (not __cosf: positions reach 1e5+ and the fast versions lose accuracy there);
// products rounded separately (__fmul_rn) so the result matches the CPU twin's fp32 arithmetic.
#pragma once
#include "kernels/rope.h"

namespace glm5 {
namespace rope_dev {

// One rotated pair (a, b) of a token at `position`, pair frequency `inv_freq`: rope_head's arithmetic, for kernels
// that hold the pair in registers (the FP8 GEMV's output RoPE, linear.h LinearGroupParams::rope).
__device__ __forceinline__ void rope_pair(float& a, float& b, float position, float inv_freq, float scaling) {
  const float angle = __fmul_rn(position, inv_freq);
  const float c = __fmul_rn(cosf(angle), scaling);
  const float s = __fmul_rn(sinf(angle), scaling);
  const float a0 = a, b0 = b;
  a = __fsub_rn(__fmul_rn(a0, c), __fmul_rn(b0, s));
  b = __fadd_rn(__fmul_rn(b0, c), __fmul_rn(a0, s));
}

__device__ __forceinline__ void rope_head(const RopeParams& p, int r, int h) {
  const int half = p.rope_dim / 2;
  float* x = p.x + size_t(r) * p.row_stride + size_t(h) * p.head_stride + p.offset;
  const float position = float(p.positions[r]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const int ia = p.interleave ? 2 * i : i;
    const int ib = p.interleave ? 2 * i + 1 : i + half;
    float a = x[ia], b = x[ib];
    rope_pair(a, b, position, p.inv_freq[i], p.attention_scaling);
    x[ia] = a;
    x[ib] = b;
  }
}

}  // namespace rope_dev
}  // namespace glm5
