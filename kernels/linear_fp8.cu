// CUDA kernels of linear_fp8.h: FP8 (e4m3, 128x128 block scales) weight GEMV and block dequantization.
// GEMV layout: block = 4 warps, warp w owns rows n0 + 4w .. n0 + 4w + 3 (kRows) and tokens
// t0 .. t0 + MT - 1 of the grid's token chunk; lane l reads codes [16l + 512i, +16) of each of its rows
// (one 16-byte load per row: 32 lanes cover 512 contiguous bytes), the block scale of those 16 codes
// (they never straddle a 128-block), and the 16 matching fp32 x values of each token (4 x float4,
// L1/L2 hits: every row block re-reads x); acc[row][token] += scale * sum_16(code * x) in fp32, then a
// warp-shuffle sum. e4m3 -> f16 -> f32 is exact (cvt.rn.f16x2.e4m3x2).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <string>

#include "common/error.h"
#include "kernels/fp8_dot.cuh"
#include "kernels/kv_cast.cuh"
#include "kernels/kv_layout.h"
#include "kernels/linear_fp8.h"
#include "kernels/linear_fp8_mma.cuh"
#include "kernels/launch.cuh"
#include "kernels/rope.cuh"

namespace glm5 {

namespace {

// GLM5_GEMV_U / GLM5_GEMV_MIN_BLOCKS: overridable only for tools/probe/gemv_probe.cu's sweeps.
#ifndef GLM5_GEMV_U
#define GLM5_GEMV_U 2
#endif
#ifndef GLM5_GEMV_MIN_BLOCKS
#define GLM5_GEMV_MIN_BLOCKS 6
#endif
constexpr int kWarps = 4;
constexpr int kRows = 4;  // output rows per warp
constexpr int64_t kGemvTargetBlocks = 132 * 12;  // ~12 blocks of 4 warps per SM of an H200

// grid (ceil(m / MT), ceil(n / (kWarps * kRows)), S), block 32 * kWarps. Split z covers columns
// [z * per_split, min(k, (z + 1) * per_split)) (per_split a multiple of 512); with S > 1 each split
// writes its partial sums to part[z][t][row] and linear_fp8_reduce_kernel adds them in split order.
// With `counters` (split mode only): no separate reduce kernel. Each CTA writes its partials, then
// counts itself done on its (token chunk, row block) tile's counter; the last of the S CTAs of a tile
// adds the tile's S partials in split order (the reduce kernel's order: the same bits), writes y and
// resets the counter to 0 for the next launch (CUDA graph replays). Saves a launch per split GEMV:
// measured on the H200 at GLM-5 batch 1, linear_fp8_reduce_kernel cost 1.7 us x 8 per layer.
// One grid may hold up to kMaxLinearGroup projections of the same x (linear_fp8_gemv_group_cuda):
// projection s owns the row blocks [first[s], first[s + 1]) of gridDim.y and its partial sums part[s]
// (null: no split); the tile counters are indexed by the grid's (x, y), so they stay distinct.
// With norm.weight (LinearGroupParams::norm, the NORM instances): each CTA stages x * norm weight of its split's
// columns in shared memory and sums x^2 there (in the kernel). Without a split that sum covers all k columns and
// the CTA scales its sums by inv_rms; with a split each CTA leaves its split's sum of squares in
// norm_ss[(tile * S + z) * MT + t] (tile = the counters' index) before counting itself done, and the tile's last
// CTA adds them in split order (no separate reduce kernel: the NORM instances run a split only with counters).
// With a rope (LinearGroupParams::rope, any instance) the grid has
// no split and each warp rotates its rows' pairs before it stores them.
struct GemvGroup : LinearGroupParams {
  float* part[kMaxLinearGroup] = {};
  int first[kMaxLinearGroup + 1] = {};
  float* norm_ss = nullptr;
};

// 1 / rms of a row of k columns whose squares sum to `ssq` (norm.cuh's rmsnorm arithmetic).
__device__ __forceinline__ float gemv_inv_rms(float ssq, int k, float eps) { return 1.0f / sqrtf(ssq / k + eps); }

// MT 1: at most 80 registers (6 CTAs per SM), as before the GEMV became PDL-aware and grouped (ptxas
// then gave 95: 5 CTAs per SM, and o_proj at m = 1 lost its one-wave split-K).
template <int MT, bool NORM>
__global__ void __launch_bounds__(32 * kWarps, MT == 1 ? GLM5_GEMV_MIN_BLOCKS : 1) linear_fp8_gemv_vec_kernel(GemvGroup g, int per_split, int* counters) {
  int seg = 0;
  while (seg + 1 < g.count && int(blockIdx.y) >= g.first[seg + 1]) ++seg;
  const LinearParams& p = g.p[seg];
  float* part = g.part[seg];
  const int by = blockIdx.y - g.first[seg];  // row block within the projection
  constexpr int U = GLM5_GEMV_U;  // 16-byte chunks per row per lane in flight (kRows * U loads)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t0 = blockIdx.x * MT, mt = min(MT, p.m - t0);
  const int r0 = (by * kWarps + warp) * kRows;
  if (r0 >= p.n && !counters && !NORM) {  // (with counters or NORM every thread reaches the barriers below)
    pdl_wait();
    return;
  }
  const int c_lo = blockIdx.z * per_split, c_hi = r0 < p.n ? min(p.k, c_lo + per_split) : c_lo;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const int ldw = p.w_stride(), lds = p.scale_stride();
  uint4 codes[U][kRows];
  float sc[U][kRows];
  auto load = [&](int base) {  // all weight loads of one step first: kRows x U x 16 B in flight per lane
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int c = base + u * 512;
        const int row = min(r0 + r, p.n - 1);  // rows past n repeat the last (never stored)
        codes[u][r] = c < c_hi ? __ldg(reinterpret_cast<const uint4*>(w + size_t(row) * ldw + c)) : make_uint4(0, 0, 0, 0);
        sc[u][r] = c < c_hi ? __ldg(p.w_scale + size_t(row / kFp8WeightBlock) * lds + c / kFp8WeightBlock) : 0.f;
      }
  };
  // The first step's weights (no kernel writes them) are in flight before the wait for the previous
  // kernel (kernels/launch.cuh): under PDL their DRAM round trip overlaps its tail.
  int base = c_lo + lane * 16;
  if (base < c_hi) load(base);
  // LinearGroupParams::l2_lookahead: lanes 0..kRows-1 ask L2 for their row's columns of the steps after this one
  // (steps 1..la now, step i + la + 1 when step i starts), one bulk prefetch of up to kStep bytes each.
  constexpr int kStep = 32 * 16 * U;  // columns (bytes) per row per step
  const int la = g.l2_lookahead;
  auto prefetch_step = [&](int col) {
    if (lane < kRows && col < c_hi && r0 + lane < p.n)
      prefetch_l2(w + size_t(r0 + lane) * ldw + col, unsigned(min(kStep, c_hi - col)));
  };
  for (int i = 1; i <= la; ++i) prefetch_step(c_lo + i * kStep);
  // NORM (the batch-1 GEMV fold): the next grid's CTAs are let in only after this CTA's main loop (below), not here.
  // Let in at once, attn.q_up_proj's 1280 CTAs parked in their PDL wait on every SM while attn.qkv_a_proj ran, and
  // the side stream's attn.indexer.weights_proj and KV prologue (which attn.indexer.score waits for) found no room
  // until q_up's first CTAs retired, 16 us later (S19e / S19f traces; a higher side-stream priority did not help).
  if constexpr (NORM) pdl_wait();
  else pdl_begin();
  float acc[kRows][MT] = {};
  // NORM: the CTA stages x * norm weight of its column range [c_lo, c_end) for its tokens in shared memory (one
  // read of x and of the weight per CTA; the main loop then reads shared memory as the plain kernel reads x through
  // L1) and sums x^2 over the range, per token, in a fixed order (each thread over its float4s, then the warps'
  // sums in warp order): every thread ends with the CTA's sums. (Session 19's first form scaled x per chunk in each
  // warp and loaded the weight beside x: the step got slower, the GEMVs reading 1.5x the L1 bytes.)
  extern __shared__ float4 norm_xs4[];  // NORM: [MT][per_split / 4]
  float ssq[MT] = {};
  if constexpr (NORM) {
    __shared__ float warp_ssq[kWarps][MT];
    const int c_end = min(p.k, c_lo + per_split), n4 = (c_end - c_lo) / 4;  // (k % 16 == 0: whole float4s)
    const float4* nw4 = reinterpret_cast<const float4*>(g.norm.weight + c_lo);
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      float part = 0.f;
      if (t < mt) {
        const float4* x4 = reinterpret_cast<const float4*>(p.x + size_t(t0 + t) * p.k + c_lo);
        for (int i = threadIdx.x; i < n4; i += 32 * kWarps) {
          const float4 a = x4[i], nw = __ldg(nw4 + i);
          part = fmaf(a.w, a.w, fmaf(a.z, a.z, fmaf(a.y, a.y, fmaf(a.x, a.x, part))));
          norm_xs4[t * (per_split / 4) + i] = make_float4(nw.x * a.x, nw.y * a.y, nw.z * a.z, nw.w * a.w);
        }
      }
      part = warp_sum(part);
      if (lane == 0) warp_ssq[warp][t] = part;
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int v = 0; v < kWarps; ++v) ssq[t] += warp_ssq[v][t];
  }
  for (; base < c_hi; base += 32 * 16 * U) {
    if (la > 0) prefetch_step(base - lane * 16 + (la + 1) * kStep);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u * 512;
      if (c >= c_hi) break;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        if (t >= mt) break;
        if constexpr (NORM) {
          const float4* xs = norm_xs4 + t * (per_split / 4) + (c - c_lo) / 4;
          const float4 xv[4] = {xs[0], xs[1], xs[2], xs[3]};
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][t] = fmaf(sc[u][r], fp8_dot16(codes[u][r], xv), acc[r][t]);
        } else {
          const float* xr = p.x + size_t(t0 + t) * p.k + c;
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][t] = fmaf(sc[u][r], fp8_dot16(codes[u][r], xr), acc[r][t]);
        }
      }
    }
    if (base + 32 * 16 * U < c_hi) load(base + 32 * 16 * U);
  }
  if constexpr (NORM)
    if (!g.admit_next_at_exit) pdl_launch_dependents();  // LinearGroupParams::admit_next_at_exit: at exit instead
#pragma unroll
  for (int t = 0; t < MT; ++t) {  // NORM without a split: scaled by 1 / rms of the token's row (the range is all of k)
    const float scale = NORM && !part ? gemv_inv_rms(ssq[t], p.k, g.norm.eps) : 1.f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r][t] = warp_sum(acc[r][t]) * scale;
  }
  // LinearGroupParams::rope (launched without a split): the warp's rows pair up as (r0, r0 + 1), (r0 + 2, r0 + 3)
  // (r0 % 4 == 0, even offset and head size); rotate the pairs that fall in a head's rope columns.
  if (const RopeParams& rp = g.rope[seg]; rp.positions && !part) {
#pragma unroll
    for (int r = 0; r < kRows; r += 2) {
      const int d = (r0 + r) % rp.head_stride - rp.offset;
      if (r0 + r < p.n && d >= 0 && d < rp.rope_dim) {
        const float inv_freq = __ldg(rp.inv_freq + d / 2);
#pragma unroll
        for (int t = 0; t < MT; ++t)
          if (t < mt)
            rope_dev::rope_pair(acc[r][t], acc[r + 1][t], float(__ldg(rp.positions + t0 + t)), inv_freq,
                                rp.attention_scaling);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const float s = acc[r][t];
      if (lane == 0 && t < mt && r0 + r < p.n) {
        if (part) {
          part[(size_t(blockIdx.z) * p.m + t0 + t) * p.n + r0 + r] = s;
        } else {
          float* y = p.y + size_t(t0 + t) * p.n + r0 + r;
          *y = p.accumulate ? *y + s : s;
        }
      }
    }
  if (!counters) return;
  const int tile = blockIdx.x * gridDim.y + blockIdx.y;
  if constexpr (NORM) {
    if (warp == 0 && lane == 0)
#pragma unroll
      for (int t = 0; t < MT; ++t) g.norm_ss[(size_t(tile) * gridDim.z + blockIdx.z) * MT + t] = ssq[t];
  }
  __shared__ int last;
  __threadfence();  // this CTA's partials reach L2 before its count
  __syncthreads();
  if (threadIdx.x == 0) {
    int* c = counters + tile;
    last = atomicAdd(c, 1) == int(gridDim.z) - 1;
    if (last) *c = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  constexpr int kTileRows = kWarps * kRows;
  const int row0 = by * kTileRows;
  for (int i = threadIdx.x; i < kTileRows * mt; i += blockDim.x) {
    const int t = i / kTileRows, row = row0 + i % kTileRows;
    if (row >= p.n) continue;
    float s = 0.f;
    for (int z = 0; z < int(gridDim.z); ++z) s += __ldcg(part + (size_t(z) * p.m + t0 + t) * p.n + row);
    if constexpr (NORM) {
      float q = 0.f;
      for (int z = 0; z < int(gridDim.z); ++z) q += __ldcg(g.norm_ss + (size_t(tile) * gridDim.z + z) * MT + t);
      s *= gemv_inv_rms(q, p.k, g.norm.eps);
    }
    float* y = p.y + size_t(t0 + t) * p.n + row;
    *y = p.accumulate ? *y + s : s;
  }
}

// y[t, r] (=|+=) sum over z of part[z][t][r], in split order (deterministic).
__global__ void linear_fp8_reduce_kernel(LinearParams p, const float* __restrict__ part, int S) {
  pdl_begin();
  const int64_t mn = int64_t(p.m) * p.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < mn; i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int z = 0; z < S; ++z) s += part[z * mn + i];
    p.y[i] = p.accumulate ? p.y[i] + s : s;
  }
}

// Scalar path (any k or alignment): one warp per (row, token), lane-strided over k.
__global__ void linear_fp8_gemv_scalar_kernel(LinearParams p) {
  pdl_begin();
  const int warp = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= p.n * p.m) return;
  const int row = warp % p.n, t = warp / p.n;
  const uint8_t* w = static_cast<const uint8_t*>(p.w) + size_t(row) * p.w_stride();
  const float* srow = p.w_scale + size_t(row / kFp8WeightBlock) * p.scale_stride();
  const float* x = p.x + size_t(t) * p.k;
  float acc = 0.f;
  for (int c = lane; c < p.k; c += 32) {
    const float v = e4m3x2_to_float2(uint16_t(w[c])).x;
    acc = fmaf(v * srow[c / kFp8WeightBlock], x[c], acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) {
    float* y = p.y + size_t(t) * p.n + row;
    *y = p.accumulate ? *y + acc : acc;
  }
}

// Vector form (k % 16 == 0, row stride % 16 == 0, w 16-byte aligned): each thread turns 16 codes (one 16-byte load,
// one 128-column scale block) into 16 BF16 (two 16-byte stores). Bits identical to the scalar kernel below (each
// value is bf16_rn(e4m3 * scale)). Floor: n k bytes read + 2 n k written (o_proj at GLM-5: 302 MB = 71 us at
// 4.26 TB/s); the scalar kernel's byte loads with a 64-bit division per element took 44.3 ms of the batch-128 step
// for all FP8 projections (S15c), ~5x that floor.
__global__ void fp8_block_dequant_bf16_vec16_kernel(LinearParams p, uint16_t* __restrict__ out) {
  pdl_begin();
  const int chunks_per_row = p.k / 16;
  const int64_t total = int64_t(p.n) * chunks_per_row;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / chunks_per_row;
    const int c = 16 * int(i - r * chunks_per_row);
    const uint4 codes = __ldg(reinterpret_cast<const uint4*>(w + r * p.w_stride() + c));
    const float s = __ldg(p.w_scale + (r / kFp8WeightBlock) * p.scale_stride() + c / kFp8WeightBlock);
    const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
    uint32_t packed[8];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 lo = e4m3x2_to_float2(uint16_t(words[q] & 0xffffu)), hi = e4m3x2_to_float2(uint16_t(words[q] >> 16));
      const __nv_bfloat162 a = __floats2bfloat162_rn(lo.x * s, lo.y * s), b = __floats2bfloat162_rn(hi.x * s, hi.y * s);
      packed[2 * q] = *reinterpret_cast<const uint32_t*>(&a);
      packed[2 * q + 1] = *reinterpret_cast<const uint32_t*>(&b);
    }
    uint4* dst = reinterpret_cast<uint4*>(out + r * p.k + c);
    dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
}

__global__ void fp8_block_dequant_bf16_kernel(LinearParams p, uint16_t* __restrict__ out) {
  pdl_begin();
  const int64_t total = int64_t(p.n) * p.k;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.k, c = i % p.k;
    const float v = e4m3x2_to_float2(uint16_t(w[r * p.w_stride() + c])).x;
    const float s = p.w_scale[(r / kFp8WeightBlock) * p.scale_stride() + c / kFp8WeightBlock];
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v * s));
  }
}

// One warp per (token, 128-column block): amax, then codes (4 per lane per step).
__global__ void fp8_quantize_activations_kernel(const float* __restrict__ x, int m, int k, uint8_t* __restrict__ codes,
                                                float* __restrict__ scales, bool tokens_fastest, int ld) {
  pdl_begin();
  const int warp = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int blocks = k / 128;
  if (warp >= m * blocks) return;
  const int t = warp / blocks, b = warp % blocks;
  const float4 v = *reinterpret_cast<const float4*>(x + size_t(t) * k + 128 * b + 4 * lane);
  const float amax = warp_max(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
  const float scale = amax > 0.f ? amax / 448.f : 1.f;
  uint8_t* c = codes + size_t(t) * k + 128 * b + 4 * lane;
  c[0] = float_to_e4m3_device(v.x / scale);
  c[1] = float_to_e4m3_device(v.y / scale);
  c[2] = float_to_e4m3_device(v.z / scale);
  c[3] = float_to_e4m3_device(v.w / scale);
  if (lane == 0) scales[tokens_fastest ? size_t(b) * ld + t : size_t(t) * ld + b] = scale;
}

// ---- Tensor-core path (linear_fp8_mma_cuda): the warp tile is fp8_mma_warp_tile (linear_fp8_mma.cuh) ----
constexpr int kMmaWarps = 4;

// grid (ceil(m / (8 NT)), ceil(n / (16 MT kMmaWarps)), S), block 32 kMmaWarps. Split z covers columns
// [z per_split, min(k, (z + 1) per_split)), per_split a multiple of 128; S > 1 writes part[z][t][row].
template <int MT, int NT, bool PF>
__global__ void __launch_bounds__(32 * kMmaWarps) linear_fp8_mma_kernel(LinearParams p, float* part, int per_split) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tok0 = blockIdx.x * 8 * NT;
  const int row0 = (blockIdx.y * kMmaWarps + warp) * 16 * MT;
  if (row0 >= p.n) {
    pdl_wait();
    return;
  }
  const int c_lo = blockIdx.z * per_split, c_hi = min(p.k, c_lo + per_split);
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const int ldw = p.w_stride(), lds = p.scale_stride();
  const uint8_t* wrow[MT][2];
  const float* srow[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) wrow[i][h] = w + size_t(min(row0 + 16 * i + g + 8 * h, p.n - 1)) * ldw;  // rows past n: never stored
    srow[i] = p.w_scale + size_t(min(row0 + 16 * i, p.n - 1) / kFp8WeightBlock) * lds;  // one 128-row block per m-tile
  }
  // Before the wait for the previous kernel (kernels/launch.cuh): L2 prefetch of the first 512 columns
  // of the warp's 16 MT weight rows (no kernel writes weights), a row per lane.
  if (aligned16(w) && ldw % 16 == 0)
    for (int r = lane; r < 16 * MT && row0 + r < p.n; r += 32)
      prefetch_l2(w + size_t(row0 + r) * ldw + c_lo, unsigned(min(512, c_hi - c_lo)));
  pdl_begin();
  const float* xrow[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int tok = tok0 + 8 * j + g;
    xrow[j] = tok < p.m ? p.x + size_t(tok) * p.k : nullptr;
  }
  float acc[MT][NT][4];
  fp8_mma_warp_tile<MT, NT, PF>(wrow, srow, xrow, min(NT, (p.m - tok0 + 7) / 8), c_lo, c_hi, acc);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int row = row0 + 16 * i + g + 8 * (q / 2), tok = tok0 + 8 * j + 2 * t + (q % 2);
        if (row < p.n && tok < p.m) {
          if (part) {
            part[(size_t(blockIdx.z) * p.m + tok) * p.n + row] = acc[i][j][q];
          } else {
            float* y = p.y + size_t(tok) * p.n + row;
            *y = p.accumulate ? *y + acc[i][j][q] : acc[i][j][q];
          }
        }
      }
}


int mma_nt(int m) { return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8; }
// ptxas (CUDA 13, sm_90, 255-register cap): MT 4 x NT 1 / 2 use 188 / 238 registers, no spill; MT 4 x
// NT 4 spills 72 B and MT 4 x NT 8 ~700 B, so m > 16 runs MT 2 by default (NT 4: 183, NT 8: 213
// registers) and an explicit mt = 4 is honoured only up to m = 32.
// Default m-tiles per warp: 4 up to m = 32, 2 above. Measured on the H200 (bench kernels --only linear,
// device call H2 of 2026-11-29, µs mt 2 / mt 4 at m = 32): o_proj 6144x16384 117.7 / 84.1, 4096x6144
// 37.4 / 31.2, 6144x2048 25.4 / 22.6 (kv_a 576x6144: 14.5 / 16.5, the one loss).
int mma_effective_mt(int m, int mt) {
  if (mt == 0) return m <= 32 ? 4 : 2;
  return mma_nt(m) == 8 ? 2 : mt;
}

template <int MT, int NT, bool PF = false>
void launch_mma(const LinearParams& p, float* part, int S, int per_split, cudaStream_t stream, bool pdl) {
  const dim3 grid((p.m + 8 * NT - 1) / (8 * NT), (p.n + 16 * MT * kMmaWarps - 1) / (16 * MT * kMmaWarps), S);
  launch_kernel_ex(linear_fp8_mma_kernel<MT, NT, PF>, grid, 32 * kMmaWarps, 0, stream, dim3(1, 1, 1), pdl, p,
                   S > 1 ? part : nullptr, per_split);
}

// Register prefetch (fp8_mma_warp_tile's PF) exists for mt 2 with m <= 16 (NT 1 / 2: 128 / 185 registers,
// against 118 / 165 without; mt 4 with it would spill).
bool mma_prefetch_ok(int mt, int m) { return mt == 2 && mma_nt(m) <= 2; }

// The kernel instance launch_mma_any runs for (mt, m, pf) (for the occupancy query).
const void* mma_kernel_for(int mt, int m, bool pf) {
  const int nt = mma_nt(m);
  if (pf && mma_prefetch_ok(mt, m))
    return nt == 1 ? reinterpret_cast<const void*>(linear_fp8_mma_kernel<2, 1, true>)
                   : reinterpret_cast<const void*>(linear_fp8_mma_kernel<2, 2, true>);
  if (mt == 4 && nt == 1) return reinterpret_cast<const void*>(linear_fp8_mma_kernel<4, 1, false>);
  if (mt == 4 && nt == 2) return reinterpret_cast<const void*>(linear_fp8_mma_kernel<4, 2, false>);
  if (mt == 4 && nt == 4) return reinterpret_cast<const void*>(linear_fp8_mma_kernel<4, 4, false>);
  if (nt == 1) return reinterpret_cast<const void*>(linear_fp8_mma_kernel<2, 1, false>);
  if (nt == 2) return reinterpret_cast<const void*>(linear_fp8_mma_kernel<2, 2, false>);
  if (nt == 4) return reinterpret_cast<const void*>(linear_fp8_mma_kernel<2, 4, false>);
  return reinterpret_cast<const void*>(linear_fp8_mma_kernel<2, 8, false>);
}

// Blocks of `kernel` (`threads` per block, `smem` bytes of dynamic shared memory) resident on the whole GPU at once:
// SMs x occupancy, or `fallback` if a query fails. Memoized per host thread and (kernel, device,
// threads, smem): the answer is fixed for the process, and linear_cuda asks twice per FP8 projection
// (~1,100 times per eager batch-1 GLM-5 step), where the occupancy query's host time would count.
int64_t resident_blocks(const void* kernel, int threads, int64_t fallback, size_t smem = 0) {
  static thread_local std::map<std::tuple<const void*, int, int, size_t>, int64_t> memo;
  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return fallback;
  }
  const auto key = std::make_tuple(kernel, dev, threads, smem);
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess || sms <= 0 ||
      per_sm <= 0) {
    cudaGetLastError();  // clear a failed query (not memoized)
    return fallback;
  }
  return memo[key] = int64_t(sms) * per_sm;
}

// Blocks of the (mt, m) mma kernel resident at once (132 x 2 if a query fails: an H200 at ~190-240
// registers per thread).
int64_t mma_resident_blocks(int mt, int m, bool pf) {
  return resident_blocks(mma_kernel_for(mt, m, pf), 32 * kMmaWarps, 132 * 2);
}

void launch_mma_any(int mt, bool pf, const LinearParams& p, float* part, int S, int per_split, cudaStream_t stream,
                    bool pdl) {
  const int nt = mma_nt(p.m);
  if (pf && mma_prefetch_ok(mt, p.m) && nt == 1) launch_mma<2, 1, true>(p, part, S, per_split, stream, pdl);
  else if (pf && mma_prefetch_ok(mt, p.m)) launch_mma<2, 2, true>(p, part, S, per_split, stream, pdl);
  else if (mt == 4 && nt == 1) launch_mma<4, 1>(p, part, S, per_split, stream, pdl);
  else if (mt == 4 && nt == 2) launch_mma<4, 2>(p, part, S, per_split, stream, pdl);
  else if (mt == 4 && nt == 4) launch_mma<4, 4>(p, part, S, per_split, stream, pdl);
  else if (nt == 1) launch_mma<2, 1>(p, part, S, per_split, stream, pdl);
  else if (nt == 2) launch_mma<2, 2>(p, part, S, per_split, stream, pdl);
  else if (nt == 4) launch_mma<2, 4>(p, part, S, per_split, stream, pdl);
  else launch_mma<2, 8>(p, part, S, per_split, stream, pdl);
}


// Dynamic shared memory of a NORM instance: x * norm weight of MT tokens over one split's columns.
constexpr int kGemvNormSmemMax = 48 * 1024;  // the default limit (no cudaFuncSetAttribute)
size_t gemv_norm_smem(int mt, int per_split) { return size_t(mt) * per_split * 4; }

template <int MT>
void launch_vec(const GemvGroup& g, int S, int per_split, int* counters, cudaStream_t stream) {
  const dim3 grid((g.p[0].m + MT - 1) / MT, g.first[g.count], S);
  if (g.norm.weight)
    launch_kernel(linear_fp8_gemv_vec_kernel<MT, true>, grid, 32 * kWarps, gemv_norm_smem(MT, per_split), stream, g,
                  per_split, S > 1 ? counters : nullptr);
  else
    launch_kernel(linear_fp8_gemv_vec_kernel<MT, false>, grid, 32 * kWarps, 0, stream, g, per_split,
                  S > 1 ? counters : nullptr);
}

}  // namespace

namespace {

// GEMV blocks (MT tokens) resident on the whole GPU at once: SMs x occupancy (kGemvTargetBlocks if a
// query fails).
template <bool NORM>
const void* gemv_kernel_for(int mt) {
  return mt == 1   ? reinterpret_cast<const void*>(linear_fp8_gemv_vec_kernel<1, NORM>)
         : mt == 2 ? reinterpret_cast<const void*>(linear_fp8_gemv_vec_kernel<2, NORM>)
         : mt == 4 ? reinterpret_cast<const void*>(linear_fp8_gemv_vec_kernel<4, NORM>)
         : mt == 8 ? reinterpret_cast<const void*>(linear_fp8_gemv_vec_kernel<8, NORM>)
                   : reinterpret_cast<const void*>(linear_fp8_gemv_vec_kernel<16, NORM>);
}
// norm_k: NORM instances, occupancy with the shared memory of all k columns (an upper bound on one split's).
int64_t gemv_resident_blocks(int mt, int norm_k = 0) {
  return norm_k > 0 ? resident_blocks(gemv_kernel_for<true>(mt), 32 * kWarps, kGemvTargetBlocks, gemv_norm_smem(mt, norm_k))
                    : resident_blocks(gemv_kernel_for<false>(mt), 32 * kWarps, kGemvTargetBlocks);
}

}  // namespace

// As many k-splits as keep the grid within ONE wave of resident blocks (at most k / 1024). It used to
// round up to kGemvTargetBlocks: GLM-5's o_proj at m = 1 (384 row blocks) then took 5 splits = 1920
// blocks, 1.2 waves, and ran at 71% of copy bandwidth on the H200 with the second wave's tail.
namespace {
int gemv_mt(int m) { return m <= 2 ? m : m <= 4 ? 4 : m <= 8 ? 8 : 16; }
int64_t gemv_row_blocks(int n) { return (n + kWarps * kRows - 1) / (kWarps * kRows); }
// Splits for a grid of `row_blocks` row blocks (all projections of a group) at (m, k).
int gemv_splits(int m, int64_t row_blocks, int k, bool norm = false) {
  const int mt = gemv_mt(m);
  const int64_t want = gemv_resident_blocks(mt, norm ? k : 0) / (int64_t((m + mt - 1) / mt) * row_blocks);
  return int(std::max<int64_t>(1, std::min<int64_t>(want, std::max(1, k / 1024))));
}
// Columns per split: a multiple of 512 (whole warp steps).
int gemv_per_split(int k, int S) { return ((k + S - 1) / S + 511) / 512 * 512; }
// The split count of group g over `row_blocks` row blocks before the buffers are checked: 1 with a rope (it is
// applied by the CTA that computes a row), else gemv_splits with the NORM instance's occupancy when g.norm is set.
int gemv_group_splits(const LinearGroupParams& g, int64_t row_blocks) {
  return linear_group_has_rope(g) ? 1 : gemv_splits(g.p[0].m, row_blocks, g.p[0].k, g.norm.weight != nullptr);
}
// Floats a split group needs after its partial sums for the NORM sums of squares (GemvGroup::norm_ss).
size_t gemv_norm_ss_elems(const LinearGroupParams& g, int64_t row_blocks, int S) {
  if (!g.norm.weight || S <= 1) return 0;
  const int m = g.p[0].m, mt = gemv_mt(m);
  return size_t((m + mt - 1) / mt) * size_t(row_blocks) * size_t(S) * size_t(mt);
}
}  // namespace

int linear_fp8_gemv_splits(const LinearParams& p) { return gemv_splits(p.m, gemv_row_blocks(p.n), p.k); }

size_t linear_fp8_gemv_counters(const LinearParams& p) {
  const int mt = gemv_mt(p.m);
  return size_t((p.m + mt - 1) / mt) * size_t(gemv_row_blocks(p.n));
}

namespace {
bool gemv_vec_ok(const LinearParams& p) {
  return p.k % 16 == 0 && p.w_stride() % 16 == 0 && aligned16(p.w) && aligned16(p.x);
}

// The vector kernel over group `g` (count projections, first[] unset): splits, partial offsets,
// counters, launch, and the reduce kernel when splitting without counters.
void run_gemv_group(GemvGroup g, float* partial, size_t partial_elems, int* counters, size_t counter_elems,
                    cudaStream_t stream) {
  const int m = g.p[0].m, k = g.p[0].k, mt = gemv_mt(m);
  size_t rows = 0;
  g.first[0] = 0;
  for (int s = 0; s < g.count; ++s) {
    g.first[s + 1] = g.first[s] + int(gemv_row_blocks(g.p[s].n));
    rows += size_t(g.p[s].n);
  }
  const bool norm = g.norm.weight != nullptr;
  require(g.l2_lookahead >= 0 && g.l2_lookahead <= 8, "linear_fp8_gemv: LinearGroupParams.l2_lookahead = " +
                                                          std::to_string(g.l2_lookahead) + ", expected 0 .. 8");
  require(!norm || linear_fp8_gemv_norm_supported(g),
          "linear_fp8_gemv_group_cuda: LinearGroupParams.norm needs a 16-byte aligned weight and MT x k x 4 bytes of "
          "x within 48 KiB of shared memory (k = " + std::to_string(k) + ", m = " + std::to_string(m) + ")");
  const size_t tiles = size_t((m + mt - 1) / mt) * size_t(g.first[g.count]);
  int* ctr = counters && counter_elems >= tiles ? counters : nullptr;
  int S = gemv_group_splits(g, g.first[g.count]);
  // A NORM split needs the counters (its last CTA per tile applies inv_rms; there is no NORM reduce kernel).
  if (partial == nullptr || partial_elems < size_t(S) * m * rows + gemv_norm_ss_elems(g, g.first[g.count], S) ||
      (norm && !ctr))
    S = 1;
  const int per_split = gemv_per_split(k, S);
  S = (k + per_split - 1) / per_split;
  size_t off = 0;
  for (int s = 0; s < g.count; ++s) {
    g.part[s] = S > 1 ? partial + off : nullptr;
    off += size_t(S) * m * g.p[s].n;
  }
  g.norm_ss = norm && S > 1 ? partial + off : nullptr;
  if (m == 1) launch_vec<1>(g, S, per_split, ctr, stream);
  else if (m == 2) launch_vec<2>(g, S, per_split, ctr, stream);
  else if (m <= 4) launch_vec<4>(g, S, per_split, ctr, stream);
  else if (m <= 8) launch_vec<8>(g, S, per_split, ctr, stream);
  else launch_vec<16>(g, S, per_split, ctr, stream);
  CUDA_CHECK_LAUNCH();
  if (S > 1 && !ctr)
    for (int s = 0; s < g.count; ++s) {
      const int64_t mn = int64_t(m) * g.p[s].n;
      launch_kernel(linear_fp8_reduce_kernel, int(std::min<int64_t>((mn + 255) / 256, 4096)), 256, 0, stream, g.p[s],
                    g.part[s], S);
      CUDA_CHECK_LAUNCH();
    }
}
}  // namespace

void linear_fp8_gemv_cuda(const LinearParams& p, float* partial, size_t partial_elems, cudaStream_t stream,
                          int* counters, size_t counter_elems, int l2_lookahead) {
  validate_linear_params(p, "linear_fp8_gemv_cuda", false);
  require(p.w_dtype == DType::F8_E4M3, "linear_fp8_gemv_cuda: LinearParams.w_dtype = " + dtype_name(p.w_dtype) +
                                           ", expected F8_E4M3");
  require(int64_t(p.m) * p.n < (int64_t(1) << 31) / 32, "linear_fp8_gemv_cuda: m * n too large");
  if (!gemv_vec_ok(p)) {
    const int64_t warps = int64_t(p.m) * p.n;
    launch_kernel(linear_fp8_gemv_scalar_kernel, int((warps + kWarps - 1) / kWarps), 32 * kWarps, 0, stream, p);
    CUDA_CHECK_LAUNCH();
    return;
  }
  GemvGroup g;
  g.count = 1;
  g.p[0] = p;
  g.l2_lookahead = l2_lookahead;
  run_gemv_group(g, partial, partial_elems, counters, counter_elems, stream);
}

bool linear_fp8_gemv_group_supported(const LinearGroupParams& g) {
  if (g.count < 1 || g.count > kMaxLinearGroup) return false;
  for (int s = 0; s < g.count; ++s) {
    const LinearParams& p = g.p[s];
    if (p.w_dtype != DType::F8_E4M3 || !p.w_scale || !gemv_vec_ok(p) || p.x != g.p[0].x || p.m != g.p[0].m ||
        p.k != g.p[0].k || int64_t(p.m) * p.n >= (int64_t(1) << 31) / 32)
      return false;
  }
  return true;
}

bool linear_fp8_gemv_norm_supported(const LinearGroupParams& g) {
  if (!g.norm.weight || reinterpret_cast<uintptr_t>(g.norm.weight) % 16 != 0 || !linear_fp8_gemv_group_supported(g))
    return false;
  // The largest per_split run_gemv_group can pick: one split.
  return gemv_norm_smem(gemv_mt(g.p[0].m), gemv_per_split(g.p[0].k, 1)) <= size_t(kGemvNormSmemMax);
}

size_t linear_fp8_gemv_group_partial(const LinearGroupParams& g) {
  int64_t blocks = 0, rows = 0;
  for (int s = 0; s < g.count; ++s) blocks += gemv_row_blocks(g.p[s].n), rows += g.p[s].n;
  const int S = gemv_group_splits(g, blocks);
  return size_t(S) * g.p[0].m * rows + gemv_norm_ss_elems(g, blocks, S);
}

size_t linear_fp8_gemv_group_counters(const LinearGroupParams& g) {
  size_t n = 0;
  for (int s = 0; s < g.count; ++s) n += linear_fp8_gemv_counters(g.p[s]);
  return n;
}

void linear_fp8_gemv_group_cuda(const LinearGroupParams& lg, float* partial, size_t partial_elems, cudaStream_t stream,
                                int* counters, size_t counter_elems) {
  validate_linear_group(lg, "linear_fp8_gemv_group_cuda", false);
  require(linear_fp8_gemv_group_supported(lg),
          "linear_fp8_gemv_group_cuda: the projections must all be F8_E4M3 with block scales, share x, m and k, and "
          "have k % 16 == 0 and 16-byte aligned x, w and rows");
  GemvGroup g;
  static_cast<LinearGroupParams&>(g) = lg;
  run_gemv_group(g, partial, partial_elems, counters, counter_elems, stream);
}

bool linear_fp8_mma_supported(const LinearParams& p) {
  return p.w_dtype == DType::F8_E4M3 && p.k % 16 == 0 && p.w_stride() % 16 == 0 && aligned16(p.w) && aligned16(p.x);
}

// Split-K: as many column ranges (whole 128-column blocks each) as keep the grid within ONE wave of
// resident blocks: a memory-bound kernel whose last wave is partly empty loses the missing blocks' bytes
// in flight (at o_proj m = 8 a 1.45-wave grid would run its tail at ~half the bandwidth).
int mma_split_kbs(const LinearParams& p, int mt, bool pf) {  // 128-column blocks per split
  const int nt = mma_nt(p.m);
  const int64_t base = int64_t((p.m + 8 * nt - 1) / (8 * nt)) * ((p.n + 16 * mt * kMmaWarps - 1) / (16 * mt * kMmaWarps));
  const int kbs = (p.k + kFp8WeightBlock - 1) / kFp8WeightBlock;
  const int64_t s0 = std::max<int64_t>(1, std::min<int64_t>(kbs, mma_resident_blocks(mt, p.m, pf) / base));
  return int((kbs + s0 - 1) / s0);
}

int linear_fp8_mma_splits(const LinearParams& p, int mt, bool prefetch) {
  mt = mma_effective_mt(p.m, mt);
  const int kbs = (p.k + kFp8WeightBlock - 1) / kFp8WeightBlock, per = mma_split_kbs(p, mt, prefetch);
  return (kbs + per - 1) / per;
}

void linear_fp8_mma_cuda(const LinearParams& p, float* partial, size_t partial_elems, cudaStream_t stream, int mt,
                         bool prefetch, bool pdl) {
  validate_linear_params(p, "linear_fp8_mma_cuda", false);
  require(p.w_dtype == DType::F8_E4M3, "linear_fp8_mma_cuda: LinearParams.w_dtype = " + dtype_name(p.w_dtype) +
                                           ", expected F8_E4M3");
  require(linear_fp8_mma_supported(p), "linear_fp8_mma_cuda: k = " + std::to_string(p.k) + ", ldw = " +
                                           std::to_string(p.w_stride()) +
                                           ": expected both multiples of 16 and w, x 16-byte aligned");
  require(mt == 0 || mt == 2 || mt == 4, "linear_fp8_mma_cuda: mt = " + std::to_string(mt) + ", expected 0, 2 or 4");
  require(int64_t(p.m) * p.n < (int64_t(1) << 31) / 32, "linear_fp8_mma_cuda: m * n too large");
  mt = mma_effective_mt(p.m, mt);
  int per_split = mma_split_kbs(p, mt, prefetch) * kFp8WeightBlock;
  int S = (p.k + per_split - 1) / per_split;  // = linear_fp8_mma_splits(p, mt, prefetch)
  if (partial == nullptr || partial_elems < size_t(S) * p.m * p.n) {
    S = 1;
    per_split = p.k;
  }
  launch_mma_any(mt, prefetch, p, partial, S, per_split, stream, pdl);
  CUDA_CHECK_LAUNCH();
  if (S > 1) {
    const int64_t mn = int64_t(p.m) * p.n;
    launch_kernel(linear_fp8_reduce_kernel, int(std::min<int64_t>((mn + 255) / 256, 4096)), 256, 0, stream, p, partial, S);
    CUDA_CHECK_LAUNCH();
  }
}

void fp8_quantize_activations_cuda(const float* x, int m, int k, uint8_t* codes, float* scales, bool tokens_fastest,
                                   cudaStream_t stream, int scale_ld) {
  require(k % 128 == 0 && m > 0, "fp8_quantize_activations_cuda: k = " + std::to_string(k) + " must be a positive multiple of 128");
  require(aligned16(x), "fp8_quantize_activations_cuda: x must be 16-byte aligned");
  const int ld = scale_ld > 0 ? scale_ld : tokens_fastest ? m : k / 128;
  require(ld >= (tokens_fastest ? m : k / 128), "fp8_quantize_activations_cuda: scale_ld " + std::to_string(scale_ld) +
                                                    " is shorter than a row of scales");
  const int64_t warps = int64_t(m) * (k / 128);
  launch_kernel(fp8_quantize_activations_kernel, int((warps + kWarps - 1) / kWarps), 32 * kWarps, 0, stream, x, m, k, codes,
                scales, tokens_fastest, ld);
  CUDA_CHECK_LAUNCH();
}

void fp8_block_dequant_bf16_cuda(const LinearParams& p, uint16_t* out, cudaStream_t stream) {
  require(p.w != nullptr && p.w_scale != nullptr && out != nullptr, "fp8_block_dequant_bf16_cuda: null pointer");
  const int64_t total = int64_t(p.n) * p.k;
  if (total == 0) return;
  const bool vec = p.k % 16 == 0 && p.w_stride() % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (vec) {  // 132 SMs x 8 CTAs of 256 threads, grid-stride over 16-code chunks
    const int blocks = int(std::min<int64_t>((total / 16 + 255) / 256, 132 * 8));
    launch_kernel(fp8_block_dequant_bf16_vec16_kernel, blocks, 256, 0, stream, p, out);
  } else {
    const int blocks = int(std::min<int64_t>((total + 255) / 256, 8192));
    launch_kernel(fp8_block_dequant_bf16_kernel, blocks, 256, 0, stream, p, out);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
