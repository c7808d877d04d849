// Scalar formats of weights and the KV cache, with host (and device) conversions that round the
// same way as the hardware: bf16 round-to-nearest-even, e4m3 (OCP FP8 E4M3FN, max 448, no inf,
// saturating) round-to-nearest-even.
#pragma once
#include <cstdint>
#include <cmath>
#include <cstring>
#include <string>

#if defined(__CUDACC__)
#define GLM5_HD __host__ __device__ __forceinline__
#else
#define GLM5_HD inline
#endif

namespace glm5 {

enum class DType { F32, BF16, F16, F8_E4M3, I32, I64 };

// Bytes per element. F8_E4M3 = 1.
GLM5_HD int dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: return 2;
    case DType::F8_E4M3: return 1;
    case DType::I64: return 8;
  }
  return 0;
}
std::string dtype_name(DType t);  // "F32", "BF16", ... (safetensors spelling)

GLM5_HD float bf16_bits_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
GLM5_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return uint16_t((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return uint16_t(u >> 16);
}
// Rounds a float to the nearest bf16 value (returned as float).
GLM5_HD float round_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

// float -> IEEE binary16 bits, round to nearest even (what __float2half_rn / cvt.rn.f16.f32 do): subnormals kept
// (steps of 2^-24), |f| >= 65520 (halfway between 65504 and 2^16) to inf, NaN stays NaN (quiet).
GLM5_HD uint16_t float_to_f16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520: inf
  if (a >= 0x38800000u) {                                 // >= 2^-14: normal; rebias 127 -> 15, keep 10 bits
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return uint16_t(sign | uint16_t(r >> 13));
  }
  const uint32_t e = a >> 23;  // subnormal result k * 2^-24: k = m * 2^(e - 126), m the 24-bit significand
  if (e < 102) return sign;    // below 2^-25: rounds to zero
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, s = 126u - e;  // s in [14, 24]
  uint32_t k = m >> s;
  const uint32_t rest = m & ((1u << s) - 1u), half = 1u << (s - 1);
  if (rest > half || (rest == half && (k & 1u))) ++k;  // k == 1024 encodes 2^-14, the smallest normal
  return uint16_t(sign | uint16_t(k));
}
GLM5_HD float f16_bits_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0) v = float(man) * (1.0f / 16777216.0f);          // subnormal: man * 2^-24
  else if (exp == 31) v = man ? __builtin_nanf("") : __builtin_inff();
  else {
    uint32_t u = ((exp + 112u) << 23) | (man << 13);
    memcpy(&v, &u, 4);
  }
  return sign ? -v : v;
}
// Rounds a float to the nearest f16 value (returned as float): the CPU twins' model of a __float2half_rn.
GLM5_HD float round_f16(float f) { return f16_bits_to_float(float_to_f16_bits(f)); }

// OCP FP8 E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa; 0x7f/0xff are NaN; max finite 448.
GLM5_HD float e4m3_bits_to_float(uint8_t b) {
  uint32_t sign = b >> 7, exp = (b >> 3) & 0xfu, man = b & 0x7u;
  float v;
  if (exp == 0xf && man == 0x7) v = __builtin_nanf("");
  else if (exp == 0) v = float(man) * 0.001953125f;  // man/8 * 2^-6
  else {
    uint32_t u = ((exp + 120u) << 23) | (man << 20);
    memcpy(&v, &u, 4);
  }
  return sign ? -v : v;
}
// Saturating round-to-nearest-even conversion (as cvt.rn.satfinite.e4m3x2.f32 does).
GLM5_HD uint8_t float_to_e4m3_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint8_t sign = uint8_t((u >> 24) & 0x80u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return uint8_t(sign | 0x7f);  // NaN
  float a = f < 0 ? -f : f;
  if (a >= 464.0f) return uint8_t(sign | 0x7e);  // saturate to 448 (464 is the rounding midpoint)
  if (a < 0.015625f) {                           // subnormal range: step 2^-9
    float q = a * 512.0f;
    float r = rintf(q);                // ties to even under the default rounding mode
    return uint8_t(sign | uint8_t(r));           // r == 8 encodes the smallest normal, as wanted
  }
  uint32_t au;
  memcpy(&au, &a, 4);
  uint32_t exp = (au >> 23) - 120u;              // e4m3 exponent field
  uint32_t man = au & 0x7fffffu;
  uint32_t keep = man >> 20, rest = man & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) keep++;
  if (keep == 8) { keep = 0; exp++; }
  return uint8_t(sign | uint8_t(exp << 3) | uint8_t(keep));
}

}  // namespace glm5
