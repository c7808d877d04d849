// Warp tile of the tensor-core FP8 kernels (linear_fp8_mma_cuda in linear_fp8.cu, the expert-grouped
// MoE kernels in moe.cu): acc[m-tile][n-tile][4] = sum over columns [c_lo, c_hi) of W rows x token rows,
// W e4m3 with 128x128 block scales, tokens fp32 rounded to f16 per (token, 128-column block) with a
// power-of-two scale (fp8_mma_scale_exp, kernels/linear_fp8.h, which documents the numerics).
//
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 fragments (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"; g = lane / 4, t = lane % 4):
//   A (16 x 16, row): reg0 = (row g, k 2t..2t+1), reg1 = (row g+8, k 2t..2t+1),
//                     reg2 = (row g, k 2t+8..2t+9), reg3 = (row g+8, k 2t+8..2t+9)  (low half = lower k)
//   B (16 x 8, col):  reg0 = (k 2t..2t+1, column g), reg1 = (k 2t+8..2t+9, column g)
//   C (16 x 8, f32):  c0, c1 = (row g, columns 2t, 2t+1), c2, c3 = (row g+8, columns 2t, 2t+1)
// k permutation: in a 64-column chunk, lane (g, t) loads bytes [16t, 16t + 16) of W rows g and g+8
// (one 16-byte load each, no shared memory); mma step s (0..3) takes bytes 16t + 4s + {0, 1} as logical
// k {2t, 2t+1} (the low 16 bits of word s) and 16t + 4s + {2, 3} as logical k {2t+8, 2t+9} (the high 16
// bits). Over t and s this is a bijection of the 64 columns and B uses the same map (the dot product is
// invariant when both operands are permuted alike): lane (g, t) holds token g's x at columns
// 16t + 4s + {0..3}, i.e. 16 contiguous fp32 values per chunk (4 float4 loads).
// Per 128-column block (2 chunks): 4 MT 16-byte W loads per lane issued first, then per n-tile the x
// loads, the block's power-of-two scale (amax over the quad's 4 lanes x 2 chunks = the token's 128
// columns, quad shuffles), the f16 fragments, and MT x 8 mma into a temporary, promoted as
// acc += (w_scale * 2^-e) * tmp (the scales of C's tokens 2t, 2t+1 come from quads 2t, 2t+1).
#pragma once
#include <cstdint>

#include <cuda_fp16.h>

#include "kernels/linear.h"
#include "kernels/linear_fp8.h"
#include "kernels/mma_sync.cuh"

namespace glm5 {

__device__ __forceinline__ uint32_t f16x2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);  // .x (low 16 bits) = lo, round to nearest even
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t uint4_word(const uint4& v, int s) {
  return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w;
}

// The weight feed of a warp tile step, shared with bf16_mma_warp_tile (kernels/linear_bf16_mma.cuh): lane
// (g, t) loads the 16 bytes at byte offsets b0 + 64 ch + 16 t (ch = 0, 1: two 64-byte chunks) of W rows
// wrow[i][h] (16 i + g + 8 h of the warp's rows); zeros and no load at or past byte b_hi (the caller's c_hi in
// bytes, a multiple of 16: a lane's 16 bytes are all in or out). dst[i][ch][h].
template <int MT>
__device__ __forceinline__ void mma_tile_load_w(uint4 (&dst)[MT][2][2], const uint8_t* const (&wrow)[MT][2], int b0,
                                                int b_hi, int t) {
#pragma unroll
  for (int ch = 0; ch < 2; ++ch) {
    const int b = b0 + 64 * ch + 16 * t;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        dst[i][ch][h] = b < b_hi ? __ldg(reinterpret_cast<const uint4*>(wrow[i][h] + b)) : make_uint4(0, 0, 0, 0);
  }
}

// The step's W fragments: without PF loaded now (step at byte b0); with PF taken from next, whose loads for the
// step at byte b_next are then issued (a register double buffer: they fly while the warp computes this step).
template <int MT, bool PF>
__device__ __forceinline__ void mma_tile_step_w(uint4 (&wv)[MT][2][2], uint4 (&next)[MT][2][2],
                                                const uint8_t* const (&wrow)[MT][2], int b0, int b_next, int b_hi,
                                                int t) {
  if constexpr (PF) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int ch = 0; ch < 2; ++ch)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[i][ch][h] = next[i][ch][h];
    mma_tile_load_w<MT>(next, wrow, b_next, b_hi, t);  // past b_hi: zeros, no load
  } else {
    mma_tile_load_w<MT>(wv, wrow, b0, b_hi, t);
  }
}

template <int MT, int NT>
__device__ __forceinline__ void mma_tile_zero(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;
}

// wrow[i][h]: W row (16 i + g + 8 h of the warp's rows) as bytes, column 0 (rows past the end: any valid
// row, its results unused); srow[i]: m-tile i's block-scale row (indexed by column / 128); xrow[j]: this
// lane's token (token g of n-tile j) as fp32, column 0, or null for a missing token (zeros). Only the
// first nt_active n-tiles are computed (warp-uniform). Columns [c_lo, c_hi): c_lo a multiple of 128,
// c_hi a multiple of 16; rows and xrow 16-byte aligned. acc is overwritten.
// PF (prefetch): the next block's W loads are issued before this block's math (a register double
// buffer, + 16 MT registers): W bytes stay in flight while the warp converts and multiplies.
template <int MT, int NT, bool PF = false>
__device__ __forceinline__ void fp8_mma_warp_tile(const uint8_t* const (&wrow)[MT][2], const float* const (&srow)[MT],
                                                  const float* const (&xrow)[NT], int nt_active, int c_lo, int c_hi,
                                                  float (&acc)[MT][NT][4]) {
  const int lane = threadIdx.x % 32, t = lane % 4;
  mma_tile_zero(acc);
  uint4 wnext[MT][2][2];  // PF only
  if constexpr (PF) mma_tile_load_w<MT>(wnext, wrow, c_lo, c_hi, t);
  for (int kb0 = c_lo; kb0 < c_hi; kb0 += kFp8WeightBlock) {
    uint4 wv[MT][2][2];  // [m-tile][chunk][row g / g+8]; one byte per column
    mma_tile_step_w<MT, PF>(wv, wnext, wrow, kb0, kb0 + kFp8WeightBlock, c_hi, t);
    float ws[MT];
#pragma unroll
    for (int i = 0; i < MT; ++i) ws[i] = __ldg(srow[i] + kb0 / kFp8WeightBlock);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if (j >= nt_active) break;  // warp-uniform
      float xv[2][16];
      float amax = 0.f;
#pragma unroll
      for (int ch = 0; ch < 2; ++ch) {
        const int c = kb0 + 64 * ch + 16 * t;
        const bool ok = xrow[j] != nullptr && c < c_hi;  // c_hi % 16 == 0: a lane's 16 columns are all in or out
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float4 v = ok ? __ldg(reinterpret_cast<const float4*>(xrow[j] + c) + q) : make_float4(0.f, 0.f, 0.f, 0.f);
          xv[ch][4 * q] = v.x;
          xv[ch][4 * q + 1] = v.y;
          xv[ch][4 * q + 2] = v.z;
          xv[ch][4 * q + 3] = v.w;
          amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
      }
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      const int e = fp8_mma_scale_exp(amax);
      const float scale = __uint_as_float(uint32_t(127 + e) << 23), inv = __uint_as_float(uint32_t(127 - e) << 23);
      uint32_t b[2][4][2];
#pragma unroll
      for (int ch = 0; ch < 2; ++ch)
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          b[ch][s][0] = f16x2_bits(xv[ch][4 * s] * scale, xv[ch][4 * s + 1] * scale);
          b[ch][s][1] = f16x2_bits(xv[ch][4 * s + 2] * scale, xv[ch][4 * s + 3] * scale);
        }
      const float inv0 = __shfl_sync(0xffffffffu, inv, 8 * t), inv1 = __shfl_sync(0xffffffffu, inv, 8 * t + 4);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        float tmp[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int ch = 0; ch < 2; ++ch)
#pragma unroll
          for (int s = 0; s < 4; ++s) {
            const uint32_t lo = uint4_word(wv[i][ch][0], s), hi = uint4_word(wv[i][ch][1], s);
            mma_16816_f16(tmp, e4m3x2_to_f16x2(lo), e4m3x2_to_f16x2(hi), e4m3x2_to_f16x2(lo >> 16),
                          e4m3x2_to_f16x2(hi >> 16), b[ch][s][0], b[ch][s][1]);
          }
        const float s0 = ws[i] * inv0, s1 = ws[i] * inv1;
        acc[i][j][0] = fmaf(s0, tmp[0], acc[i][j][0]);
        acc[i][j][1] = fmaf(s1, tmp[1], acc[i][j][1]);
        acc[i][j][2] = fmaf(s0, tmp[2], acc[i][j][2]);
        acc[i][j][3] = fmaf(s1, tmp[3], acc[i][j][3]);
      }
    }
  }
}

}  // namespace glm5
