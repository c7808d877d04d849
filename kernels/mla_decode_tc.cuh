// Tensor-core sparse MLA decode (the fast path of mla_decode_cuda; included by mla_decode.cu only).
//
// One CTA of 256 threads (8 warps) processes ALL heads of one request (up to 64: MT = 1, 2 or 4 m16
// tiles, heads past H padded with zero queries) for one chunk of its top-k rows, so each selected
// KV row is read from HBM once per request (H > 64: one CTA per 64 heads). Per tile of kTileRows = 32
// selected rows:
//   1. the rows arrive by cp.async (16-byte copies, zero-filled for index -1 or past the chunk), the
//      tile's indices read from a shared-memory ring filled a tile ahead. FP8 rows land in a staging
//      buffer and are dequantized on chip exactly as kv_cast does (round_bf16(e4m3 * scale), rope
//      copied), BF16 rows land directly in the K/V tile; so all three KV paths see identical K/V.
//      Plain (kPipeMode 0): one tile in flight while one is computed. Pipelined FP8 (mode 1, what
//      Auto runs): three tiles in flight, tile t + 1 dequantized during tile t's P . V. Pipelined
//      BF16 (mode 2): two tiles in flight. Measured (round 1, H200): with one 21-37 KB tile in flight
//      an SM waited ~2.5 us per tile, the per-SM latency, not HBM bandwidth, set the time.
//   2. S = Q . K^T over W = L + R dims with mma.sync.m16n8k16 (bf16 in, fp32 accumulate; Q rounded to
//      bf16 once per CTA; 64 or 16 heads: each warp keeps its Q fragments (16 heads x half of W) in
//      registers, 32 heads: from shared memory), ldmatrix fragments.
//   3. online softmax in fp32 (base-2 exponentials of the prescaled scores; 256 / (16 MT) threads per
//      head, 2..8 rows each), P rounded to bf16 for the second product; the running sum l uses fp32 p.
//   4. O += P . V over the L latent dims (V = the first L values of each row; ldmatrix.trans): warp w
//      owns dims [64w, 64w + 64) of all heads, MT x 8 m16n8 fp32 accumulators per thread.
// Split-K: the same workspace layout and combine kernel as the fp32 kernel (acc [B][H][S][L], then
// m [B][H][S] in natural-log units, then l [B][H][S]).
// Shapes it handles: L == 512, R % 16 == 0, R <= 64 (W <= 576), kv 16-byte aligned, FP8 row_bytes a
// multiple of 16 (GLM-5 / DeepSeek: 656); mla_decode_cuda falls back to the fp32 kernel otherwise.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/kv_cast.cuh"
#include "kernels/launch.cuh"
#include "kernels/mla_decode.h"
#include "kernels/mma_sync.cuh"

namespace glm5 {
namespace mla_tc {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTileRows = 32;       // selected rows per tile
constexpr int kL = 512;             // latent dims handled (8 warps x 64 output dims)
constexpr int kMaxW = 576;          // L + R
constexpr int kStride = kMaxW + 8;  // bf16 elements per Q / K/V smem row: 1168 B = 73 x 16 B (odd: ldmatrix conflict-free)
constexpr int kPStride = kTileRows + 8;  // bf16 elements per P row: 80 B = 5 x 16 B
constexpr int kSStride = kTileRows + 4;  // fp32 elements per S row
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Byte offsets of the shared-memory regions (host and device agree).
struct Smem {
  int q, kv, stage, s, p, m, l, a, idx, total;
  // pipe (MT = 4 or 1): FP8 rows: a second K/V tile (MT = 4: aliasing q, Q lives in registers after
  // the prologue) and four staging buffers (cp.async three tiles ahead), a ring of five index tiles;
  // BF16 rows: three K/V tiles (MT = 4: two of them over q), a ring of four index tiles.
  __host__ __device__ Smem(int mt, bool fp8, int row_bytes, bool pipe = false) {
    const int hb = 16 * mt;
    const int kv_bytes = kTileRows * kStride * 2;
    q = 0;
    kv = q + hb * kStride * 2;
    const int kv_tiles = fp8 ? (pipe && mt == 1 ? 2 : 1) : (pipe ? (mt == 4 ? 1 : 3) : 2);
    stage = kv + kv_tiles * kv_bytes;
    s = stage + (fp8 ? (pipe ? 4 : 2) * kTileRows * row_bytes : 0);
    s = (s + 15) / 16 * 16;
    p = s + (mt == 2 ? 1 : 2) * hb * kSStride * 4;  // k-parts of S: see mla_decode_tc_kernel
    m = p + hb * kPStride * 2;
    l = m + hb * 4;
    a = l + hb * 4;
    idx = a + hb * 4;
    total = idx + (pipe ? (fp8 ? 5 : 4) : 3) * kTileRows * 4;
  }
};

// The rope part of query head hq = t * H + h of request b (query row b * s_q + t).
__device__ __forceinline__ const float* q_rope_row(const MlaDecodeParams& p, int b, int hq) {
  const int64_t bt = int64_t(b) * p.s_q + hq / p.H;
  return p.q_rope + bt * p.q_rope_row_stride + int64_t(hq % p.H) * p.q_rope_head_stride;
}

// Index of tile row `lane` of the tile starting at j0 (-1 past j_end).
__device__ __forceinline__ int tile_index(const MlaDecodeParams& p, int b, int j0, int j_end, int lane) {
  const int j = j0 + lane;
  return j < j_end ? __ldg(p.indices + int64_t(b) * p.topk + j) : -1;
}

// The CTA issues the cp.async copies of the 32 rows idx_s[0..32) of the KV buffer (index < 0:
// zero-filled) into `dst` (FP8: the staging rows, row stride row_bytes; BF16: the K/V tile, row stride
// kStride). The indices come from shared memory: a global load here would stall every copy.
// Warp w copies rows w, w + 8, w + 16, w + 24, lane l the row's 16-byte chunks l, l + 32, ...: no
// division by the row's chunk count. At batch 1 the CTA issues only two or three tiles and every
// instruction of its prologue is on the critical path (S13b: the earlier i / chunks form cost ~210
// instructions per warp per tile).
__device__ __forceinline__ void issue_tile(const MlaDecodeParams& p, const int* idx_s, uint8_t* dst, int tid) {
  constexpr int kRounds = (kMaxW * 2 / 16 + 31) / 32;  // 16-byte chunks per lane and row: <= 3 (BF16 rows of 576)
  const int row_bytes = p.layout.row_bytes;
  const int chunks = row_bytes / 16, dst_stride = p.layout.fp8 ? row_bytes : kStride * 2;
  const int lane = tid & 31, warp = tid >> 5;
  const uint32_t dst0 = smem_u32(dst) + 16 * lane;
#pragma unroll 1  // rolled: the MT = 4 kernels hold 200 registers of Q fragments and O here (unrolled: 24 B spill)
  for (int k = 0; k < kTileRows / kWarps; ++k) {
    const int r = warp + kWarps * k, t = idx_s[r];
    const uint8_t* src = t >= 0 ? p.kv + int64_t(t) * row_bytes + 16 * lane : p.kv;
    const int step = t >= 0 ? 16 * 32 : 0, bytes = t >= 0 ? 16 : 0;
    const uint32_t d = dst0 + r * dst_stride;
#pragma unroll
    for (int j = 0; j < kRounds; ++j)
      if (lane + 32 * j < chunks) cp_async16(d + 16 * 32 * j, src + step * j, bytes);
  }
}

// FP8 staging rows -> bf16 K/V tile: latent codes dequantized 16 at a time (round_bf16(e4m3 * scale)),
// rope copied. L == kL (512, what tc_supported admits): warp w converts rows w + 8 k, lane l the row's code
// chunk l (codes 16 l .. 16 l + 15) and, for l < R / 8, its rope chunk l; no per-job division.
__device__ __forceinline__ void dequant_tile(const LatentLayout& l, const uint8_t* stage, uint16_t* kv_s, int tid) {
  const int lane = tid & 31, warp = tid >> 5;
  const int scale_off = kL + 4 * ((16 * lane) / l.group), rope_off = l.rope_offset() + 16 * lane;
  const bool rope = lane < l.rope_dim / 8;
#pragma unroll 1  // rolled: see issue_tile
  for (int k = 0; k < kTileRows / kWarps; ++k) {
    const int r = warp + kWarps * k;
    const uint8_t* row = stage + r * l.row_bytes;
    uint16_t* out = kv_s + r * kStride;
    const uint4 codes = *reinterpret_cast<const uint4*>(row + 16 * lane);
    const float sc = *reinterpret_cast<const float*>(row + scale_off);
    dequant16_bf16(codes, sc, reinterpret_cast<uint4*>(out + 16 * lane));
    if (rope) *reinterpret_cast<uint4*>(out + kL + 8 * lane) = *reinterpret_cast<const uint4*>(row + rope_off);
  }
}

// The pipelined kernel's dequantization, split in branch-free pieces it interleaves with P . V:
// code chunk jobs j = tid + 256 k (row j / 32, 16 codes from 16 (j % 32)), L = 512, G = 128.
__device__ __forceinline__ void dequant_codes_job(const LatentLayout& l, const uint8_t* stage, uint16_t* kv_s, int j) {
  const int r = j >> 5, c = j & 31;
  const uint8_t* row = stage + r * l.row_bytes;
  const uint4 codes = *reinterpret_cast<const uint4*>(row + 16 * c);
  const float sc = *reinterpret_cast<const float*>(row + kL + 4 * (c >> 3));
  dequant16_bf16(codes, sc, reinterpret_cast<uint4*>(kv_s + r * kStride + 16 * c));
}
__device__ __forceinline__ void dequant_rope(const LatentLayout& l, const uint8_t* stage, uint16_t* kv_s, int tid) {
  const int per_row = l.rope_dim / 8;  // 16-byte chunks of rope per row
  for (int j = tid; j < kTileRows * per_row; j += kThreads) {
    const int r = j / per_row, k = j - r * per_row;
    *reinterpret_cast<uint4*>(kv_s + r * kStride + kL + 8 * k) =
        *reinterpret_cast<const uint4*>(stage + r * l.row_bytes + l.rope_offset() + 16 * k);
  }
}

// Q of query heads [h0, h0 + HB) of request b (zeros past HQ) -> bf16 q_s rows [latent | rope].
// Loads are batched (up to kBatch independent loads per thread in flight before the stores): this runs once
// per CTA, but with one load at a time its latency would cost as much as many tiles.
// Fast forms (what the engine passes): the block's latent rows are contiguous (heads h0.. of request b), so
// thread tid loads float4 tid + 256 k of the block with no per-element index math; rope rows of 64 floats
// 16-byte aligned load as one float4 per (head, 4 dims). At batch 1 the prologue is the CTA's critical path:
// the general per-element form below cost ~1,200 instructions per warp at 16 heads (S13b, ncu SourceCounters).
template <int HB>
__device__ __forceinline__ void load_q(const MlaDecodeParams& p, int b, int h0, int HQ, uint16_t* q_s, int tid) {
  constexpr int kBatch = 16, kL4 = kL / 4;
  const int R = p.layout.rope_dim, n_heads = min(HB, HQ - h0);  // the block's real heads (>= 1)
  if ((reinterpret_cast<uintptr_t>(p.q_latent) & 15u) == 0) {  // latent: float4 -> 4 bf16
    constexpr int kPer = HB * kL4 / kThreads, kB = kPer < kBatch ? kPer : kBatch;  // float4 per thread
    static_assert(HB * kL4 % kThreads == 0 && kPer % kB == 0, "whole float4 rounds");
    const float4* src = reinterpret_cast<const float4*>(p.q_latent + (int64_t(b) * HQ + h0) * kL);
    const int n_valid = n_heads * kL4;
#pragma unroll
    for (int k0 = 0; k0 < kPer; k0 += kB) {
      float4 v[kB];
#pragma unroll
      for (int k = 0; k < kB; ++k) {
        const int i = tid + (k0 + k) * kThreads;
        v[k] = i < n_valid ? __ldg(src + i) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int k = 0; k < kB; ++k) {
        const int i = tid + (k0 + k) * kThreads, hh = i / kL4, d4 = i % kL4;
        const __nv_bfloat162 lo = __floats2bfloat162_rn(v[k].x, v[k].y), hi = __floats2bfloat162_rn(v[k].z, v[k].w);
        uint2 w;
        w.x = *reinterpret_cast<const uint32_t*>(&lo);
        w.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(q_s + hh * kStride + 4 * d4) = w;
      }
    }
  } else {
    for (int i0 = tid; i0 < HB * kL; i0 += kBatch * kThreads) {
      float v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = i0 + k * kThreads, hh = i / kL, d = i - hh * kL;
        v[k] = i < HB * kL && h0 + hh < HQ ? __ldg(p.q_latent + (int64_t(b) * HQ + h0 + hh) * kL + d) : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = i0 + k * kThreads, hh = i / kL, d = i - hh * kL;
        if (i < HB * kL) {
          const __nv_bfloat16 bv = __float2bfloat16_rn(v[k]);
          q_s[hh * kStride + d] = *reinterpret_cast<const uint16_t*>(&bv);
        }
      }
    }
  }
  const bool rope4 = R == 64 && (reinterpret_cast<uintptr_t>(p.q_rope) & 15u) == 0 && p.q_rope_row_stride % 4 == 0 &&
                     p.q_rope_head_stride % 4 == 0;
  if (rope4) {  // HB x 16 float4: MT per thread
    constexpr int kPer = HB * 16 / kThreads;
    static_assert(HB * 16 % kThreads == 0, "whole float4 rounds");
    float4 v[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = tid + k * kThreads, hh = i / 16, d4 = i % 16;
      v[k] = hh < n_heads ? __ldg(reinterpret_cast<const float4*>(q_rope_row(p, b, h0 + hh)) + d4)
                          : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = tid + k * kThreads, hh = i / 16, d4 = i % 16;
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v[k].x, v[k].y), hi = __floats2bfloat162_rn(v[k].z, v[k].w);
      uint2 w;
      w.x = *reinterpret_cast<const uint32_t*>(&lo);
      w.y = *reinterpret_cast<const uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(q_s + hh * kStride + kL + 4 * d4) = w;
    }
    return;
  }
  for (int i0 = tid; i0 < HB * R; i0 += kBatch * kThreads) {  // rope, any R and alignment
    float v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = i0 + k * kThreads, hh = i / R, d = i - hh * R;
      v[k] = i < HB * R && h0 + hh < HQ ? __ldg(q_rope_row(p, b, h0 + hh) + d) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = i0 + k * kThreads, hh = i / R, d = i - hh * R;
      if (i < HB * R) {
        const __nv_bfloat16 bv = __float2bfloat16_rn(v[k]);
        q_s[hh * kStride + kL + d] = *reinterpret_cast<const uint16_t*>(&bv);
      }
    }
  }
}

// MT m16 tiles of heads (HB = 16 * MT heads per CTA, from h0 = blockIdx.x * HB: a request's query
// heads in ceil(HQ / HB) slices, each slice reading the request's rows again). kSplit: rows
// [z * chunk, (z + 1) * chunk) of the top-k (z = blockIdx.z), partial to the workspace; else all rows,
// out and lse.
// kPipeMode 1 (MT = 4 or 1, FP8 rows; MlaDecodeKernel::TensorCorePipelined): rows arrive two tiles ahead
// and tile t + 1 is dequantized during tile t's P . V (its loads, converts and stores issue beside the
// MMAs), into a second K/V tile (MT = 4: aliasing Q's shared memory); 3 barriers per tile instead of 4.
// Same S / softmax / P . V arithmetic in the same order: results are bitwise those of kPipe = false.
// kPipeMode 2 (BF16 rows): three K/V tiles, rows copied two tiles ahead.
template <int MT, bool kSplit, int kPipeMode = 0>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_tc_kernel(MlaDecodeParams p, int chunk) {
  pdl_begin();
  constexpr bool kPipe = kPipeMode != 0, kPipe8 = kPipeMode == 1, kPipe16 = kPipeMode == 2;
  static_assert(!kPipe || MT != 2, "the pipelined kernel holds Q in registers (MT = 4 or 1)");
  constexpr int HB = 16 * MT;                  // heads per CTA (padded)
  // S-phase warp roles: MT = 4: warp (m-tile w % 4, k-half w / 4), its Q fragments held in registers
  // for the whole kernel (K read 4x from smem instead of 8x), 4 n8 tiles (all 32 rows); MT = 2: warp
  // (m-tile w % 2, rows 8 (w / 2)), Q fragments from smem; MT = 1: (rows 8 (w % 4), k-half w / 4),
  // Q fragments in registers.
  constexpr bool kQReg = MT != 2;
  constexpr int KP = MT == 2 ? 1 : 2;          // S: k-parts (partial sums added in the softmax)
  constexpr int NT = MT == 4 ? 4 : 1;          // S: n8 tiles per warp
  constexpr int kQSteps = kQReg ? kMaxW / 32 : 1;  // register Q: k-steps per k-half (<= 18)
  extern __shared__ __align__(16) uint8_t smem[];
  const LatentLayout& lay = p.layout;
  const bool fp8 = lay.fp8;
  const int L = lay.latent_dim, W = L + lay.rope_dim;
  const Smem sm(MT, fp8, lay.row_bytes, kPipe);
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem + sm.q);
  uint16_t* kv_base = reinterpret_cast<uint16_t*>(smem + sm.kv);
  uint8_t* stage = smem + sm.stage;
  float* s_s = reinterpret_cast<float*>(smem + sm.s);
  uint16_t* p_s = reinterpret_cast<uint16_t*>(smem + sm.p);
  float* m_s = reinterpret_cast<float*>(smem + sm.m);
  float* l_s = reinterpret_cast<float*>(smem + sm.l);
  float* a_s = reinterpret_cast<float*>(smem + sm.a);
  int* idx_s = reinterpret_cast<int*>(smem + sm.idx);

  const int b = blockIdx.y, h0 = blockIdx.x * HB, HQ = p.H * p.s_q;  // query heads t * H + h
  const int j_begin = kSplit ? blockIdx.z * chunk : 0;
  const int j_end = kSplit ? min(p.topk, j_begin + chunk) : p.topk;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ntiles = j_end > j_begin ? (j_end - j_begin + kTileRows - 1) / kTileRows : 0;
  const int kv_tile_elems = kTileRows * kStride;

  // Indices: idx_s[t % kRing] holds tile t's (tiles 0..kAhead up front); the next tile's travel in a
  // register one tile ahead.
  // kAhead: tiles in flight beyond the one being computed (plain 1, pipelined BF16 2, FP8 3).
  constexpr int kAhead = kPipe8 ? 3 : (kPipe16 ? 2 : 1), kRing = kAhead + 2, kStages = kAhead + 1;
  int idx_next = -1;
  if (tid < kTileRows) {
    for (int k = 0; k < kRing - 1; ++k) idx_s[k * kTileRows + tid] = tile_index(p, b, j_begin + k * kTileRows, j_end, tid);
    idx_next = tile_index(p, b, j_begin + (kRing - 1) * kTileRows, j_end, tid);
  }
  __syncthreads();
  // Prologue: tile 0 (pipelined: and tile 1) in flight while Q is converted.
  if (ntiles > 0) issue_tile(p, idx_s, fp8 ? stage : reinterpret_cast<uint8_t*>(kv_base), tid);
  cp_async_commit();
  if constexpr (kPipe8) {
    for (int k = 1; k < kAhead; ++k) {
      if (k < ntiles) issue_tile(p, idx_s + k * kTileRows, stage + k * kTileRows * lay.row_bytes, tid);
      cp_async_commit();
    }
  }
  load_q<HB>(p, b, h0, HQ, q_s, tid);
  if (tid < HB) {
    m_s[tid] = -INFINITY;  // base-2 units (scores times log2 e)
    l_s[tid] = 0.f;
  }
  __syncthreads();  // q_s complete

  float acc[MT][8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[mt][nt][k] = 0.f;

  // S-phase warp roles.
  const int s_mt = MT == 4 ? (warp & 3) : (MT == 2 ? (warp & 1) : 0);
  const int s_n0 = MT == 4 ? 0 : (MT == 2 ? (warp >> 1) * 8 : (warp & 3) * 8);
  const int s_kp = MT == 2 ? 0 : (warp >> 2);
  const int ksteps = W / 16;
  const int ks_begin = KP == 2 ? (s_kp == 0 ? 0 : (ksteps + 1) / 2) : 0;
  const int ks_end = KP == 2 ? (s_kp == 0 ? (ksteps + 1) / 2 : ksteps) : ksteps;
  const float sl2 = p.scale * kLog2e;
  const uint32_t q_addr = smem_u32(q_s + (s_mt * 16 + (lane & 15)) * kStride + (lane >> 4) * 8);
  const int b_row = NT >= 2 ? (lane & 7) + ((lane >> 4) << 3) : (lane & 7);
  const int b_col = ((lane >> 3) & 1) * 8;
  uint32_t qf[kQSteps][4];
#pragma unroll
  for (int kq = 0; kq < kQSteps; ++kq) {
    qf[kq][0] = qf[kq][1] = qf[kq][2] = qf[kq][3] = 0u;
    if (kQReg && ks_begin + kq < ks_end) ldsm_x4(q_addr + (ks_begin + kq) * 32, qf[kq][0], qf[kq][1], qf[kq][2], qf[kq][3]);
  }
  // Pipelined FP8: K/V tile i % 2 at kv_base (i even) or kv_alt (over q_s for MT = 4); tile 0
  // dequantized here. Pipelined BF16: K/V tile i % 3 at kv_base, kv_alt, kv_alt2.
  uint16_t* const kv_alt = kPipe ? (MT == 4 ? q_s : kv_base + kv_tile_elems) : kv_base;
  uint16_t* const kv_alt2 = kv_alt + kv_tile_elems;
  if constexpr (kPipe8) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead - 1) : "memory");  // tile 0 (1, 2 may fly)
    __syncthreads();  // tile 0 visible; every warp holds its Q fragments (q_s becomes a K/V tile)
    dequant_tile(lay, stage, kv_base, tid);
  }
  if constexpr (kPipe16) {
    __syncthreads();  // every warp holds its Q fragments (q_s becomes K/V tiles 1 and 2)
    if (ntiles > 1) issue_tile(p, idx_s + kTileRows, reinterpret_cast<uint8_t*>(kv_alt), tid);
    cp_async_commit();
  }

  for (int t = 0; t < ntiles; ++t) {
    const int j0 = j_begin + t * kTileRows;
    if constexpr (!kPipe) cp_async_wait_all();
    if constexpr (kPipe16) asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // tile t (t + 1 may fly)
    __syncthreads();  // tile t landed for all threads (pipelined: dequantized); the previous tile is consumed
    const uint16_t* kv_s = kv_base;
    const int* tidx = idx_s + (t % kRing) * kTileRows;
    if constexpr (kPipe) {
      if (t + kAhead < ntiles) {
        uint8_t* dst = kPipe8 ? stage + ((t + kAhead) % kStages) * kTileRows * lay.row_bytes
                              : reinterpret_cast<uint8_t*>((t + 2) % 3 == 0 ? kv_base : (t + 2) % 3 == 1 ? kv_alt : kv_alt2);
        issue_tile(p, idx_s + ((t + kAhead) % kRing) * kTileRows, dst, tid);
      }
      cp_async_commit();
      if (tid < kTileRows) {  // tile t + kAhead + 1's indices to smem (slot last read by tile t - 1)
        idx_s[((t + kAhead + 1) % kRing) * kTileRows + tid] = idx_next;
        idx_next = tile_index(p, b, j0 + (kAhead + 2) * kTileRows, j_end, tid);
      }
      if constexpr (kPipe8) kv_s = (t & 1) ? kv_alt : kv_base;
      else kv_s = t % 3 == 0 ? kv_base : t % 3 == 1 ? kv_alt : kv_alt2;
    } else {
      if (t + 1 < ntiles) {
        uint8_t* dst = fp8 ? stage + ((t + 1) & 1) * kTileRows * lay.row_bytes
                           : reinterpret_cast<uint8_t*>(kv_base + ((t + 1) & 1) * kv_tile_elems);
        issue_tile(p, idx_s + ((t + 1) % 3) * kTileRows, dst, tid);
      }
      cp_async_commit();
      if (tid < kTileRows) {  // tile t + 2's indices to smem (last read by tile t - 1), tile t + 3's loaded
        idx_s[((t + 2) % 3) * kTileRows + tid] = idx_next;
        idx_next = tile_index(p, b, j0 + 3 * kTileRows, j_end, tid);
      }
      if (fp8) {
        dequant_tile(lay, stage + (t & 1) * kTileRows * lay.row_bytes, kv_base, tid);
        __syncthreads();
      } else {
        kv_s = kv_base + (t & 1) * kv_tile_elems;
      }
    }

    // ---- S = Q . K^T: warp tile 16 heads x (8 NT) rows over k-steps [ks_begin, ks_end) ----
    {
      float s_acc[NT][4];
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int k = 0; k < 4; ++k) s_acc[n][k] = 0.f;
      const uint32_t k_addr = smem_u32(kv_s + (s_n0 + b_row) * kStride + b_col);
      if constexpr (kQReg) {
#pragma unroll
        for (int kq = 0; kq < kQSteps; ++kq) {
          if (ks_begin + kq < ks_end) {
            const uint32_t ka = k_addr + (ks_begin + kq) * 32;
            if constexpr (NT == 4) {
              uint32_t b0, b1, b2, b3, b4, b5, b6, b7;
              ldsm_x4(ka, b0, b1, b2, b3);                    // rows 0-15
              ldsm_x4(ka + 16 * kStride * 2, b4, b5, b6, b7);  // rows 16-31
              mma_16816_bf16(s_acc[0], qf[kq][0], qf[kq][1], qf[kq][2], qf[kq][3], b0, b1);
              mma_16816_bf16(s_acc[1], qf[kq][0], qf[kq][1], qf[kq][2], qf[kq][3], b2, b3);
              mma_16816_bf16(s_acc[2], qf[kq][0], qf[kq][1], qf[kq][2], qf[kq][3], b4, b5);
              mma_16816_bf16(s_acc[3], qf[kq][0], qf[kq][1], qf[kq][2], qf[kq][3], b6, b7);
            } else {
              uint32_t b0, b1;
              ldsm_x2(ka, b0, b1);
              mma_16816_bf16(s_acc[0], qf[kq][0], qf[kq][1], qf[kq][2], qf[kq][3], b0, b1);
            }
          }
        }
      } else {
#pragma unroll 4
      for (int ks = ks_begin; ks < ks_end; ++ks) {
        uint32_t a0, a1, a2, a3;
        ldsm_x4(q_addr + ks * 32, a0, a1, a2, a3);
        if constexpr (NT == 2) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4(k_addr + ks * 32, b0, b1, b2, b3);
          mma_16816_bf16(s_acc[0], a0, a1, a2, a3, b0, b1);
          mma_16816_bf16(s_acc[1], a0, a1, a2, a3, b2, b3);
        } else {
          uint32_t b0, b1;
          ldsm_x2(k_addr + ks * 32, b0, b1);
          mma_16816_bf16(s_acc[0], a0, a1, a2, a3, b0, b1);
        }
      }
      }
      float* sp = s_s + s_kp * HB * kSStride;
      const int r = s_mt * 16 + (lane >> 2);
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const int col = s_n0 + n * 8 + 2 * (lane & 3);
        *reinterpret_cast<float2*>(sp + r * kSStride + col) = make_float2(s_acc[n][0], s_acc[n][1]);
        *reinterpret_cast<float2*>(sp + (r + 8) * kSStride + col) = make_float2(s_acc[n][2], s_acc[n][3]);
      }
    }
    __syncthreads();

    // ---- online softmax: TPH consecutive threads per head, RPT rows each ----
    {
      constexpr int TPH = kThreads / HB, RPT = kTileRows / TPH;
      const int hh = tid / TPH, r0 = (tid % TPH) * RPT;
      float sv[RPT];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < RPT; ++i) {
        float v = s_s[hh * kSStride + r0 + i];
        if constexpr (KP == 2) v += s_s[HB * kSStride + hh * kSStride + r0 + i];
        sv[i] = tidx[r0 + i] >= 0 ? v * sl2 : -INFINITY;
        mx = fmaxf(mx, sv[i]);
      }
#pragma unroll
      for (int o = TPH / 2; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = m_s[hh];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < RPT; i += 2) {
        const float p0 = sv[i] == -INFINITY ? 0.f : exp2f(sv[i] - m_new);
        const float p1 = sv[i + 1] == -INFINITY ? 0.f : exp2f(sv[i + 1] - m_new);
        sum += p0 + p1;
        const __nv_bfloat162 pb = __floats2bfloat162_rn(p0, p1);  // .x = p0 (low half)
        *reinterpret_cast<__nv_bfloat162*>(p_s + hh * kPStride + r0 + i) = pb;
      }
#pragma unroll
      for (int o = TPH / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      // Pipelined FP8: tile t + 1's rows (issued two and a half tiles ago) must have landed before
      // P . V dequantizes them; tiles t + 2 and t + 3 may still be in flight. The barrier publishes them.
      if constexpr (kPipe8) asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead - 1) : "memory");
      const float alpha = m_old == -INFINITY ? 0.f : exp2f(m_old - m_new);
      __syncwarp();  // every lane of the head read m_s[hh] before it is overwritten
      if (tid % TPH == 0) {
        m_s[hh] = m_new;
        l_s[hh] = l_s[hh] * alpha + sum;
        a_s[hh] = alpha;
      }
    }
    __syncthreads();

    // ---- O = alpha * O + P . V: warp owns latent dims [64 warp, +64) of all HB heads ----
    {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const float al0 = a_s[mt * 16 + (lane >> 2)], al1 = a_s[mt * 16 + 8 + (lane >> 2)];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          acc[mt][nt][0] *= al0;
          acc[mt][nt][1] *= al0;
          acc[mt][nt][2] *= al1;
          acc[mt][nt][3] *= al1;
        }
      }
      const uint32_t p_addr = smem_u32(p_s + (lane & 15) * kPStride + (lane >> 4) * 8);
      const uint32_t v_addr = smem_u32(kv_s + (lane & 15) * kStride + warp * 64 + (lane >> 4) * 8);
#pragma unroll
      for (int kk = 0; kk < kTileRows; kk += 16) {
        uint32_t bv[8][2];
#pragma unroll
        for (int np = 0; np < 4; ++np)
          ldsm_x4_t(v_addr + (kk * kStride + np * 16) * 2, bv[2 * np][0], bv[2 * np][1], bv[2 * np + 1][0],
                    bv[2 * np + 1][1]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          uint32_t a0, a1, a2, a3;
          ldsm_x4(p_addr + (mt * 16 * kPStride + kk) * 2, a0, a1, a2, a3);
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) mma_16816_bf16(acc[mt][nt], a0, a1, a2, a3, bv[nt][0], bv[nt][1]);
        }
        if constexpr (kPipe8) {  // tile t + 1; past the last tile nothing is left to convert (uniform branch)
          if (t + 1 >= ntiles) continue;
          const uint8_t* st = stage + ((t + 1) % kStages) * kTileRows * lay.row_bytes;
          uint16_t* dst = (t & 1) ? kv_base : kv_alt;
          dequant_codes_job(lay, st, dst, tid + (kk / 16) * 2 * kThreads);
          dequant_codes_job(lay, st, dst, tid + ((kk / 16) * 2 + 1) * kThreads);
        }
      }
      if (kPipe8 && t + 1 < ntiles)
        dequant_rope(lay, stage + ((t + 1) % kStages) * kTileRows * lay.row_bytes, (t & 1) ? kv_base : kv_alt, tid);
    }
  }
  cp_async_wait_all();
  __syncthreads();  // m_s, l_s final (also when ntiles == 0)

  // ---- epilogue ----
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int hh = mt * 16 + half * 8 + (lane >> 2), h = h0 + hh;
      if (h >= HQ) continue;
      const float l = l_s[hh];
      const float inv = kSplit ? 1.f : (l > 0.f ? 1.f / l : 0.f);
      float* o;
      if constexpr (kSplit) {
        o = p.workspace + ((int64_t(b) * HQ + h) * gridDim.z + blockIdx.z) * L;
      } else {
        o = p.out + (int64_t(b) * HQ + h) * L;
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int d = warp * 64 + nt * 8 + 2 * (lane & 3);
        *reinterpret_cast<float2*>(o + d) =
            make_float2(acc[mt][nt][2 * half] * inv, acc[mt][nt][2 * half + 1] * inv);
      }
    }
  }
  if (tid < HB && h0 + tid < HQ) {
    const int h = h0 + tid;
    const float m2 = m_s[tid], l = l_s[tid];
    if constexpr (kSplit) {
      const int S = gridDim.z;
      const int64_t n_part = int64_t(p.B) * HQ * S, i = (int64_t(b) * HQ + h) * S + blockIdx.z;
      p.workspace[n_part * L + i] = m2 == -INFINITY ? -INFINITY : m2 * kLn2;
      p.workspace[n_part * (L + 1) + i] = l;
    } else if (p.lse) {
      p.lse[int64_t(b) * HQ + h] = l > 0.f ? (m2 + log2f(l)) * kLn2 : -INFINITY;
    }
  }
}

}  // namespace mla_tc
}  // namespace glm5
