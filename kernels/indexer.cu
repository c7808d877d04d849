// CUDA kernels of indexer.h.
// indexer_score: one block per (logical page of 64 positions, request). The page's keys are
// dequantized into shared memory as fp32 (a [64][D+1] tile, conflict-free column reads), the
// request's queries and head weights too; thread (token, head quarter) sums w_h * ReLU(scale * q_h.k)
// over a quarter of the heads, the four partial sums are added in a fixed order.
// Bytes: B * seq_len * (D + 4) key bytes + 4 per score; FLOPs: 2 * B * seq_len * Hi * D.
// topk: one block of 1024 threads per request; radix select of the k-th largest order key (4 passes
// of 8-bit digits, histogram in shared memory), then an ordered compaction (ballot prefix counts) that
// keeps keys above the threshold and the lowest-position keys equal to it.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "kernels/indexer.h"
#include "kernels/kv_cast.cuh"

namespace glm5 {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kHeadQuarters = kScoreThreads / kPageSize;  // 4

size_t score_smem_bytes(int Hi, int D) {
  return sizeof(float) * (size_t(Hi) * D + size_t(kPageSize) * (D + 1) + Hi + kHeadQuarters * kPageSize);
}

__global__ void __launch_bounds__(kScoreThreads) indexer_score_kernel(IndexerScoreParams p) {
  extern __shared__ float4 smem4[];
  const int D = p.layout.dim, Hi = p.Hi, b = blockIdx.y, page = blockIdx.x, tid = threadIdx.x;
  float* q_s = reinterpret_cast<float*>(smem4);  // [Hi][D]
  float* k_s = q_s + Hi * D;                     // [64][D + 1]
  float* w_s = k_s + kPageSize * (D + 1);        // [Hi]
  float* part_s = w_s + Hi;                      // [4][64]
  const int64_t positions = int64_t(p.max_pages) * kPageSize;
  float* out = p.scores + b * positions + int64_t(page) * kPageSize;
  const int seq_len = p.seq_lens[b];
  const int first = page * kPageSize;
  const int32_t page_id = p.block_table[int64_t(b) * p.max_pages + page];
  if (first >= seq_len || page_id < 0) {
    if (tid < kPageSize) out[tid] = -INFINITY;
    return;
  }
  for (int i = tid; i < Hi * D; i += kScoreThreads) q_s[i] = p.q[int64_t(b) * Hi * D + i];
  for (int i = tid; i < Hi; i += kScoreThreads) w_s[i] = p.head_weights[int64_t(b) * Hi + i] * p.head_weight_scale;
  if (p.layout.fp8) {
    const uint8_t* base = p.key_cache + int64_t(page_id) * p.layout.page_bytes();
    const uint32_t* codes = reinterpret_cast<const uint32_t*>(base);
    const float* scales = reinterpret_cast<const float*>(base + kPageSize * D);
    for (int w = tid; w < kPageSize * D / 4; w += kScoreThreads) {
      const int t = (4 * w) / D, d = (4 * w) % D;
      const float4 v = dequant4_f32(__ldg(codes + w), __ldg(scales + t));
      float* k = k_s + t * (D + 1) + d;
      k[0] = v.x;
      k[1] = v.y;
      k[2] = v.z;
      k[3] = v.w;
    }
  } else {
    const uint16_t* keys = reinterpret_cast<const uint16_t*>(p.key_cache) + int64_t(page_id) * kPageSize * D;
    for (int i = tid; i < kPageSize * D; i += kScoreThreads)
      k_s[(i / D) * (D + 1) + i % D] = bf16_bits_to_float(__ldg(keys + i));
  }
  __syncthreads();
  const int t = tid % kPageSize, quarter = tid / kPageSize;
  const float* k = k_s + t * (D + 1);
  float partial = 0.f;
  for (int h = quarter; h < Hi; h += kHeadQuarters) {
    const float* q = q_s + h * D;
    float dot = 0.f;
    for (int d = 0; d < D; ++d) dot = fmaf(q[d], k[d], dot);
    partial += w_s[h] * fmaxf(p.softmax_scale * dot, 0.f);
  }
  part_s[quarter * kPageSize + t] = partial;
  __syncthreads();
  if (tid < kPageSize) {
    float s = 0.f;
    for (int qi = 0; qi < kHeadQuarters; ++qi) s += part_s[qi * kPageSize + tid];
    out[tid] = first + tid < seq_len ? s : -INFINITY;
  }
}

constexpr int kTopkThreads = 1024;
constexpr int kTopkWarps = kTopkThreads / 32;

__device__ __forceinline__ int32_t slot_of(const TopkParams& p, int b, int pos) {
  const int32_t page = p.block_table[int64_t(b) * p.max_pages + pos / kPageSize];
  return page < 0 ? -1 : page * kPageSize + pos % kPageSize;
}

// Block-wide exclusive prefix count of `flag` in thread order; returns it, and the block total in *total.
__device__ int block_prefix_count(bool flag, int* warp_counts, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned mask = __ballot_sync(0xffffffffu, flag);
  if (lane == 0) warp_counts[warp] = __popc(mask);
  __syncthreads();
  int before = __popc(mask & ((1u << lane) - 1u)), sum = 0;
  for (int w = 0; w < kTopkWarps; ++w) {
    const int c = warp_counts[w];
    if (w < warp) before += c;
    sum += c;
  }
  *total = sum;
  __syncthreads();  // warp_counts is reused by the next call
  return before;
}

__global__ void __launch_bounds__(kTopkThreads) topk_kernel(TopkParams p, int limit) {
  __shared__ unsigned hist[256];
  __shared__ int warp_counts[kTopkWarps];
  __shared__ unsigned sel_digit, sel_above;
  const int b = blockIdx.x, tid = threadIdx.x;
  const int n = min(max(p.seq_lens[b], 0), limit);
  const float* s = p.scores + int64_t(b) * p.score_stride;
  int32_t* out = p.out_slots + int64_t(b) * p.k;
  if (n <= p.k) {
    for (int i = tid; i < p.k; i += kTopkThreads) out[i] = i < n ? slot_of(p, b, i) : -1;
    return;
  }
  // Radix select: after pass i, `prefix` holds the top 8(i+1) bits of the k-th largest key and
  // `remaining` how many keys with that prefix still belong to the top k.
  uint32_t prefix = 0, prefix_mask = 0;
  unsigned remaining = p.k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (tid < 256) hist[tid] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += kTopkThreads) {
      // Warp-aggregated: lanes with the same digit add once (float scores crowd into few top digits).
      const uint32_t key = topk_order_key(s[i]);
      const unsigned digit = (key & prefix_mask) == prefix ? (key >> shift) & 0xffu : 0x100u;
      const unsigned peers = __match_any_sync(__activemask(), digit);
      if (digit != 0x100u && (threadIdx.x % 32) == unsigned(__ffs(peers) - 1)) atomicAdd(&hist[digit], __popc(peers));
    }
    __syncthreads();
    if (tid < 32) {  // warp 0: lane owns digits 8*lane .. 8*lane+7; find the digit holding rank `remaining`
      unsigned local = 0;
      for (int d = 0; d < 8; ++d) local += hist[8 * tid + d];
      unsigned suffix = local;  // inclusive suffix sum over lanes >= this lane
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned v = __shfl_down_sync(0xffffffffu, suffix, o);
        if (tid + o < 32) suffix += v;
      }
      unsigned above = suffix - local;  // keys with a higher digit than this lane's digits
      if (above < remaining && above + local >= remaining) {
        for (int d = 7; d >= 0; --d) {
          const unsigned c = hist[8 * tid + d];
          if (above + c >= remaining) {
            sel_digit = 8 * tid + d;
            sel_above = above;
            break;
          }
          above += c;
        }
      }
    }
    __syncthreads();
    prefix |= sel_digit << shift;
    prefix_mask |= 0xffu << shift;
    remaining -= sel_above;
    __syncthreads();  // sel_digit / sel_above / hist are rewritten by the next pass
  }
  // Compaction in position order: keys > prefix, and the first `remaining` keys == prefix.
  int eq_seen = 0, written = 0;
  for (int base = 0; base < n && written < p.k; base += kTopkThreads) {
    const int i = base + tid;
    const uint32_t key = i < n ? topk_order_key(s[i]) : 0u;
    const bool gt = i < n && key > prefix, eq = i < n && key == prefix;
    int eq_total = 0, sel_total = 0;
    const int eq_rank = block_prefix_count(eq, warp_counts, &eq_total);
    const bool sel = gt || (eq && unsigned(eq_seen + eq_rank) < remaining);
    const int pos = written + block_prefix_count(sel, warp_counts, &sel_total);
    if (sel && pos < p.k) out[pos] = slot_of(p, b, i);
    eq_seen += eq_total;
    written += sel_total;
  }
}

}  // namespace

void indexer_score_cuda(const IndexerScoreParams& p, cudaStream_t stream) {
  validate_indexer_score_params(p);
  if (p.B == 0) return;
  const size_t smem = score_smem_bytes(p.Hi, p.layout.dim);
  require(smem <= 227 * 1024, "indexer_score_cuda: Hi = " + std::to_string(p.Hi) + ", D = " +
                                  std::to_string(p.layout.dim) + " need " + std::to_string(smem) +
                                  " bytes of shared memory, more than the 227 KiB a block can have");
  CUDA_CHECK(cudaFuncSetAttribute(indexer_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  indexer_score_kernel<<<dim3(p.max_pages, p.B), kScoreThreads, smem, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void topk_cuda(const TopkParams& p, cudaStream_t stream) {
  validate_topk_params(p);
  if (p.B == 0) return;
  const int limit = int(std::min<int64_t>(p.score_stride, int64_t(p.max_pages) * kPageSize));
  topk_kernel<<<p.B, kTopkThreads, 0, stream>>>(p, limit);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
