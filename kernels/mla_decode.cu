// CUDA kernels of mla_decode.h: sparse MLA decode.
// Fast path (GLM-5 / DeepSeek shapes: L = 512, R % 16 == 0, R <= 64, 16-byte aligned rows): the
// tensor-core kernel of kernels/mla_decode_tc.cuh, one CTA per (request, 64 query heads, chunk), each
// selected row read once per request (pipelined for FP8 rows). Every other shape (e.g. glm5-tiny's L = 64, or rows that are not 16-byte
// multiples) falls back to the fp32 FMA kernel below:
// One block per (request, group of 16 heads, chunk of the top-k rows); the chunk's rows are streamed
// in tiles of 32:
//   1. the block loads the tile into shared memory as BF16 (FP8 rows dequantized exactly as kv_cast
//      does: round_bf16(e4m3 * scale), so all three KV paths see identical K/V values);
//   2. scores for 16 heads x 32 rows (each thread: 1 head x 2 rows, 576-long fp32 dot products);
//   3. online softmax per head (a warp per 2 heads, a lane per row: running max m, sum l);
//   4. out += p . V: each thread owns 2 latent columns x 16 heads of fp32 accumulators.
// Without a workspace there is one chunk (all top-k rows) and the block writes out and lse. With a
// workspace (split-K, "flash-decoding") each block writes its unnormalized partial (acc[L], m, l)
// and mla_decode_combine_kernel merges the S partials of each (b, h):
//   M = max_s m_s,  w_s = exp(m_s - M),  out = sum_s w_s acc_s / sum_s w_s l_s,  lse = M + log(sum_s w_s l_s).
// Bytes: B * topk * row_bytes (x ceil(H/16) re-reads, mostly from L2) + q and out (+ 2 x the
// workspace when split); FLOPs: 2 * B * H * topk * (2L + R).
#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "kernels/kv_cast.cuh"
#include "kernels/mla_decode.h"
#include "kernels/mla_decode_tc.cuh"
#include "kernels/sm90a/mla_decode_wgmma.h"
#include "kernels/launch.cuh"

namespace glm5 {
namespace {

constexpr int kHeads = 16;     // heads per block
constexpr int kRows = 32;      // selected rows per tile (one per lane in the softmax step)
constexpr int kThreads = 256;  // 16 heads x 16 row pairs; 256 x 2 latent columns = 512
constexpr int kMaxLatent = 2 * kThreads;
constexpr int kMaxRope = 128;

// Shared-memory row stride of the K/V tile in bf16 elements: an odd number of 32-bit words, so the
// 16 rows read together in the score loop fall in distinct banks.
__host__ __device__ int kv_tile_stride(int W) { return (W / 2) % 2 == 1 ? W : W + 2; }

size_t smem_bytes(int W) {
  return sizeof(float) * kHeads * W + sizeof(uint16_t) * kRows * kv_tile_stride(W) + sizeof(float) * kRows * kHeads +
         sizeof(float) * 3 * kHeads + sizeof(int) * kRows;
}

__device__ __forceinline__ float2 bf16x2_to_float2(uint32_t v) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}

// The block copies the kRows rows idx_s[0..kRows) of the KV buffer into kv_s (row stride KS) as
// L + R bf16 values each (index < 0: zeros). Flat over (row, 32-bit word) so that each thread has
// kBatch independent global loads in flight before it stores (the rows are random, latency-bound).
constexpr int kBatch = 4;
__device__ void load_tile(const MlaDecodeParams& p, const int* idx_s, uint16_t* kv_s, int KS, int tid) {
  const LatentLayout& l = p.layout;
  const int L = l.latent_dim, R = l.rope_dim;
  if (l.fp8) {  // per row: L/4 words of 4 e4m3 codes (-> 2 bf16 words each), then R/2 rope words
    const int per_row = L / 4 + R / 2, n = kRows * per_row;
    for (int i0 = tid; i0 < n; i0 += kBatch * kThreads) {
      uint32_t v[kBatch];
      float sc[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = i0 + k * kThreads;
        v[k] = 0u;
        sc[k] = 0.f;
        if (i < n) {
          const int r = i / per_row, w = i - r * per_row, t = idx_s[r];
          if (t >= 0) {
            const uint8_t* row = p.kv + int64_t(t) * l.row_bytes;
            if (w < L / 4) {
              v[k] = __ldg(reinterpret_cast<const uint32_t*>(row) + w);
              sc[k] = __ldg(reinterpret_cast<const float*>(row + L) + (4 * w) / l.group);
            } else {
              v[k] = __ldg(reinterpret_cast<const uint32_t*>(row + l.rope_offset()) + (w - L / 4));
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = i0 + k * kThreads;
        if (i < n) {
          const int r = i / per_row, w = i - r * per_row;
          uint32_t* d32 = reinterpret_cast<uint32_t*>(kv_s + r * KS);
          if (w < L / 4) {
            const uint2 o = idx_s[r] >= 0 ? dequant4_bf16(v[k], sc[k]) : make_uint2(0u, 0u);
            d32[2 * w] = o.x;
            d32[2 * w + 1] = o.y;
          } else {
            d32[L / 2 + (w - L / 4)] = v[k];
          }
        }
      }
    }
  } else {  // bf16 rows: (L + R) / 2 words copied as they are
    const int per_row = (L + R) / 2, n = kRows * per_row;
    for (int i0 = tid; i0 < n; i0 += kBatch * kThreads) {
      uint32_t v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = i0 + k * kThreads;
        v[k] = 0u;
        if (i < n) {
          const int r = i / per_row, w = i - r * per_row, t = idx_s[r];
          if (t >= 0) v[k] = __ldg(reinterpret_cast<const uint32_t*>(p.kv + int64_t(t) * l.row_bytes) + w);
        }
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = i0 + k * kThreads;
        if (i < n) {
          const int r = i / per_row, w = i - r * per_row;
          reinterpret_cast<uint32_t*>(kv_s + r * KS)[w] = v[k];
        }
      }
    }
  }
}

// kSplit = false: rows [0, topk), writes p.out / p.lse. kSplit = true: rows [z * chunk, (z+1) * chunk)
// of the top-k (z = blockIdx.z, S = gridDim.z), writes the partial to p.workspace as
//   acc [B][H][S][L] (unnormalized), then m [B][H][S], then l [B][H][S].
template <bool kSplit>
__global__ void __launch_bounds__(kThreads) mla_decode_kernel(MlaDecodeParams p, int chunk) {
  pdl_begin();
  extern __shared__ float4 smem4[];
  const int L = p.layout.latent_dim, R = p.layout.rope_dim, W = L + R, KS = kv_tile_stride(W);
  float* q_s = reinterpret_cast<float*>(smem4);                      // [kHeads][W]
  uint16_t* kv_s = reinterpret_cast<uint16_t*>(q_s + kHeads * W);    // [kRows][KS] bf16
  float* s_s = reinterpret_cast<float*>(kv_s + kRows * KS);          // [kRows][kHeads] scores, then p
  float* m_s = s_s + kRows * kHeads;                                 // [kHeads] running max
  float* l_s = m_s + kHeads;                                         // [kHeads] running sum
  float* a_s = l_s + kHeads;                                         // [kHeads] this tile's rescale
  int* idx_s = reinterpret_cast<int*>(a_s + kHeads);                 // [kRows]

  const int b = blockIdx.y, h0 = blockIdx.x * kHeads, HQ = p.H * p.s_q;  // h: query head t * H + h
  const int j_begin = kSplit ? blockIdx.z * chunk : 0;
  const int j_end = kSplit ? min(p.topk, j_begin + chunk) : p.topk;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  for (int i = tid; i < kHeads * W; i += kThreads) {
    const int hh = i / W, d = i % W, h = h0 + hh;
    float v = 0.f;
    if (h < HQ) v = d < L ? p.q_latent[(int64_t(b) * HQ + h) * L + d] : mla_tc::q_rope_row(p, b, h)[d - L];
    q_s[i] = v;
  }
  if (tid < kHeads) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
  }
  float2 acc[kHeads];
#pragma unroll
  for (int hh = 0; hh < kHeads; ++hh) acc[hh] = make_float2(0.f, 0.f);
  const int col = 2 * tid;  // this thread's latent columns: col, col + 1

  for (int j0 = j_begin; j0 < j_end; j0 += kRows) {
    __syncthreads();  // the previous tile is consumed; q_s, m_s, l_s initialized
    if (tid < kRows) idx_s[tid] = j0 + tid < j_end ? p.indices[int64_t(b) * p.topk + j0 + tid] : -1;
    __syncthreads();
    load_tile(p, idx_s, kv_s, KS, tid);
    __syncthreads();

    {  // scores: head hh, rows r0 and r0 + 16
      const int hh = tid / 16, r0 = tid % 16;
      const float2* q = reinterpret_cast<const float2*>(q_s + hh * W);
      const uint32_t* k0 = reinterpret_cast<const uint32_t*>(kv_s + r0 * KS);
      const uint32_t* k1 = reinterpret_cast<const uint32_t*>(kv_s + (r0 + 16) * KS);
      float d0 = 0.f, d1 = 0.f;
      for (int d = 0; d < W / 2; ++d) {
        const float2 qq = q[d], a = bf16x2_to_float2(k0[d]), c = bf16x2_to_float2(k1[d]);
        d0 = fmaf(qq.x, a.x, d0);
        d0 = fmaf(qq.y, a.y, d0);
        d1 = fmaf(qq.x, c.x, d1);
        d1 = fmaf(qq.y, c.y, d1);
      }
      s_s[r0 * kHeads + hh] = idx_s[r0] >= 0 ? p.scale * d0 : -INFINITY;
      s_s[(r0 + 16) * kHeads + hh] = idx_s[r0 + 16] >= 0 ? p.scale * d1 : -INFINITY;
    }
    __syncthreads();

    for (int hh = 2 * warp; hh < 2 * warp + 2; ++hh) {  // online softmax, lane = row
      const float s = s_s[lane * kHeads + hh];
      const float m_old = m_s[hh];
      const float m_new = fmaxf(m_old, warp_max(s));
      const float pr = m_new == -INFINITY ? 0.f : expf(s - m_new);
      const float alpha = m_old == -INFINITY ? 0.f : expf(m_old - m_new);
      const float sum = warp_sum(pr);
      s_s[lane * kHeads + hh] = pr;
      __syncwarp();
      if (lane == 0) {
        m_s[hh] = m_new;
        l_s[hh] = l_s[hh] * alpha + sum;
        a_s[hh] = alpha;
      }
    }
    __syncthreads();

    if (col < L) {  // out += p . V over this tile's rows
#pragma unroll
      for (int hh = 0; hh < kHeads; ++hh) {
        const float alpha = a_s[hh];
        acc[hh].x *= alpha;
        acc[hh].y *= alpha;
      }
      for (int r = 0; r < kRows; ++r) {
        const float2 v = bf16x2_to_float2(*reinterpret_cast<const uint32_t*>(kv_s + r * KS + col));
        const float4* pr4 = reinterpret_cast<const float4*>(s_s + r * kHeads);
        float pr[kHeads];
#pragma unroll
        for (int k = 0; k < kHeads / 4; ++k) {
          const float4 f = pr4[k];
          pr[4 * k] = f.x;
          pr[4 * k + 1] = f.y;
          pr[4 * k + 2] = f.z;
          pr[4 * k + 3] = f.w;
        }
#pragma unroll
        for (int hh = 0; hh < kHeads; ++hh) {
          acc[hh].x = fmaf(pr[hh], v.x, acc[hh].x);
          acc[hh].y = fmaf(pr[hh], v.y, acc[hh].y);
        }
      }
    }
  }
  __syncthreads();

  if constexpr (kSplit) {
    const int S = gridDim.z, z = blockIdx.z;
    const int64_t n_part = int64_t(p.B) * HQ * S;
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      const int h = h0 + hh;
      if (h < HQ && col < L) {
        float* o = p.workspace + ((int64_t(b) * HQ + h) * S + z) * L + col;
        *reinterpret_cast<float2*>(o) = acc[hh];
      }
    }
    if (tid < kHeads && h0 + tid < HQ) {
      const int64_t i = (int64_t(b) * HQ + h0 + tid) * S + z;
      p.workspace[n_part * L + i] = m_s[tid];
      p.workspace[n_part * (L + 1) + i] = l_s[tid];
    }
  } else {
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      const int h = h0 + hh;
      if (h < HQ && col < L) {
        const float l = l_s[hh], inv = l > 0.f ? 1.f / l : 0.f;
        float* o = p.out + (int64_t(b) * HQ + h) * L + col;
        o[0] = acc[hh].x * inv;
        o[1] = acc[hh].y * inv;
      }
    }
    if (p.lse && tid < kHeads && h0 + tid < HQ) {
      const float l = l_s[tid];
      p.lse[int64_t(b) * HQ + h0 + tid] = l > 0.f ? m_s[tid] + logf(l) : -INFINITY;
    }
  }
}

constexpr int kCombineThreads = 512, kCombineGroups = 4, kCombineLanes = kCombineThreads / kCombineGroups;
// MlaDecodeParams::l2_prefetch, run by the combine before its PDL wait (the combine is admitted when the split-K CTAs
// start): CTA (h, 0) with h < H asks L2 for head h's region, as 16 KiB prefetch requests, one per thread, or
// (l2_prefetch_loads) as plain loads. Weights of the next kernel, which nothing in the step writes. Each form is its
// own instance of the combine (launch_combine), so the combine without a rider keeps its 40 registers (it fits beside
// the batch-1 MLA's blocks while it waits): one instance holding both forms took 54 (S21b's and later builds).
constexpr int64_t kCombinePrefetchChunk = 16384;
template <bool kLoads>
__device__ __forceinline__ void combine_l2_rider(const MlaDecodeParams& p) {
  if (blockIdx.y != 0 || int(blockIdx.x) >= p.H) return;
  const char* base = static_cast<const char*>(p.l2_prefetch) + int64_t(blockIdx.x) * p.l2_prefetch_head_stride;
  if constexpr (!kLoads) {
    for (int64_t off = int64_t(threadIdx.x) * kCombinePrefetchChunk; off < p.l2_prefetch_head_bytes;
         off += int64_t(kCombineThreads) * kCombinePrefetchChunk)
      prefetch_l2(base + off, unsigned(min(p.l2_prefetch_head_bytes - off, kCombinePrefetchChunk)));
  } else {
    // Plain 16-byte loads (L1 not allocated), 16 in flight per thread, their XOR kept alive through a shared word.
    const uint4* base4 = reinterpret_cast<const uint4*>(base);
    const int64_t n16 = p.l2_prefetch_head_bytes / 16;
    __shared__ uint32_t touch_s;
    uint32_t x = 0;
    for (int64_t i0 = threadIdx.x; i0 < n16; i0 += 16 * kCombineThreads) {
      uint4 v[16];
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const int64_t i = i0 + int64_t(k) * kCombineThreads;
        v[k] = make_uint4(0, 0, 0, 0);
        if (i < n16)
          asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"  // not volatile: batched, 16 in flight
              : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w)
              : "l"(base4 + i));
      }
#pragma unroll
      for (int k = 0; k < 16; ++k) x ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    }
    if (x == 0x9e3779b9u) *static_cast<volatile uint32_t*>(&touch_s) = x;  // keeps the loads; never read
  }
}

// Merges the S partials of (b, h) = (blockIdx.y, blockIdx.x) (layout of mla_decode_kernel<true>)
// with the log-sum-exp rule; S floats of dynamic shared memory hold the weights w_s = exp(m_s - M).
// 512 threads: 4 groups of 128, group g sums its quarter of the S partials for float4 d (16 loads in
// flight per thread), the groups' sums are added in fixed order (deterministic). At B = 1 (S = 64) a
// 128-thread loop over the partials cost tens of microseconds of round trips. (Session 22 tried issuing 4 partials per
// thread before warp 0's split weights, held to 40 registers by launch bounds: in the batch-1 step the combine then
// ended 4.8 us after the split-K kernel instead of 3.2 (S22b against S22a, median over the layers), so not kept.)
// kRider: 0 none, 1 prefetch requests, 2 loads (MlaDecodeParams::l2_prefetch / l2_prefetch_loads).
template <int kRider>
__global__ void __launch_bounds__(kCombineThreads) mla_decode_combine_kernel(MlaDecodeParams p, int S) {
  if constexpr (kRider > 0) combine_l2_rider<kRider == 2>(p);
  pdl_begin();
  extern __shared__ float w_s[];
  __shared__ float stat_s[2];  // M, 1 / sum_s w_s l_s
  __shared__ float4 part_s[kCombineGroups - 1][kCombineLanes];
  const int L = p.layout.latent_dim, h = blockIdx.x, b = blockIdx.y, tid = threadIdx.x, HQ = p.H * p.s_q;
  const int64_t n_part = int64_t(p.B) * HQ * S, bh = int64_t(b) * HQ + h;
  const float* m_p = p.workspace + n_part * L + bh * S;
  const float* l_p = p.workspace + n_part * (L + 1) + bh * S;
  if (tid < 32) {
    float m = -INFINITY;
    for (int s = tid; s < S; s += 32) m = fmaxf(m, m_p[s]);
    m = warp_max(m);
    float sum = 0.f;
    for (int s = tid; s < S; s += 32) {
      const float w = m == -INFINITY || m_p[s] == -INFINITY ? 0.f : expf(m_p[s] - m);
      w_s[s] = w;
      sum += w * l_p[s];
    }
    sum = warp_sum(sum);
    if (tid == 0) {
      stat_s[0] = m;
      stat_s[1] = sum > 0.f ? 1.f / sum : 0.f;
      if (p.lse) p.lse[bh] = sum > 0.f ? m + logf(sum) : -INFINITY;
    }
  }
  __syncthreads();
  const float inv = stat_s[1];
  const float4* acc = reinterpret_cast<const float4*>(p.workspace + bh * S * L);
  float4* o = reinterpret_cast<float4*>(p.out + bh * L);
  const int L4 = L / 4, g = tid / kCombineLanes, d = tid % kCombineLanes;  // L4 <= 128 (L <= 512)
  const int per = (S + kCombineGroups - 1) / kCombineGroups, s0 = min(S, g * per), s1 = min(S, s0 + per);
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (d < L4) {
    int s = s0;
    for (; s + 16 <= s1; s += 16) {
      float4 a[16];
#pragma unroll
      for (int k = 0; k < 16; ++k) a[k] = __ldg(acc + int64_t(s + k) * L4 + d);
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const float w = w_s[s + k];
        v.x = fmaf(w, a[k].x, v.x);
        v.y = fmaf(w, a[k].y, v.y);
        v.z = fmaf(w, a[k].z, v.z);
        v.w = fmaf(w, a[k].w, v.w);
      }
    }
    for (; s < s1; ++s) {
      const float4 a = __ldg(acc + int64_t(s) * L4 + d);
      const float w = w_s[s];
      v.x = fmaf(w, a.x, v.x);
      v.y = fmaf(w, a.y, v.y);
      v.z = fmaf(w, a.z, v.z);
      v.w = fmaf(w, a.w, v.w);
    }
    if (g > 0) part_s[g - 1][d] = v;
  }
  __syncthreads();
  if (g == 0 && d < L4) {
#pragma unroll
    for (int k = 0; k < kCombineGroups - 1; ++k) {
      const float4 q = part_s[k][d];
      v.x += q.x;
      v.y += q.y;
      v.z += q.z;
      v.w += q.w;
    }
    o[d] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  }
}

}  // namespace

namespace {

// Whether the tensor-core kernel handles p's shapes (see mla_decode_tc.cuh).
bool tc_supported(const MlaDecodeParams& p) {
  const LatentLayout& l = p.layout;
  return l.latent_dim == mla_tc::kL && l.rope_dim % 16 == 0 && l.latent_dim + l.rope_dim <= mla_tc::kMaxW &&
         l.row_bytes % 16 == 0 && (reinterpret_cast<uintptr_t>(p.kv) & 15u) == 0;
}

template <int MT, bool kSplit, int kPipeMode = 0>
void launch_tc(const MlaDecodeParams& p, int S, int chunk, cudaStream_t stream) {
  const mla_tc::Smem sm(MT, p.layout.fp8, p.layout.row_bytes, kPipeMode != 0);
  auto kernel = mla_tc::mla_decode_tc_kernel<MT, kSplit, kPipeMode>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sm.total));
  constexpr int HB = 16 * MT;  // heads per CTA: the request's query heads in ceil(HQ / HB) slices
  launch_kernel(kernel, dim3((p.H * p.s_q + HB - 1) / HB, p.B, S), mla_tc::kThreads, sm.total, stream, p, chunk);
  CUDA_CHECK_LAUNCH();
}

template <bool kSplit>
void launch_tc_heads(const MlaDecodeParams& p, int S, int chunk, cudaStream_t stream) {
  const int hq = p.H * p.s_q;
  // Auto = TensorCorePipelined for FP8 rows: measured on the H200 (round 1) bitwise equal to
  // TensorCore and faster (B = 128, H = 64: 258 vs 339 us; H = 16: 322 vs 646 us). BF16 rows:
  // pipelined only when asked (round 2 measures it).
  const bool fp8 = p.layout.fp8;
  const bool pipe = p.kernel == MlaDecodeKernel::TensorCorePipelined || (p.kernel == MlaDecodeKernel::Auto && fp8);
  if (mla_decode_heads_per_cta(p) == 16 && hq > 16) {  // 16-head slices: each slice re-reads the rows (L2)
    if (pipe && fp8) launch_tc<1, kSplit, 1>(p, S, chunk, stream);
    else if (pipe) launch_tc<1, kSplit, 2>(p, S, chunk, stream);
    else launch_tc<1, kSplit>(p, S, chunk, stream);
  } else if (pipe && hq > 32) {
    if (fp8) launch_tc<4, kSplit, 1>(p, S, chunk, stream);
    else launch_tc<4, kSplit, 2>(p, S, chunk, stream);
  } else if (pipe && hq <= 16) {
    if (fp8) launch_tc<1, kSplit, 1>(p, S, chunk, stream);
    else launch_tc<1, kSplit, 2>(p, S, chunk, stream);
  }
  else if (hq <= 16) launch_tc<1, kSplit>(p, S, chunk, stream);
  else if (hq <= 32) launch_tc<2, kSplit>(p, S, chunk, stream);
  else launch_tc<4, kSplit>(p, S, chunk, stream);
}

}  // namespace

namespace {
// The split-K path's workspace: large enough for mla_decode_num_splits(B, s_q H, topk) partials, and with out
// 16-byte aligned (the partials and the combine's output are written as float4).
void check_split_workspace(const MlaDecodeParams& p, int HQ, int L) {
  const size_t need = mla_decode_workspace_bytes(p.B, HQ, p.topk, L);
  require(p.workspace_bytes >= need, "mla_decode_cuda: workspace_bytes = " + std::to_string(p.workspace_bytes) +
                                         ", expected >= mla_decode_workspace_bytes(B, s_q * H, topk, L) = " +
                                         std::to_string(need));
  require((reinterpret_cast<uintptr_t>(p.workspace) & 15u) == 0 && (reinterpret_cast<uintptr_t>(p.out) & 15u) == 0,
          "mla_decode_cuda: workspace and out must be 16-byte aligned for the split-K path");
}
// Merges the S split-K partials of every (request, query head) into out and lse (mla_decode_combine_kernel).
void launch_combine(const MlaDecodeParams& p, int HQ, int S, cudaStream_t stream) {
  auto kernel = !p.l2_prefetch      ? mla_decode_combine_kernel<0>
                : p.l2_prefetch_loads ? mla_decode_combine_kernel<2>
                                      : mla_decode_combine_kernel<1>;
  launch_kernel(kernel, dim3(HQ, p.B), kCombineThreads, sizeof(float) * S, stream, p, S);
  CUDA_CHECK_LAUNCH();
}
}  // namespace

bool mla_decode_auto_wgmma(const MlaDecodeParams& p) {
  if (p.kernel != MlaDecodeKernel::Auto || p.heads_per_cta != 0) return false;
  if (int64_t(p.H) * p.s_q < kMlaWgmmaAutoMinHeads) return false;  // 8 heads (TP8) not measured: 56 of 64 rows idle
  const int64_t ctas = int64_t(p.B) * ((int64_t(p.H) * p.s_q + 63) / 64);
  return ctas >= kMlaWgmmaAutoMinCtas && mla_decode_wgmma_supported(p);
}

void mla_decode_cuda(const MlaDecodeParams& p, cudaStream_t stream) {
  validate_mla_decode_params(p);
  const int L = p.layout.latent_dim, R = p.layout.rope_dim;
  if (p.B == 0 || p.H == 0) return;
  const bool tc = p.kernel == MlaDecodeKernel::Auto ? tc_supported(p)
                                                    : p.kernel != MlaDecodeKernel::Fp32 && p.kernel != MlaDecodeKernel::Wgmma &&
                                                          p.kernel != MlaDecodeKernel::WgmmaF16;
  require(!tc || tc_supported(p), "mla_decode_cuda: kernel = TensorCore(Pipelined) needs L = 512, R % 16 == 0, R <= 64 and "
                                  "16-byte aligned kv rows; got L = " + std::to_string(L) + ", R = " +
                                  std::to_string(R) + ", row_bytes = " + std::to_string(p.layout.row_bytes));
  require(tc || (L <= kMaxLatent && R <= kMaxRope),
          "mla_decode_cuda: L = " + std::to_string(L) + ", R = " + std::to_string(R) +
              "; the kernels support L <= " + std::to_string(kMaxLatent) + " and R <= " + std::to_string(kMaxRope));
  require(p.topk == 0 || (reinterpret_cast<uintptr_t>(p.kv) & 3u) == 0,
          "mla_decode_cuda: kv must be 4-byte aligned (rows are read as 32-bit words)");
  const int HQ = p.H * p.s_q;  // query heads per request
  const int S_max = p.workspace ? mla_decode_num_splits(p.B, HQ, p.topk) : 1;  // what the workspace holds
  require(p.heads_per_cta == 0 || p.heads_per_cta == 16 || p.heads_per_cta == 64,
          "mla_decode_cuda: MlaDecodeParams.heads_per_cta = " + std::to_string(p.heads_per_cta) +
              ", expected 0 (auto), 16 or 64");
  require(p.splits >= 0 && p.splits <= std::max(S_max, 1) || !p.workspace,
          "mla_decode_cuda: MlaDecodeParams.splits = " + std::to_string(p.splits) + ", expected 0 (auto) .. " +
              std::to_string(S_max) + " (mla_decode_num_splits(B, s_q * H, topk))");
  // The wgmma kernel sizes its own split-K (64-row tiles) within the workspace's S_max: decided before the
  // mma.sync kernels' sizing, which it does not use. Auto's rule already checked mla_decode_wgmma_supported.
  const bool wgmma_forced = p.kernel == MlaDecodeKernel::Wgmma || p.kernel == MlaDecodeKernel::WgmmaF16;
  if (wgmma_forced || mla_decode_auto_wgmma(p)) {
    const char* name = p.kernel == MlaDecodeKernel::WgmmaF16 ? "WgmmaF16" : "Wgmma";
    if (wgmma_forced) {
      const std::string why = mla_decode_wgmma_unsupported(p);
      if (!why.empty()) throw Error(std::string("mla_decode_cuda: MlaDecodeParams.kernel = ") + name + " needs " + why);
    }
    require(p.kernel != MlaDecodeKernel::WgmmaF16 || p.layout.fp8,
            "mla_decode_cuda: MlaDecodeParams.kernel = WgmmaF16 needs FP8 rows (got BF16 rows)");
    // 64-row tiles: at most ceil(topk / 64) chunks, each a whole number of tiles (p.splits, when set, caps S).
    int chunk_w = p.topk;
    const int S_w = mla_decode_wgmma_splits(p.workspace ? (p.splits > 0 ? p.splits : S_max) : 1, p.topk, &chunk_w);
    require((reinterpret_cast<uintptr_t>(p.out) & 7u) == 0,
            "mla_decode_cuda: MlaDecodeParams.out must be 8-byte aligned for kernel = Wgmma (float2 stores)");
    const bool combine = S_w > 1 && !mla_decode_wgmma_merges_in_cluster(S_w);  // else merged in the kernel
    if (combine) check_split_workspace(p, HQ, L);
    const bool f16 = p.kernel == MlaDecodeKernel::WgmmaF16 ||
                     (p.kernel == MlaDecodeKernel::Auto && p.layout.fp8 && !p.fp8_bf16_operands);
    mla_decode_wgmma_launch(p, S_w, chunk_w, f16, stream);
    if (combine) launch_combine(p, HQ, S_w, stream);
    return;
  }
  const int S_auto = p.workspace ? std::min(S_max, mla_decode_num_splits(p.B, HQ, p.topk, mla_decode_heads_per_cta(p))) : 1;
  const int S = p.workspace && p.splits > 0 ? p.splits : S_auto;
  int chunk = p.topk;
  if (S > 1) {
    check_split_workspace(p, HQ, L);
    const int tiles = (p.topk + kRows - 1) / kRows;
    chunk = (tiles + S - 1) / S * kRows;
  }
  if (tc) {
    if (S <= 1) launch_tc_heads<false>(p, 1, chunk, stream);
    else launch_tc_heads<true>(p, S, chunk, stream);
  } else {  // fp32 fallback (shapes the tensor-core kernel does not handle)
    const size_t smem = smem_bytes(L + R);
    const int groups = (HQ + kHeads - 1) / kHeads;
    auto kernel = S <= 1 ? mla_decode_kernel<false> : mla_decode_kernel<true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    launch_kernel(kernel, dim3(groups, p.B, S), kThreads, smem, stream, p, chunk);
    CUDA_CHECK_LAUNCH();
  }
  if (S > 1) launch_combine(p, HQ, S, stream);
}

}  // namespace glm5
