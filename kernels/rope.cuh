// Device body of the rotary position embedding kernel (rope.cu): head h of row r, in place, any
// blockDim (threads stride over the rotated pairs). Shared with fused kernels (attn_prologue.cu).
// Accurate cosf/sinf (not __cosf: positions reach 1e5+ and the fast versions lose accuracy there);
// products rounded separately (__fmul_rn) so the result matches the CPU twin's fp32 arithmetic.
#pragma once
#include "kernels/rope.h"

namespace glm5 {
namespace rope_dev {

__device__ __forceinline__ void rope_head(const RopeParams& p, int r, int h) {
  const int half = p.rope_dim / 2;
  float* x = p.x + size_t(r) * p.row_stride + size_t(h) * p.head_stride + p.offset;
  const float position = float(p.positions[r]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = __fmul_rn(position, p.inv_freq[i]);
    const float c = __fmul_rn(cosf(angle), p.attention_scaling);
    const float s = __fmul_rn(sinf(angle), p.attention_scaling);
    const int ia = p.interleave ? 2 * i : i;
    const int ib = p.interleave ? 2 * i + 1 : i + half;
    const float a = x[ia], b = x[ib];
    x[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    x[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

}  // namespace rope_dev
}  // namespace glm5
