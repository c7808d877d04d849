// Device helpers shared by the KV kernels (kv_cast.cu, mla_decode.cu, indexer.cu, kv_cache.cu):
// FP8 e4m3 <-> float with the hardware converts (sm_89+: cvt.rn.f16x2.e4m3x2 is exact, e4m3 is a
// subset of f16; cvt.rn.satfinite.e4m3x2.f32 rounds to nearest even and saturates like
// glm5::float_to_e4m3_bits), and the cast paths' dequantization round_bf16(e4m3 * scale).
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace glm5 {

// Two e4m3 codes (low byte first) -> two floats, exactly.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint16_t two) {
  __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two), __NV_E4M3);
  return __half22float2(__half2(raw));
}

// Four e4m3 codes packed in a little-endian word, dequantized with `scale` and rounded to bf16
// (two bf16x2 words, element order preserved): the value math of kv_cast / mla_decode's fp8 path.
__device__ __forceinline__ uint2 dequant4_bf16(uint32_t word, float scale) {
  float2 a = e4m3x2_to_float2(uint16_t(word & 0xffffu));
  float2 b = e4m3x2_to_float2(uint16_t(word >> 16));
  __nv_bfloat162 lo = __float22bfloat162_rn(make_float2(a.x * scale, a.y * scale));
  __nv_bfloat162 hi = __float22bfloat162_rn(make_float2(b.x * scale, b.y * scale));
  uint2 out;
  out.x = *reinterpret_cast<uint32_t*>(&lo);
  out.y = *reinterpret_cast<uint32_t*>(&hi);
  return out;
}

// Sixteen e4m3 codes (one 16-byte chunk) -> sixteen bf16 as dequant4_bf16: codes 0..7 to out[0], 8..15 to out[1].
__device__ __forceinline__ void dequant16_bf16(uint4 codes, float scale, uint4* out) {
  const uint2 a = dequant4_bf16(codes.x, scale), b = dequant4_bf16(codes.y, scale);
  const uint2 c = dequant4_bf16(codes.z, scale), d = dequant4_bf16(codes.w, scale);
  out[0] = make_uint4(a.x, a.y, b.x, b.y);
  out[1] = make_uint4(c.x, c.y, d.x, d.y);
}

// Two e4m3 codes (low byte first) times `scale2` as fp16x2 (low half first): the code converts exactly (e4m3 is a
// subset of fp16) and the fp16 product rounds once. The F16-operand wgmma MLA's dequantization
// (MlaDecodeKernel::WgmmaF16): one convert and one multiply per two codes, where dequant4_bf16 spends six
// instructions (two converts to fp32, two multiplies, one pack) per two. (S28d also timed integer operations in
// place of the convert -- the code's bits placed as fp16 s0eeeemmm0000000 = value x 2^-8, times fp16(256 scale):
// byte permute, and, add, shift per pair -- and found the kernel 3.6% slower than with the convert.)
__device__ __forceinline__ uint32_t e4m3x2_mul_f16x2(uint16_t two, __half2 scale2) {
  const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two), __NV_E4M3);
  const __half2 v = __hmul2(__half2(raw), scale2);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// Sixteen e4m3 codes (one 16-byte chunk) -> sixteen fp16 as e4m3x2_mul_f16x2: codes 0..7 to out[0], 8..15 to out[1].
__device__ __forceinline__ void dequant16_f16(uint4 codes, __half2 scale2, uint4* out) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t h[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    h[2 * i] = e4m3x2_mul_f16x2(uint16_t(w[i] & 0xffffu), scale2);
    h[2 * i + 1] = e4m3x2_mul_f16x2(uint16_t(w[i] >> 16), scale2);
  }
  out[0] = make_uint4(h[0], h[1], h[2], h[3]);
  out[1] = make_uint4(h[4], h[5], h[6], h[7]);
}
// Eight bf16 (one 16-byte chunk, element order kept) -> eight fp16, rounded to nearest (the rope of an FP8 row for
// the F16-operand kernel; exact for |x| in fp16's normal range with at most 8 significant bits, which bf16 has).
__device__ __forceinline__ uint4 bf16x8_to_f16x8(uint4 v) {
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float lo = __uint_as_float(w[i] << 16), hi = __uint_as_float(w[i] & 0xffff0000u);
    const __half2 h = __floats2half2_rn(lo, hi);
    w[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Four e4m3 codes -> four floats times `scale` (no bf16 rounding: the indexer's key math).
__device__ __forceinline__ float4 dequant4_f32(uint32_t word, float scale) {
  float2 a = e4m3x2_to_float2(uint16_t(word & 0xffffu));
  float2 b = e4m3x2_to_float2(uint16_t(word >> 16));
  return make_float4(a.x * scale, a.y * scale, b.x * scale, b.y * scale);
}

// Saturating round-to-nearest-even float -> e4m3 code (bit-identical to float_to_e4m3_bits).
__device__ __forceinline__ uint8_t float_to_e4m3_device(float x) {
  return uint8_t(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace glm5
