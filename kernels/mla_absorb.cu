// CUDA MLA weight absorption (DeepSeek-V2 paper, section 2.1.2) for decode. Both products are, per
// head h, a small GEMM  Y[b, n] = sum_k X[b, k] * W[k, n]  over all B batch rows:
//   absorb:   X = q_nope[b, h, :] (K = nope),    W = W_UK[h]   (nope x L, stored [k][n]), N = L
//   unabsorb: X = o_latent[b, h, :] (K = L),     W = W_UV[h]^T (W_UV is v x L, stored [n][k]), N = v
// Fast path (plan_mla_absorb / plan_mla_unabsorb in mla_absorb_cpu.cpp): one CTA of 256 threads per
// (tile of `NT` output columns, head) reads its W tile from HBM exactly once per call (16-byte loads,
// 8 per thread in flight before any use), converts it to fp32 in shared memory, then loops over the
// batch in passes of BT = 4 * groups rows: the pass's X rows are staged in shared memory as X[k][b]
// and each thread accumulates a 4 (b) x 8 (n) register tile over its share of K (split-K over
// 256 / (NT / 8) / groups threads, summed by warp shuffles, then through shared memory, then by 8
// lanes per output). Each fp32 weight read from shared
// memory feeds 4 FMAs, each activation 8. Arithmetic is fp32 FMA on the exact fp32 inputs (no BF16
// rounding of q or o_latent); only the summation order differs from the CPU twin's double sums.
// Where tensor cores would take over (not now): the per-pass 4x8 FMA tile is a [BT x K] x [K x NT]
// product, an mma.sync m16n8k8 TF32 / wgmma candidate at B >= 32: plain TF32 rounds q / o_latent
// (breaks the 1e-5 contract); 3xTF32 (hi/lo split of X; W is BF16, exact in TF32) keeps ~fp32
// accuracy at 2 MMAs per product, W would stay in smem as BF16 (half the tile).
// Small batches (B <= 4) read W at the HBM rate: 512 CTAs (64 heads x 8 tiles) of 24 / 32 KB, each
// thread's 6-8 16-byte loads issued before any use, 3 CTAs per SM.
// Fallback (unaligned kv_b, L % 8 != 0 for BF16 / L % 4 != 0 for F32, or a tile beyond the shared
// memory limit): the first, simple kernels below.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include <cuda_bf16.h>

#include "common/error.h"
#include "kernels/mla_absorb.h"
#include "kernels/launch.cuh"
#include "kernels/bf16_dot.cuh"
#include "kernels/mma_sync.cuh"

namespace glm5 {

namespace {

constexpr int kAbsorbThreads = 128;
constexpr int kUnabsorbWarps = 8;

template <typename T>
__device__ __forceinline__ float load_weight(const T* w, size_t i) {
  if constexpr (sizeof(T) == 4) return w[i];
  else return bf16_bits_to_float(w[i]);
}

// Dynamic shared memory: nope floats (q_nope of this (b, h)).
template <typename T>
__global__ void mla_absorb_simple_kernel(MlaAbsorbParams p) {
  pdl_begin();
  extern __shared__ float q_nope[];
  const int bh = blockIdx.x, h = bh % p.H;
  const float* q = p.q + size_t(bh) * p.q_head_stride;
  for (int d = threadIdx.x; d < p.nope; d += blockDim.x) q_nope[d] = q[d];
  __syncthreads();
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= p.L) return;
  const T* w = static_cast<const T*>(p.kv_b) + size_t(h) * (p.nope + p.v) * p.L;  // W_UK[h] row 0
  float acc = 0.f;
  for (int d = 0; d < p.nope; ++d) acc += q_nope[d] * load_weight(w, size_t(d) * p.L + c);
  p.q_latent[size_t(bh) * p.L + c] = acc;
}

template <typename T>
__global__ void mla_unabsorb_simple_kernel(MlaUnabsorbParams p) {
  pdl_begin();
  const int bh = blockIdx.x, b = bh / p.H, h = bh % p.H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j = blockIdx.y * kUnabsorbWarps + warp;
  if (j >= p.v) return;  // whole warp leaves together
  const float* o = p.o_latent + size_t(bh) * p.L;
  const T* w = static_cast<const T*>(p.kv_b) + (size_t(h) * (p.nope + p.v) + p.nope + j) * p.L;
  float acc = 0.f;
  for (int c = lane; c < p.L; c += 32) acc += o[c] * load_weight(w, c);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) p.out[size_t(b) * p.H * p.v + size_t(h) * p.v + j] = acc;
}

// ---------------------------------------------------------------------------------------------
// Small batches (B <= 4, BF16 kv_b, plan.gemv): GEMV-shaped kernels that stream W once at the HBM
// rate with every thread's weight loads in flight before the wait for the previous kernel (PDL,
// kernels/launch.cuh). Byte floor at GLM-5 (H 64, nope 192, v 256, L 512): W_UK 12.6 MB = 2.95 us,
// W_UV 16.8 MB = 3.94 us at 4.26 TB/s; the tiled / simple kernels took 12.7 / 9.8 us per call at
// batch 1 in the decode step (reports/2026-11-29-h200-decode-step.md, run H4).
constexpr int kGemvThreads = 256;
constexpr int kAbsorbCols = 128;                      // latent columns per CTA: 16 lanes x 8
constexpr int kAbsorbRowGroups = kGemvThreads / 16;   // thread (g, lane) owns rows d = g + 16 i
constexpr int kAbsorbRowsInFlight = 12;               // rows per thread per load round (nope 192: one round)
constexpr int kUnabsorbRows = 4;                      // v rows per warp
constexpr int kUnabsorbChunks = 2;                    // 256-column chunks per row per load round (L 512: one round)

// grid (ceil(L / 128), H): q_latent[b, h, c] for the CTA's 128 columns, all b < B <= MB. Each thread
// sums its rows' products per column in row order; the 16 row groups are added in group order.
template <int MB>
__global__ void __launch_bounds__(kGemvThreads) mla_absorb_gemv_kernel(MlaAbsorbParams p) {
  constexpr int R = kAbsorbRowsInFlight, G = kAbsorbRowGroups;
  __shared__ float red[G][MB][kAbsorbCols];
  const int h = blockIdx.y, lane = threadIdx.x % 16, g = threadIdx.x / 16;
  const int c = blockIdx.x * kAbsorbCols + lane * 8;  // this thread's 8 columns (L % 8 == 0: all or none)
  const bool col_ok = c < p.L;
  const uint16_t* w = static_cast<const uint16_t*>(p.kv_b) + size_t(h) * (p.nope + p.v) * p.L + c;  // W_UK[h][0][c]
  uint4 wv[R];
  auto load = [&](int d0) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int d = d0 + G * i;
      wv[i] = col_ok && d < p.nope ? __ldg(reinterpret_cast<const uint4*>(w + size_t(d) * p.L)) : make_uint4(0, 0, 0, 0);
    }
  };
  int d0 = g;
  load(d0);
  pdl_begin();
  float acc[MB][8] = {};
  for (; d0 < p.nope; d0 += G * R) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int d = d0 + G * i;
      if (d >= p.nope) break;
      float wf[8];
      unpack8_bf16(wv[i], wf);
#pragma unroll
      for (int b = 0; b < MB; ++b) {
        if (b >= p.B) break;
        const float qd = __ldg(p.q + (size_t(b) * p.H + h) * p.q_head_stride + d);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[b][j] = fmaf(qd, wf[j], acc[b][j]);
      }
    }
    if (d0 + G * R < p.nope) load(d0 + G * R);
  }
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int j = 0; j < 8; ++j) red[g][b][lane * 8 + j] = acc[b][j];
  __syncthreads();
  for (int i = threadIdx.x; i < MB * kAbsorbCols; i += kGemvThreads) {
    const int b = i / kAbsorbCols, cc = i % kAbsorbCols, col = blockIdx.x * kAbsorbCols + cc;
    if (b >= p.B || col >= p.L) continue;
    float s = 0.f;
#pragma unroll
    for (int gg = 0; gg < G; ++gg) s += red[gg][b][cc];
    p.q_latent[(size_t(b) * p.H + h) * p.L + col] = s;
  }
}

// grid (ceil(v / (8 warps x 4 rows)), H): out[b, h*v + j] for the warp's 4 rows j, all b < B <= MB.
// Lane l covers columns l*8 + 256 u (8 BF16 per 16-byte load); warp-shuffle sum.
template <int MB>
__global__ void __launch_bounds__(kGemvThreads) mla_unabsorb_gemv_kernel(MlaUnabsorbParams p) {
  constexpr int R = kUnabsorbRows, U = kUnabsorbChunks;
  const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j0 = (blockIdx.x * (kGemvThreads / 32) + warp) * R;
  if (j0 >= p.v) {  // whole warp
    pdl_wait();
    return;
  }
  const uint16_t* w = static_cast<const uint16_t*>(p.kv_b) + (size_t(h) * (p.nope + p.v) + p.nope) * p.L;  // W_UV[h][0][0]
  uint4 wv[U][R];
  auto load = [&](int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int c = c0 + 256 * u, row = min(j0 + r, p.v - 1);  // rows past v repeat the last (never stored)
        wv[u][r] = c < p.L ? __ldg(reinterpret_cast<const uint4*>(w + size_t(row) * p.L + c)) : make_uint4(0, 0, 0, 0);
      }
  };
  int c0 = lane * 8;
  load(c0);
  pdl_begin();
  float acc[MB][R] = {};
  for (; c0 < p.L; c0 += 256 * U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 256 * u;
      if (c >= p.L) break;
#pragma unroll
      for (int b = 0; b < MB; ++b) {
        if (b >= p.B) break;
        const float4* o = reinterpret_cast<const float4*>(p.o_latent + (size_t(b) * p.H + h) * p.L + c);
        const float4 a = __ldg(o), a2 = __ldg(o + 1);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[b][r] += dot8_bf16(wv[u][r], a, a2);
      }
    }
    if (c0 + 256 * U < p.L) load(c0 + 256 * U);
  }
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float s = acc[b][r];
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0 && b < p.B && j0 + r < p.v) p.out[(size_t(b) * p.H + h) * p.v + j0 + r] = s;
    }
}

// ---------------------------------------------------------------------------------------------
// Fast path

constexpr int kThreads = 256;
constexpr int kMaxDevices = 64;
constexpr int kStageInFlight = 8;  // X quads (float4) per thread per staging round
constexpr int kPrefetch = 2;       // pass-0 X quads per thread loaded before the W tile
// W chunks per thread per round, 8 16-byte loads in flight: BF16 [k][n] chunks are 8 weights (one
// load); BF16 [n][k] chunks are 16 (two loads: each lane a whole 32-byte sector of its row), F32
// chunks 8 (two loads).
template <typename T, bool kTransposed>
constexpr int kChunksInFlight = sizeof(T) == 2 && !kTransposed ? 8 : 4;
template <typename T, bool kTransposed>
constexpr int kChunkElems = sizeof(T) == 2 && kTransposed ? 16 : 8;

struct TileGemmArgs {
  const float* x;      // X[b, h, k] = x[b * x_b + h * x_h + k]
  size_t x_b = 0, x_h = 0;
  const void* w;       // head h's W starts at w + h * w_h elements; rows of w_ld elements
  size_t w_h = 0;
  int w_ld = 0;
  float* y;            // Y[b, h, n] = y[b * y_b + h * y_h + n]
  size_t y_b = 0, y_h = 0;
  int B = 0, K = 0, N = 0, groups = 0;
  bool x_vec = false;  // x rows 16-byte aligned with K % 4 == 0: stage with float4 loads
};

// Up to two 16-byte loads from `src`: 8 or 16 BF16 weights, 4 or 8 F32; `count` of them exist (a
// multiple of 8 for BF16, of 4 for F32), the rest read as 0.
template <typename T>
__device__ __forceinline__ void load_chunk(const T* src, int count, uint4 (&raw)[2]) {
  raw[0] = raw[1] = make_uint4(0, 0, 0, 0);
  if constexpr (sizeof(T) == 2) {
    if (count >= 8) raw[0] = __ldg(reinterpret_cast<const uint4*>(src));
    if (count >= 16) raw[1] = __ldg(reinterpret_cast<const uint4*>(src) + 1);
  } else {
    if (count >= 4) raw[0] = __ldg(reinterpret_cast<const uint4*>(src));
    if (count == 8) raw[1] = __ldg(reinterpret_cast<const uint4*>(src) + 1);
  }
}

// raw as fp32: 16 values for BF16, 8 for F32.
template <typename T>
__device__ __forceinline__ void unpack_chunk(const uint4 (&raw)[2], float (&f)[16]) {
  if constexpr (sizeof(T) == 2) {
    const uint32_t u[8] = {raw[0].x, raw[0].y, raw[0].z, raw[0].w, raw[1].x, raw[1].y, raw[1].z, raw[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      f[2 * i] = __uint_as_float(u[i] << 16);  // element 2i is the low half (little endian)
      f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
  } else {
    const uint32_t u[8] = {raw[0].x, raw[0].y, raw[0].z, raw[0].w, raw[1].x, raw[1].y, raw[1].z, raw[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = __uint_as_float(u[i]);
  }
}

// X stage layout: row k holds BT floats; the 4-float group of batch rows is XOR-swizzled by k / 4
// so that the staging stores (a warp: 8 quads of 4 k x 4 b, one k of each quad per store) hit 32
// distinct banks at BT >= 32 and the compute loop's float4 reads stay whole.
__device__ __forceinline__ int xs_index(int k, int bl, int BT) {
  return k * BT + (bl ^ ((4 * ((k >> 2) & 7)) & (BT - 1)));
}

// kTransposed: W is stored [n][k] (unabsorb's W_UV) instead of [k][n] (absorb's W_UK).
template <typename T, int NT, bool kTransposed>
__global__ void __launch_bounds__(kThreads, 3) tile_gemm_kernel(TileGemmArgs a) {
  pdl_begin();
  extern __shared__ float4 smem4[];
  float* ws = reinterpret_cast<float*>(smem4);  // [K][NT] fp32
  float* xs = ws + size_t(a.K) * NT;            // [K][BT] stage, then [ks][BT][NT] reduction
  constexpr int CG = NT / 8;                    // 8-column groups per tile
  const int tid = threadIdx.x, h = blockIdx.y, n0 = blockIdx.x * NT;
  const int K = a.K, N = a.N;
  const T* w = static_cast<const T*>(a.w) + size_t(h) * a.w_h;

  const int groups = a.groups, BT = 4 * groups;
  const float* x = a.x + size_t(h) * a.x_h;
  // X staging, xs[k][b] for batch rows b0 .. b0+BT: item i = one quad of 4 consecutive k of one
  // row (a warp: 32 consecutive k, 128 bytes, of 4 rows). Loads go to registers in batches of
  // kStageInFlight before any store, so a pass costs one or two memory latencies, not one per item.
  const int kqpad = ((K + 3) / 4 + 7) / 8 * 8, stage_items = kqpad * BT;
  auto x_load = [&](int i, int b0) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    const int kql = i & 7, bl4 = (i >> 3) & 3, rest = i >> 5;
    const int k0 = 4 * ((rest / groups) * 8 + kql), b = b0 + (rest % groups) * 4 + bl4;
    if (i >= stage_items || k0 >= K || b >= a.B) return v;
    const float* src = x + size_t(b) * a.x_b + k0;
    if (a.x_vec) return *reinterpret_cast<const float4*>(src);
    v.x = src[0];
    if (k0 + 1 < K) v.y = src[1];
    if (k0 + 2 < K) v.z = src[2];
    if (k0 + 3 < K) v.w = src[3];
    return v;
  };
  auto x_store = [&](int i, float4 v) {
    const int kql = i & 7, bl4 = (i >> 3) & 3, rest = i >> 5;
    const int k0 = 4 * ((rest / groups) * 8 + kql), bl = (rest % groups) * 4 + bl4;
    if (i >= stage_items || k0 >= K) return;
    const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (k0 + q < K) xs[xs_index(k0 + q, bl, BT)] = e[q];
  };
  auto stage = [&](int b0, int first) {  // items first + tid + 256 * (s + kStageInFlight * round)
    for (int base = first + tid; base < stage_items; base += kThreads * kStageInFlight) {
      float4 v[kStageInFlight];
#pragma unroll
      for (int s = 0; s < kStageInFlight; ++s) v[s] = x_load(base + s * kThreads, b0);
#pragma unroll
      for (int s = 0; s < kStageInFlight; ++s) x_store(base + s * kThreads, v[s]);
    }
  };
  // Pass 0's first kPrefetch items per thread are loaded before the W tile, so both are in flight
  // together (at B <= 4 that is all of X).
  float4 xpre[kPrefetch];
#pragma unroll
  for (int s = 0; s < kPrefetch; ++s) xpre[s] = x_load(tid + s * kThreads, 0);

  // 1. The W tile, once: rounds of independent 16-byte loads, then fp32 to smem.
  constexpr int R = kChunksInFlight<T, kTransposed>, E = kChunkElems<T, kTransposed>;
  const int kchunks = (K + E - 1) / E;
  const int chunks = kTransposed ? NT * kchunks : K * CG;
  for (int base = tid; base < chunks; base += kThreads * R) {
    uint4 raw[R][2];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = base + r * kThreads;
      int count = 0;
      const T* src = w;
      if (i < chunks) {
        if constexpr (kTransposed) {
          const int j = i % NT, kk = E * (i / NT), row = n0 + j;
          count = row < N ? min(E, K - kk) : 0;
          src = w + size_t(row) * a.w_ld + kk;
        } else {
          const int k = i / CG, col = n0 + 8 * (i % CG);
          count = col < N ? min(8, N - col) : 0;
          src = w + size_t(k) * a.w_ld + col;
        }
      }
      load_chunk<T>(src, count, raw[r]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = base + r * kThreads;
      if (i >= chunks) break;
      float f[16];
      unpack_chunk<T>(raw[r], f);
      if constexpr (kTransposed) {
        const int j = i % NT, kk = E * (i / NT), kn = min(E, K - kk);
#pragma unroll
        for (int e = 0; e < E; ++e)
          if (e < kn) ws[(kk + e) * NT + j] = f[e];
      } else {
        float4* dst = reinterpret_cast<float4*>(ws + (i / CG) * NT + 8 * (i % CG));
        dst[0] = make_float4(f[0], f[1], f[2], f[3]);
        dst[1] = make_float4(f[4], f[5], f[6], f[7]);
      }
    }
  }

#pragma unroll
  for (int s = 0; s < kPrefetch; ++s) x_store(tid + s * kThreads, xpre[s]);
  stage(0, kPrefetch * kThreads);

  // 2. Batch passes. Thread roles: cg = 8-column group, bg = 4-row batch group, ks = K slice.
  const int ks_n = (kThreads / CG) / groups;
  const int cg = tid % CG, bg = (tid / CG) % groups, ks = (tid / CG) / groups;
  float* y = a.y + size_t(h) * a.y_h;
  for (int b0 = 0; b0 < a.B; b0 += BT) {
    if (b0 > 0) {
      __syncthreads();  // the previous pass's reads of xs (compute or reduction) are done
      stage(b0, 0);
    }
    __syncthreads();  // also publishes the W tile on the first pass

    float acc[4][8] = {};
    // Tensor-core candidate (see the file comment): this loop is the [BT x K] x [K x NT] product.
#pragma unroll 4
    for (int k = ks; k < K; k += ks_n) {
      const float4 w0 = *reinterpret_cast<const float4*>(ws + k * NT + 8 * cg);
      const float4 w1 = *reinterpret_cast<const float4*>(ws + k * NT + 8 * cg + 4);
      const float4 xv = *reinterpret_cast<const float4*>(xs + xs_index(k, 4 * bg, BT));
      const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
      const float xm[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int n = 0; n < 8; ++n) acc[m][n] = fmaf(xm[m], wv[n], acc[m][n]);
    }

    if (ks_n == 1) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int b = b0 + 4 * bg + m;
        if (b >= a.B) break;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const int col = n0 + 8 * cg + n;
          if (col < N) y[size_t(b) * a.y_b + col] = acc[m][n];
        }
      }
      continue;
    }
    // Lanes of one warp that hold different K slices (small batches: t2 = bg + groups * ks spans
    // lane bits) first sum by shuffles; the warp then writes one partial per remaining slice.
    const int kpw = max(1, (32 / CG) / groups);  // K slices per warp
    for (int off = CG * groups; off < 32; off *= 2)
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int n = 0; n < 8; ++n) acc[m][n] += __shfl_xor_sync(0xffffffffu, acc[m][n], off);
    const int nred = ks_n / kpw, kr = ks / kpw;
    __syncthreads();  // everyone is done reading xs; reuse it as red[nred][BT][NT], slice q skewed by 4q floats
    float* red = xs;
    if (ks % kpw == 0) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        float4* dst = reinterpret_cast<float4*>(red + (size_t(kr) * BT + 4 * bg + m) * NT + 8 * cg + 4 * kr);
        dst[0] = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
        dst[1] = make_float4(acc[m][4], acc[m][5], acc[m][6], acc[m][7]);
      }
    }
    __syncthreads();
    // 8 lanes per output (the skew puts them on distinct banks), then a 3-step shuffle sum.
    const int outs = min(BT, a.B - b0) * NT;
    for (int base = 0; base < outs * 8; base += kThreads) {
      const int i = base + tid, o = i / 8, part = i % 8, bl = o / NT, n = o % NT;
      float s = 0.f;
      if (o < outs)
        for (int q = part; q < nred; q += 8) s += red[(size_t(q) * BT + bl) * NT + n + 4 * q];
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      if (o < outs && part == 0 && n0 + n < N) y[size_t(b0 + bl) * a.y_b + n0 + n] = s;
    }
  }
}

// Dynamic shared memory above 48 KB for `Kernel`, set once per device (a cache of a value that never changes,
// saving a driver call per launch); returns the per-block opt-in limit, capped at kMlaAbsorbMaxSmem.
template <auto Kernel>
int configure_max_smem() {
  static std::atomic<int> configured[kMaxDevices];  // 0: not yet
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  int smem_max = dev < kMaxDevices ? configured[dev].load(std::memory_order_acquire) : 0;
  if (smem_max == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    smem_max = std::min(smem_max, int(kMlaAbsorbMaxSmem));
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    int(cudaSharedmemCarveoutMaxShared)));
    if (dev < kMaxDevices) configured[dev].store(smem_max, std::memory_order_release);
  }
  return smem_max;
}

// Returns false (nothing launched) when this device's opt-in shared memory per block is below the
// plan's (the sm_90 target has 227 KB; the plan asks for at most kMlaAbsorbMaxSmem = 200 KB).
template <typename T, int NT, bool kTransposed>
bool launch_tile_gemm(const TileGemmArgs& a, const MlaAbsorbPlan& plan, int H, cudaStream_t stream) {
  auto kernel = tile_gemm_kernel<T, NT, kTransposed>;
  const int smem_max = configure_max_smem<tile_gemm_kernel<T, NT, kTransposed>>();
  if (plan.smem_bytes > size_t(smem_max)) return false;
  TileGemmArgs args = a;
  args.x_vec = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.x_b % 4 == 0 && a.x_h % 4 == 0 && a.K % 4 == 0;
  const dim3 grid((a.N + NT - 1) / NT, H);
  launch_kernel(kernel, grid, kThreads, plan.smem_bytes, stream, args);
  CUDA_CHECK_LAUNCH();
  return true;
}

// ---------------------------------------------------------------------------------------------
// Tensor-core path (plan.tc, BF16 kv_b): the same per-head product Y = X W on mma.sync m16n8k16 with fp32
// accumulators. X is fp32 and the contract is fp32 accuracy (1e-5 of sum |x||w|), so each X element is split into
// three BF16 terms x = hi + mid + lo (each the BF16 rounding of what the previous ones left: 3 x 8 significant bits
// cover fp32's 24) and every product is three MMAs against the same BF16 W fragment (W is exact in BF16). The
// products are exact in the tensor core; what differs from the CPU twin is fp32 accumulation order only.
// CTA = 4 warps per (head, 64 output columns): the W tile is copied once into shared memory with cp.async (issued
// before pdl_wait: weights), then the warps take (16-row m-tile, 64 / NG columns) units in turn (NG = 1, 2 or 4; the
// launcher's choice is measured, launch_tc_gemm): A fragments straight from global memory (float2 per
// register pair, split in registers), B fragments by
// ldmatrix (x4: two n8-tiles x two k-halves). Shared layouts, 16 bytes of padding per row (ldmatrix rows land on
// distinct bank quads):
//   kTransposed (unabsorb, W_UV stored [n][k]): ws[j][k], row stride K + 8; plain ldmatrix gives B[k][n].
//   !kTransposed (absorb, W_UK stored [k][n]):  ws[k][j], row stride 64 + 8;  ldmatrix.trans gives B[k][n].
// Floor at GLM-5 (H 64, B 128): absorb 12.6 MB of W + 6.3 MB of q + 16.8 MB of q_latent = 8.4 us at 4.26 TB/s,
// 4.8 GFLOP of split MMAs; unabsorb 16.8 + 16.8 + 8.4 MB = 9.9 us, 6.4 GFLOP.
constexpr int kTcThreads = 128;
constexpr int kTcWarps = kTcThreads / 32;
constexpr int kTcCols = 64;  // output columns per CTA: 8 n8-tiles per warp
constexpr int kTcPad = 8;    // BF16 elements of padding per shared-memory row

__host__ __device__ constexpr size_t tc_smem_bytes(int K, bool transposed) {
  return transposed ? size_t(kTcCols) * (K + kTcPad) * 2 : size_t(K) * (kTcCols + kTcPad) * 2;
}

// Two fp32 values as three BF16x2 words (low half = v.x): hi = bf16(v), mid = bf16(v - hi), lo = bf16(v - hi - mid).
// The subtractions are exact in fp32 (Sterbenz), so hi + mid + lo carries v's 24 significant bits.
__device__ __forceinline__ void split_bf16x3(float2 v, uint32_t& hi, uint32_t& mid, uint32_t& lo) {
  const __nv_bfloat162 h = __float22bfloat162_rn(v);
  const float2 hf = __bfloat1622float2(h);
  const float2 r1 = make_float2(v.x - hf.x, v.y - hf.y);
  const __nv_bfloat162 m = __float22bfloat162_rn(r1);
  const float2 mf = __bfloat1622float2(m);
  const __nv_bfloat162 l = __float22bfloat162_rn(make_float2(r1.x - mf.x, r1.y - mf.y));
  hi = *reinterpret_cast<const uint32_t*>(&h);
  mid = *reinterpret_cast<const uint32_t*>(&m);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

template <bool kTransposed, int NG>
__global__ void __launch_bounds__(kTcThreads) tc_gemm_kernel(TileGemmArgs a) {
  extern __shared__ __align__(16) uint16_t ws[];
  const int h = blockIdx.y, n0 = blockIdx.x * kTcCols, K = a.K, N = a.N, tid = threadIdx.x;
  const uint16_t* w = static_cast<const uint16_t*>(a.w) + size_t(h) * a.w_h;
  const uint32_t ws0 = smem_u32(ws);
  // 1. The W tile, 16-byte chunks of 8 BF16, zero-filled past N (K % 16 == 0: no partial chunks along k).
  if constexpr (kTransposed) {
    const int kc = K / 8, stride = K + kTcPad;
    for (int i = tid; i < kTcCols * kc; i += kTcThreads) {
      const int j = i / kc, k = 8 * (i % kc), row = min(n0 + j, N - 1);
      cp_async16(ws0 + 2u * (j * stride + k), w + size_t(row) * a.w_ld + k, n0 + j < N ? 16 : 0);
    }
  } else {
    constexpr int stride = kTcCols + kTcPad, cc = kTcCols / 8;
    for (int i = tid; i < K * cc; i += kTcThreads) {
      const int k = i / cc, j = 8 * (i % cc), col = min(n0 + j, N - 8);  // N % 8 == 0
      cp_async16(ws0 + 2u * (k * stride + j), w + size_t(k) * a.w_ld + col, n0 + j < N ? 16 : 0);
    }
  }
  cp_async_commit();
  pdl_begin();  // X is the previous kernel's output
  cp_async_wait_all();
  __syncthreads();

  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  // ldmatrix x4 row address of this lane: matrix lane / 8 = (n8-tile half lane / 16, k half (lane / 8) % 2).
  const int lrow = lane % 8, khalf = (lane / 8) % 2, nhalf = lane / 16;
  const uint32_t b_base = kTransposed ? ws0 + 2u * ((8 * nhalf + lrow) * (K + kTcPad) + 8 * khalf)
                                      : ws0 + 2u * ((8 * khalf + lrow) * (kTcCols + kTcPad) + 8 * nhalf);
  const float* x = a.x + size_t(h) * a.x_h;
  float* y = a.y + size_t(h) * a.y_h;
  constexpr int NP = kTcCols / 16 / NG;  // pairs of n8-tiles per warp
  const int units = (a.B + 15) / 16 * NG;
  for (int u = warp; u < units; u += kTcWarps) {
    const int m0 = 16 * (u / NG), np0 = NP * (u % NG);
    const int r0 = m0 + g, r1 = m0 + g + 8;
    const float* x0 = x + size_t(min(r0, a.B - 1)) * a.x_b + 2 * t;
    const float* x1 = x + size_t(min(r1, a.B - 1)) * a.x_b + 2 * t;
    // Four k-steps of A loaded before any product (rows past B read row B - 1 and are never stored). Loading the next
    // four during the products (registers double-buffered) measured slower (S15b: absorb batch 128 34.1 -> 42.5 us).
    float acc[2 * NP][4] = {};
    for (int k0 = 0; k0 < K; k0 += 64) {
      float2 xv[4][4];
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int k = k0 + 16 * s;
        if (k < K) {
          xv[s][0] = __ldg(reinterpret_cast<const float2*>(x0 + k));
          xv[s][1] = __ldg(reinterpret_cast<const float2*>(x1 + k));
          xv[s][2] = __ldg(reinterpret_cast<const float2*>(x0 + k + 8));
          xv[s][3] = __ldg(reinterpret_cast<const float2*>(x1 + k + 8));
        }
      }
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int k = k0 + 16 * s;
        if (k >= K) break;
        uint32_t ah[4], am[4], al[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) split_bf16x3(xv[s][r], ah[r], am[r], al[r]);
#pragma unroll
        for (int i = 0; i < NP; ++i) {
          const int np = np0 + i;
          uint32_t b0, b1, b2, b3;
          if constexpr (kTransposed) ldsm_x4(b_base + 2u * (16 * np * (K + kTcPad) + k), b0, b1, b2, b3);
          else ldsm_x4_t(b_base + 2u * (k * (kTcCols + kTcPad) + 16 * np), b0, b1, b2, b3);
          // Smallest terms first.
          mma_16816_bf16(acc[2 * i], al[0], al[1], al[2], al[3], b0, b1);
          mma_16816_bf16(acc[2 * i], am[0], am[1], am[2], am[3], b0, b1);
          mma_16816_bf16(acc[2 * i], ah[0], ah[1], ah[2], ah[3], b0, b1);
          mma_16816_bf16(acc[2 * i + 1], al[0], al[1], al[2], al[3], b2, b3);
          mma_16816_bf16(acc[2 * i + 1], am[0], am[1], am[2], am[3], b2, b3);
          mma_16816_bf16(acc[2 * i + 1], ah[0], ah[1], ah[2], ah[3], b2, b3);
        }
      }
    }
    // C fragment: acc[j][0..1] = Y[r0][col, col + 1], acc[j][2..3] = Y[r1][...], col = n0 + 16 np0 + 8 j + 2t.
#pragma unroll
    for (int j = 0; j < 2 * NP; ++j) {
      const int col = n0 + 16 * np0 + 8 * j + 2 * t;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (col + e >= N) continue;
        if (r0 < a.B) y[size_t(r0) * a.y_b + col + e] = acc[j][e];
        if (r1 < a.B) y[size_t(r1) * a.y_b + col + e] = acc[j][2 + e];
      }
    }
  }
}

// Returns false (nothing launched) when the device's opt-in shared memory per block is below the tile's.
// NG = how many warps share one 16-row m-tile (each 64 / NG of the CTA's columns): more warps busy at small batches,
// each A fragment loaded NG times.
template <bool kTransposed, int NG>
bool launch_tc_gemm_ng(const TileGemmArgs& a, int H, cudaStream_t stream) {
  const size_t smem = tc_smem_bytes(a.K, kTransposed);
  if (smem > size_t(configure_max_smem<tc_gemm_kernel<kTransposed, NG>>())) return false;
  const dim3 grid((a.N + kTcCols - 1) / kTcCols, H);
  launch_kernel(tc_gemm_kernel<kTransposed, NG>, grid, kTcThreads, smem, stream, a);
  CUDA_CHECK_LAUNCH();
  return true;
}

template <bool kTransposed>
bool launch_tc_gemm(const TileGemmArgs& a, int H, int warps_per_m_tile, cudaStream_t stream) {
  const int m_tiles = (a.B + 15) / 16;
  int ng = warps_per_m_tile;
  // Measured (S15c, H200, bench and decode step): absorb one warp per batch tile at every batch (batch 8 in the step:
  // 720 us per step with 1 against 1020 with 4; batch 32: 1071 against 1340 with 2); unabsorb two below four tiles
  // (bench batch 32 H 64: 21.9 against 23.6 us with 1; batch 8: 19.4 against 20.4).
  if (ng == 0) ng = kTransposed && m_tiles < kTcWarps ? 2 : 1;
  if (ng == 1) return launch_tc_gemm_ng<kTransposed, 1>(a, H, stream);
  if (ng == 2) return launch_tc_gemm_ng<kTransposed, 2>(a, H, stream);
  return launch_tc_gemm_ng<kTransposed, 4>(a, H, stream);
}


// The per-head GEMM of each product (the tiled and tensor-core kernels share it):
//   absorb:   X = q_nope (rows of q_head_stride), W = W_UK[h] = kv_b rows h*(nope+v) .. +nope, stored [k][n];
//   unabsorb: X = o_latent, W = W_UV[h] = kv_b rows h*(nope+v)+nope .. +v, stored [n][k].
TileGemmArgs absorb_gemm_args(const MlaAbsorbParams& p) {
  TileGemmArgs a;
  a.x = p.q;
  a.x_b = size_t(p.H) * p.q_head_stride;
  a.x_h = size_t(p.q_head_stride);
  a.w = p.kv_b;
  a.w_h = size_t(p.nope + p.v) * p.L;
  a.w_ld = p.L;
  a.y = p.q_latent;
  a.y_b = size_t(p.H) * p.L;
  a.y_h = size_t(p.L);
  a.B = p.B;
  a.K = p.nope;
  a.N = p.L;
  return a;
}

TileGemmArgs unabsorb_gemm_args(const MlaUnabsorbParams& p) {
  TileGemmArgs a;
  a.x = p.o_latent;
  a.x_b = size_t(p.H) * p.L;
  a.x_h = size_t(p.L);
  a.w = static_cast<const char*>(p.kv_b) + size_t(p.nope) * p.L * dtype_size(p.kv_b_dtype);
  a.w_h = size_t(p.nope + p.v) * p.L;
  a.w_ld = p.L;
  a.y = p.out;
  a.y_b = size_t(p.H) * p.v;
  a.y_h = size_t(p.v);
  a.B = p.B;
  a.K = p.L;
  a.N = p.v;
  return a;
}

void require_warp_split(int warps_per_m_tile, const char* op) {
  require(warps_per_m_tile == 0 || warps_per_m_tile == 1 || warps_per_m_tile == 2 || warps_per_m_tile == 4,
          std::string(op) + ": warps_per_m_tile = " + std::to_string(warps_per_m_tile) + ", expected 0, 1, 2 or 4");
}

}  // namespace

void mla_absorb_simple_cuda(const MlaAbsorbParams& p, cudaStream_t stream) {
  validate_mla_absorb_params(p, "mla_absorb_cuda", true);
  const size_t smem = sizeof(float) * size_t(p.nope);
  require(smem <= 48 * 1024, "mla_absorb_cuda: MlaAbsorbParams.nope = " + std::to_string(p.nope) +
                                 ", expected <= 12288 (q_nope is staged in shared memory)");
  const dim3 grid(p.B * p.H, (p.L + kAbsorbThreads - 1) / kAbsorbThreads);
  if (p.kv_b_dtype == DType::BF16) launch_kernel(mla_absorb_simple_kernel<uint16_t>, grid, kAbsorbThreads, smem, stream, p);
  else launch_kernel(mla_absorb_simple_kernel<float>, grid, kAbsorbThreads, smem, stream, p);
  CUDA_CHECK_LAUNCH();
}

void mla_unabsorb_simple_cuda(const MlaUnabsorbParams& p, cudaStream_t stream) {
  validate_mla_unabsorb_params(p, "mla_unabsorb_cuda", true);
  const dim3 grid(p.B * p.H, (p.v + kUnabsorbWarps - 1) / kUnabsorbWarps);
  if (p.kv_b_dtype == DType::BF16) launch_kernel(mla_unabsorb_simple_kernel<uint16_t>, grid, 32 * kUnabsorbWarps, 0, stream, p);
  else launch_kernel(mla_unabsorb_simple_kernel<float>, grid, 32 * kUnabsorbWarps, 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void mla_absorb_cuda(const MlaAbsorbParams& p, cudaStream_t stream) {
  const MlaAbsorbPlan plan = plan_mla_absorb(p);  // validates
  if (plan.gemv) return mla_absorb_gemv_cuda(p, stream);
  if (plan.tc) return mla_absorb_tc_cuda(p, stream);
  if (!plan.fast) return mla_absorb_simple_cuda(p, stream);
  mla_absorb_tiled_cuda(p, stream);
}

void mla_unabsorb_cuda(const MlaUnabsorbParams& p, cudaStream_t stream) {
  const MlaAbsorbPlan plan = plan_mla_unabsorb(p);  // validates
  if (plan.gemv) return mla_unabsorb_gemv_cuda(p, stream);
  if (plan.tc) return mla_unabsorb_tc_cuda(p, stream);
  if (!plan.fast) return mla_unabsorb_simple_cuda(p, stream);
  mla_unabsorb_tiled_cuda(p, stream);
}

void mla_absorb_gemv_cuda(const MlaAbsorbParams& p, cudaStream_t stream) {
  require(plan_mla_absorb(p).gemv_eligible,  // validates
          "mla_absorb_gemv_cuda: needs B <= 4 (B = " + std::to_string(p.B) + "), BF16 kv_b 16-byte aligned and L % 8 == 0 (L = " +
              std::to_string(p.L) + ")");
  const dim3 grid((p.L + kAbsorbCols - 1) / kAbsorbCols, p.H);
  if (p.B == 1) launch_kernel(mla_absorb_gemv_kernel<1>, grid, kGemvThreads, 0, stream, p);
  else if (p.B == 2) launch_kernel(mla_absorb_gemv_kernel<2>, grid, kGemvThreads, 0, stream, p);
  else launch_kernel(mla_absorb_gemv_kernel<4>, grid, kGemvThreads, 0, stream, p);
}

void mla_unabsorb_gemv_cuda(const MlaUnabsorbParams& p, cudaStream_t stream) {
  require(plan_mla_unabsorb(p).gemv_eligible,  // validates
          "mla_unabsorb_gemv_cuda: needs B <= 4 (B = " + std::to_string(p.B) + "), BF16 kv_b and o_latent 16-byte aligned and "
              "L % 8 == 0 (L = " + std::to_string(p.L) + ")");
  const int rows_per_cta = (kGemvThreads / 32) * kUnabsorbRows;
  const dim3 grid((p.v + rows_per_cta - 1) / rows_per_cta, p.H);
  if (p.B == 1) launch_kernel(mla_unabsorb_gemv_kernel<1>, grid, kGemvThreads, 0, stream, p);
  else if (p.B == 2) launch_kernel(mla_unabsorb_gemv_kernel<2>, grid, kGemvThreads, 0, stream, p);
  else launch_kernel(mla_unabsorb_gemv_kernel<4>, grid, kGemvThreads, 0, stream, p);
}

void mla_absorb_tiled_cuda(const MlaAbsorbParams& p, cudaStream_t stream) {
  const MlaAbsorbPlan plan = plan_mla_absorb(p);  // validates
  require(plan.eligible, "mla_absorb_tiled_cuda: kv_b must be 16-byte aligned with L % 8 == 0 (BF16) or L % 4 == 0 "
                         "(F32) and the tile's " + std::to_string(plan.smem_bytes) + " B of shared memory <= " +
                         std::to_string(kMlaAbsorbMaxSmem) + " (L = " + std::to_string(p.L) + ")");
  TileGemmArgs a = absorb_gemm_args(p);
  a.groups = plan.batch_groups;
  const bool done = p.kv_b_dtype == DType::BF16 ? launch_tile_gemm<uint16_t, 64, false>(a, plan, p.H, stream)
                                                : launch_tile_gemm<float, 64, false>(a, plan, p.H, stream);
  if (!done) mla_absorb_simple_cuda(p, stream);
}

void mla_unabsorb_tiled_cuda(const MlaUnabsorbParams& p, cudaStream_t stream) {
  const MlaAbsorbPlan plan = plan_mla_unabsorb(p);  // validates
  require(plan.eligible, "mla_unabsorb_tiled_cuda: kv_b must be 16-byte aligned with L % 8 == 0 (BF16) or L % 4 == 0 "
                         "(F32) and the tile's " + std::to_string(plan.smem_bytes) + " B of shared memory <= " +
                         std::to_string(kMlaAbsorbMaxSmem) + " (L = " + std::to_string(p.L) + ")");
  TileGemmArgs a = unabsorb_gemm_args(p);
  a.groups = plan.batch_groups;
  const bool done = p.kv_b_dtype == DType::BF16 ? launch_tile_gemm<uint16_t, 32, true>(a, plan, p.H, stream)
                                                : launch_tile_gemm<float, 32, true>(a, plan, p.H, stream);
  if (!done) mla_unabsorb_simple_cuda(p, stream);
}

void mla_absorb_tc_cuda(const MlaAbsorbParams& p, cudaStream_t stream, int warps_per_m_tile) {
  const MlaAbsorbPlan plan = plan_mla_absorb(p);  // validates
  require(plan.tc_eligible, "mla_absorb_tc_cuda: needs a BF16 kv_b 16-byte aligned, L % 8 == 0 (L = " +
                                std::to_string(p.L) + "), nope % 16 == 0 (nope = " + std::to_string(p.nope) +
                                "), q 8-byte aligned with an even q_head_stride and the W tile's " +
                                std::to_string(plan.tc_smem_bytes) + " B of shared memory <= " +
                                std::to_string(kMlaAbsorbMaxSmem));
  const TileGemmArgs a = absorb_gemm_args(p);
  require_warp_split(warps_per_m_tile, "mla_absorb_tc_cuda");
  if (!launch_tc_gemm<false>(a, p.H, warps_per_m_tile, stream)) mla_absorb_simple_cuda(p, stream);
}

void mla_unabsorb_tc_cuda(const MlaUnabsorbParams& p, cudaStream_t stream, int warps_per_m_tile) {
  const MlaAbsorbPlan plan = plan_mla_unabsorb(p);  // validates
  require(plan.tc_eligible, "mla_unabsorb_tc_cuda: needs a BF16 kv_b 16-byte aligned, L % 16 == 0 (L = " +
                                std::to_string(p.L) + "), o_latent 8-byte aligned and the W tile's " +
                                std::to_string(plan.tc_smem_bytes) + " B of shared memory <= " +
                                std::to_string(kMlaAbsorbMaxSmem));
  const TileGemmArgs a = unabsorb_gemm_args(p);
  require_warp_split(warps_per_m_tile, "mla_unabsorb_tc_cuda");
  if (!launch_tc_gemm<true>(a, p.H, warps_per_m_tile, stream)) mla_unabsorb_simple_cuda(p, stream);
}

}  // namespace glm5
