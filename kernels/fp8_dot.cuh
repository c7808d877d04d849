// Warp-level dot products of fp32 activations with FP8 (e4m3) weight rows carrying one fp32 scale per
// 128 columns (128x128 block-scaled weights), for the memory-bound FP8 kernels (linear_fp8.cu, moe.cu).
// Each lane takes 16 consecutive codes per chunk (one 16-byte load; 32 lanes cover 512 contiguous
// bytes) and issues the loads of U chunks of all R rows before any math, so R*U*16 bytes per lane are
// in flight (a warp on a single row and chunk keeps only 512 B in flight: ~1/4 of what HBM needs).
// Per row, chunks are accumulated in increasing column order as part = sum_16(code * x) from 0, then
// acc = fma(scale, part, acc): the same arithmetic in the same order whatever R and U are.
#pragma once
#include <cstdint>

#include "kernels/kv_cast.cuh"

namespace glm5 {

__device__ __forceinline__ float fp8_dot16(const uint4& codes, const float* x) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  float s = 0.f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float4 xv = *reinterpret_cast<const float4*>(x + 4 * q);
    const float2 a = e4m3x2_to_float2(uint16_t(w[q] & 0xffffu));
    const float2 b = e4m3x2_to_float2(uint16_t(w[q] >> 16));
    s = fmaf(a.x, xv.x, s);
    s = fmaf(a.y, xv.y, s);
    s = fmaf(b.x, xv.z, s);
    s = fmaf(b.y, xv.w, s);
  }
  return s;
}

// out[r] = sum over the warp of x[r][c] * e4m3(w[r][c]) * s[r][c / 128] for c in [c_begin, c_end);
// c_begin and c_end multiples of 16 (c_begin of 512 for full-warp chunks), w[r] + c and x[r] + c 16-byte
// aligned. Every lane returns the sums.
template <int R, int U>
__device__ __forceinline__ void warp_dots_fp8(const float* const (&x)[R], const uint8_t* const (&w)[R],
                                              const float* const (&s)[R], int c_begin, int c_end, float (&out)[R]) {
  const int lane = threadIdx.x % 32;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  for (int base = c_begin + lane * 16; base < c_end; base += 32 * 16 * U) {
    uint4 c[R][U];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int i = base + u * 512;
        c[r][u] = i < c_end ? __ldg(reinterpret_cast<const uint4*>(w[r] + i)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = base + u * 512;
      if (i < c_end) {
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fmaf(__ldg(s[r] + i / 128), fp8_dot16(c[r][u], x[r] + i), acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) out[r] = warp_sum(acc[r]);
}

}  // namespace glm5
