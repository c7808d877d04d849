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

// The dot product of a chunk's 16 codes with its 16 activations, already loaded (xv[q] = x[4q .. 4q+3]).
__device__ __forceinline__ float fp8_dot16(const uint4& codes, const float4 (&xv)[4]) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  float s = 0.f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 a = e4m3x2_to_float2(uint16_t(w[q] & 0xffffu));
    const float2 b = e4m3x2_to_float2(uint16_t(w[q] >> 16));
    s = fmaf(a.x, xv[q].x, s);
    s = fmaf(a.y, xv[q].y, s);
    s = fmaf(b.x, xv[q].z, s);
    s = fmaf(b.y, xv[q].w, s);
  }
  return s;
}

// The same with the activations read from x (16-byte aligned).
__device__ __forceinline__ float fp8_dot16(const uint4& codes, const float* x) {
  float4 xv[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) xv[q] = *reinterpret_cast<const float4*>(x + 4 * q);
  return fp8_dot16(codes, xv);
}

// The chunks of one step of warp_dots_fp8: c[r][u] = the 16 codes of row r at column base + u * 512 (zeros past
// c_end). Separate so a kernel can issue a step's loads before pdl_wait() (weights no kernel of the step writes).
template <int R, int U>
__device__ __forceinline__ void warp_load_fp8(const uint8_t* const (&w)[R], int base, int c_end, uint4 (&c)[R][U]) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = base + u * 512;
      c[r][u] = i < c_end ? __ldg(reinterpret_cast<const uint4*>(w[r] + i)) : make_uint4(0, 0, 0, 0);
    }
}


// One step's math of warp_dots_fp8 (the chunks c at base): acc[r] += s[r][i / 128] * dot16(c[r][u], x[r] + i).
// kSharedX: every x[r] is the same row (the caller guarantees it), so each chunk's 16 activations are loaded once
// for all R rows instead of once per row (the compiler does not merge the R loads: it cannot know the pointers are
// equal). The same values in the same order either way.
template <int R, int U, bool kSharedX>
__device__ __forceinline__ void warp_step_fp8(const float* const (&x)[R], const float* const (&s)[R], int base, int c_end,
                                              const uint4 (&c)[R][U], float (&acc)[R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int i = base + u * 512;
    if (i < c_end) {
      if constexpr (kSharedX) {
        float4 xv[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) xv[q] = *reinterpret_cast<const float4*>(x[0] + i + 4 * q);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fmaf(__ldg(s[r] + i / 128), fp8_dot16(c[r][u], xv), acc[r]);
      } else {
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fmaf(__ldg(s[r] + i / 128), fp8_dot16(c[r][u], x[r] + i), acc[r]);
      }
    }
  }
}

// warp_dots_fp8 with the first step's chunks already in c (warp_load_fp8 at base c_begin + lane * 16): each step's
// math in increasing column order, then the next step's loads into c, so the same arithmetic in the same order as
// warp_dots_fp8. (A double-buffered form, the next step's loads issued before this step's math, was measured on the
// H200 in session 17 in the batch-1 MoE kernels: 63.5 -> 69.5 us gate_up, 38.7 -> 48.4 us down; not kept.)
template <int R, int U, bool kSharedX = false>
__device__ __forceinline__ void warp_dots_fp8_loaded(const float* const (&x)[R], const uint8_t* const (&w)[R],
                                                     const float* const (&s)[R], int c_begin, int c_end, uint4 (&c)[R][U],
                                                     float (&out)[R]) {
  const int lane = threadIdx.x % 32;
  constexpr int kStep = 32 * 16 * U;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  for (int base = c_begin + lane * 16; base < c_end; base += kStep) {
    warp_step_fp8<R, U, kSharedX>(x, s, base, c_end, c, acc);
    if (base + kStep < c_end) warp_load_fp8<R, U>(w, base + kStep, c_end, c);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) out[r] = warp_sum(acc[r]);
}

// out[r] = sum over the warp of x[r][c] * e4m3(w[r][c]) * s[r][c / 128] for c in [c_begin, c_end);
// c_begin and c_end multiples of 16 (c_begin of 512 for full-warp chunks), w[r] + c and x[r] + c 16-byte
// aligned. Every lane returns the sums.
template <int R, int U>
__device__ __forceinline__ void warp_dots_fp8(const float* const (&x)[R], const uint8_t* const (&w)[R],
                                              const float* const (&s)[R], int c_begin, int c_end, float (&out)[R]) {
  uint4 c[R][U];
  const int base = c_begin + int(threadIdx.x % 32) * 16;
  if (base < c_end) warp_load_fp8<R, U>(w, base, c_end, c);
  warp_dots_fp8_loaded<R, U>(x, w, s, c_begin, c_end, c, out);
}

}  // namespace glm5
