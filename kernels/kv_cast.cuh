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
