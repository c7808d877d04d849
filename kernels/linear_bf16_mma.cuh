// Warp tile of the tensor-core BF16-weight kernels (the expert-grouped MoE kernels in moe.cu with BF16
// experts): acc[m-tile][n-tile][4] = sum over columns [c_lo, c_hi) of W rows (bf16) x token rows (fp32).
// The BF16 twin of fp8_mma_warp_tile (kernels/linear_fp8_mma.cuh): same fragments, same one-16-byte-load-
// per-row-and-chunk feed straight from global memory, no shared memory.
//
// Numerics: each fp32 token value x is split into two bf16 terms, hi = rn_bf16(x) and lo = rn_bf16(x - hi)
// (x - hi is exact in fp32), and both are multiplied by the exact bf16 weight on the tensor cores
// (bf16 x bf16 products are exact in the fp32 accumulator). bf16's unit roundoff is 2^-8, so
// |x - hi - lo| <= 2^-8 |x - hi| <= 2^-16 |x| and each dot product is within (2^-16 + fp32 summation) *
// sum |x w| of the exact one: near the fp32 CUDA-core kernels, at twice the MMA work (the kernels are bound
// by weight bytes, not MMAs). A single bf16 rounding of x would cost 2^-8 per product, 16x the f16 rounding
// the FP8 tile accepts. Each 64-column step sums its 8 MMAs per tile in a temporary that is then added to
// acc (fp32), so no accumulation chain inside the tensor cores runs over the whole row. Why tensor cores at
// all: the GEMV-style grouped kernels (moe_*_grouped_kernel) re-load 8 fp32 x values per 16 weight bytes per
// token from L1, so at GLM-5 batch
// 8-128 with BF16 experts the MoE ran at 3-1 TB/s effective, 87-95% of the whole step (S9c,
// reports/2026-11-30-h200-decode-step.md).
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 fragments (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"; g = lane / 4, t = lane % 4): as in linear_fp8_mma.cuh.
// k permutation: in a 32-column chunk, lane (g, t) loads columns [8t, 8t + 8) of W rows g and g+8 (one
// 16-byte load each: words w0..w3, two bf16 each, low half = lower column); mma step s (0, 1) takes word
// 2s (columns 8t + 4s + {0, 1}) as logical k {2t, 2t+1} and word 2s + 1 (columns 8t + 4s + {2, 3}) as
// logical k {2t+8, 2t+9}. Over t and s a bijection of the 32 columns; B (token g of the n-tile) uses the
// same map, from 8 contiguous fp32 values per lane and chunk (2 float4 loads).
// Per 64-column step: MT x 2 rows x 2 chunks 16-byte W loads per lane issued first (the FP8 tile's bytes
// in flight per lane), then per n-tile the x loads, the hi / lo split and MT x 2 chunks x 2 steps x 2 mma.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/linear_fp8_mma.cuh"  // uint4_word, the fragment layout's documentation

namespace glm5 {

// (hi, lo) bf16x2 words of the fp32 pair (x0, x1): hi = rn_bf16(x), lo = rn_bf16(x - hi); low half = x0.
__device__ __forceinline__ void bf16x2_split(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  const float2 hf = __bfloat1622float2(h);
  const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

// wrow[i][h]: W row (16 i + g + 8 h of the warp's rows) as bytes (bf16 elements), column 0 (rows past the
// end: any valid row, its results unused); xrow[j]: this lane's token (token g of n-tile j) as fp32, column 0,
// or null for a missing token (zeros). Only the first nt_active n-tiles are computed (warp-uniform).
// Columns [c_lo, c_hi): c_lo and c_hi multiples of 8; rows and xrow 16-byte aligned. acc is overwritten.
// PF (prefetch): the next step's W loads are issued before this step's math (a register double buffer,
// + 16 MT registers), as fp8_mma_warp_tile's PF.
template <int MT, int NT, bool PF = false>
__device__ __forceinline__ void bf16_mma_warp_tile(const uint8_t* const (&wrow)[MT][2], const float* const (&xrow)[NT],
                                                   int nt_active, int c_lo, int c_hi, float (&acc)[MT][NT][4]) {
  constexpr int kStep = 64;  // columns per step: 2 chunks of 32
  const int lane = threadIdx.x % 32, t = lane % 4;
  mma_tile_zero(acc);
  uint4 wnext[MT][2][2];  // PF only
  if constexpr (PF) mma_tile_load_w<MT>(wnext, wrow, 2 * c_lo, 2 * c_hi, t);
  for (int kb0 = c_lo; kb0 < c_hi; kb0 += kStep) {
    uint4 wv[MT][2][2];  // [m-tile][chunk][row g / g+8]; two bytes per column: chunk ch = columns [32 ch, 32 ch + 32)
    mma_tile_step_w<MT, PF>(wv, wnext, wrow, 2 * kb0, 2 * (kb0 + kStep), 2 * c_hi, t);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if (j >= nt_active) break;  // warp-uniform
      uint32_t bh[2][2][2], bl[2][2][2];  // [chunk][step s][reg]: hi and lo terms
#pragma unroll
      for (int ch = 0; ch < 2; ++ch) {
        const int c = kb0 + 32 * ch + 8 * t;
        const bool ok = xrow[j] != nullptr && c < c_hi;  // c_hi % 8 == 0: a lane's 8 columns are all in or out
        const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
        const float4 v0 = ok ? __ldg(reinterpret_cast<const float4*>(xrow[j] + c)) : z;
        const float4 v1 = ok ? __ldg(reinterpret_cast<const float4*>(xrow[j] + c) + 1) : z;
        bf16x2_split(v0.x, v0.y, bh[ch][0][0], bl[ch][0][0]);
        bf16x2_split(v0.z, v0.w, bh[ch][0][1], bl[ch][0][1]);
        bf16x2_split(v1.x, v1.y, bh[ch][1][0], bl[ch][1][0]);
        bf16x2_split(v1.z, v1.w, bh[ch][1][1], bl[ch][1][1]);
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        float tmp[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int ch = 0; ch < 2; ++ch)
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const uint32_t a0 = uint4_word(wv[i][ch][0], 2 * s), a1 = uint4_word(wv[i][ch][1], 2 * s);
            const uint32_t a2 = uint4_word(wv[i][ch][0], 2 * s + 1), a3 = uint4_word(wv[i][ch][1], 2 * s + 1);
            mma_16816_bf16(tmp, a0, a1, a2, a3, bh[ch][s][0], bh[ch][s][1]);
            mma_16816_bf16(tmp, a0, a1, a2, a3, bl[ch][s][0], bl[ch][s][1]);
          }
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] += tmp[q];
      }
    }
  }
}

}  // namespace glm5
