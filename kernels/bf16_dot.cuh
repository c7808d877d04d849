// BF16 x fp32 dot products of one 16-byte chunk (8 BF16 weights) for the GEMV-style kernels
// (linear_bf16.cu, mla_absorb.cu). A BF16 value's bits shifted left by 16 are its fp32 bits (exact).
#pragma once
#include <cstdint>

namespace glm5 {

// sum_i w[i] * x[i] over the 8 BF16 weights of `w` and x = (a.x .. a.w, b.x .. b.w), fmaf in index order.
__device__ __forceinline__ float dot8_bf16(const uint4& w, const float4& a, const float4& b) {
  float s = 0.f;
  s = fmaf(__uint_as_float(w.x << 16), a.x, s);
  s = fmaf(__uint_as_float(w.x & 0xffff0000u), a.y, s);
  s = fmaf(__uint_as_float(w.y << 16), a.z, s);
  s = fmaf(__uint_as_float(w.y & 0xffff0000u), a.w, s);
  s = fmaf(__uint_as_float(w.z << 16), b.x, s);
  s = fmaf(__uint_as_float(w.z & 0xffff0000u), b.y, s);
  s = fmaf(__uint_as_float(w.w << 16), b.z, s);
  s = fmaf(__uint_as_float(w.w & 0xffff0000u), b.w, s);
  return s;
}

// The 8 BF16 weights of `w` as fp32, in index order.
__device__ __forceinline__ void unpack8_bf16(const uint4& w, float (&out)[8]) {
  out[0] = __uint_as_float(w.x << 16);
  out[1] = __uint_as_float(w.x & 0xffff0000u);
  out[2] = __uint_as_float(w.y << 16);
  out[3] = __uint_as_float(w.y & 0xffff0000u);
  out[4] = __uint_as_float(w.z << 16);
  out[5] = __uint_as_float(w.z & 0xffff0000u);
  out[6] = __uint_as_float(w.w << 16);
  out[7] = __uint_as_float(w.w & 0xffff0000u);
}

}  // namespace glm5
