// CUDA kernels of indexer.h.
// indexer_score: one block per (logical page of 64 positions, request). The page's keys are
// dequantized into shared memory as fp32 (a [64][D+1] tile, conflict-free column reads), the
// request's queries and head weights too; thread (token, head quarter) sums w_h * ReLU(scale * q_h.k)
// over a quarter of the heads, the four partial sums are added in a fixed order.
// Bytes: B * seq_len * (D + 4) key bytes + 4 per score; FLOPs: 2 * B * seq_len * Hi * D.
// topk: one block of 1024 threads per request; radix select of the k-th largest order key (3 passes
// of 11/11/10-bit digits over a shared-memory histogram; after the first, the undecided keys are
// kept in shared memory when they fit), then an ordered compaction (one block prefix sum per 8192
// positions) that keeps keys above the threshold and the lowest-position keys equal to it.
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
constexpr int kTopkPerThread = 8;                        // consecutive positions per thread per step
constexpr int kTopkStep = kTopkThreads * kTopkPerThread;  // positions per block step (8192)
constexpr int kTopkBins = 2048;                          // 11-bit digits (the last pass: 10 bits)
constexpr int kTopkCandidates = 32768;                   // shared-memory keys after the first pass
constexpr unsigned kNoDigit = 0xffffffffu;

size_t topk_smem_bytes() { return sizeof(uint32_t) * (kTopkBins + kTopkCandidates); }

__device__ __forceinline__ int32_t slot_of(const TopkParams& p, int b, int pos) {
  const int32_t page = p.block_table[int64_t(b) * p.max_pages + pos / kPageSize];
  return page < 0 ? -1 : page * kPageSize + pos % kPageSize;
}

// The order keys of positions base + kTopkPerThread*tid + j (j < kTopkPerThread) of one request's
// scores; valid[j] false past n. Two 16-byte loads when `vec` (row 16-byte aligned), else scalars.
__device__ __forceinline__ void load_keys(const float* __restrict__ s, int n, int base, bool vec,
                                          uint32_t (&key)[kTopkPerThread], bool (&valid)[kTopkPerThread]) {
  const int first = base + kTopkPerThread * int(threadIdx.x);
  float v[kTopkPerThread];
  if (vec && first + kTopkPerThread <= n) {
#pragma unroll
    for (int q = 0; q < kTopkPerThread / 4; ++q) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(s + first) + q);
      v[4 * q] = f.x;
      v[4 * q + 1] = f.y;
      v[4 * q + 2] = f.z;
      v[4 * q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kTopkPerThread; ++j) v[j] = first + j < n ? __ldg(s + first + j) : 0.f;
  }
#pragma unroll
  for (int j = 0; j < kTopkPerThread; ++j) {
    valid[j] = first + j < n;
    key[j] = topk_order_key(v[j]);
  }
}

// Adds `digit` (kNoDigit: nothing) to the shared histogram; lanes with equal digits add once
// (scores crowd into few top digits, so this saves most same-address atomics). Whole warp calls.
__device__ __forceinline__ void hist_add(unsigned* hist, unsigned digit) {
  const unsigned peers = __match_any_sync(0xffffffffu, digit);
  if (digit != kNoDigit && (threadIdx.x % 32) == unsigned(__ffs(peers) - 1)) atomicAdd(&hist[digit], __popc(peers));
}

// Digit of `key` for a pass at `shift` with `bits`, or kNoDigit unless valid and the bits above
// the digit equal `prefix` under `prefix_mask`.
__device__ __forceinline__ unsigned digit_of(uint32_t key, bool valid, uint32_t prefix, uint32_t prefix_mask, int shift,
                                             int bits) {
  return valid && (key & prefix_mask) == prefix ? (key >> shift) & ((1u << bits) - 1u) : kNoDigit;
}

// Block-wide: the digit d of `hist` (nbins = 1024 or 2048, highest digit first) holding rank
// `remaining` (1-based) and how many keys lie in higher digits; written to sel[0], sel[1].
// `warp_sums` is [kTopkWarps] scratch. Ends with a barrier, so sel is readable by every thread.
__device__ void select_digit(const unsigned* hist, int nbins, unsigned remaining, unsigned* warp_sums, unsigned* sel) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, per = nbins / kTopkThreads;
  unsigned local = 0;
  for (int d = 0; d < per; ++d) local += hist[per * tid + d];
  unsigned suffix = local;  // inclusive suffix sum over the lanes >= this lane of the warp
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned v = __shfl_down_sync(0xffffffffu, suffix, o);
    if (lane + o < 32) suffix += v;
  }
  if (lane == 0) warp_sums[warp] = suffix;
  __syncthreads();
  unsigned above = suffix - local;  // keys in the digits of higher threads
  for (int w = warp + 1; w < kTopkWarps; ++w) above += warp_sums[w];
  if (above < remaining && above + local >= remaining) {
    for (int d = per - 1; d >= 0; --d) {
      const unsigned c = hist[per * tid + d];
      if (above + c >= remaining) {
        sel[0] = unsigned(per * tid + d);
        sel[1] = above;
        break;
      }
      above += c;
    }
  }
  __syncthreads();
}

// Block-wide exclusive prefix sum of `v` in thread order; the block total in *total.
// `warp_sums` is [kTopkWarps] scratch; barriers before and after, so it can be called in a loop.
__device__ unsigned block_exclusive_sum(unsigned v, unsigned* warp_sums, unsigned* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  __syncthreads();  // the previous call's readers are done with warp_sums
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  unsigned before = incl - v, sum = 0;
  for (int w = 0; w < kTopkWarps; ++w) {
    const unsigned c = warp_sums[w];
    if (w < warp) before += c;
    sum += c;
  }
  *total = sum;
  return before;
}

// One block per request. Radix select of the k-th largest order key with digits of 11, 11 and 10
// bits: pass 1 histograms the top 11 bits of all n keys; the keys in the selected digit (the only
// ones still undecided) are then copied to shared memory when they fit (kTopkCandidates), so passes
// 2 and 3 read shared memory instead of the scores (else they re-read the scores, filtered by the
// prefix). Last, an ordered compaction over the scores in steps of 8192 positions (8 consecutive
// ones per thread, one block prefix sum per step) keeps the keys above the k-th key and the
// lowest-position keys equal to it: three reads of the scores in all.
__global__ void __launch_bounds__(kTopkThreads) topk_kernel(TopkParams p, int limit) {
  extern __shared__ uint32_t topk_smem[];
  unsigned* hist = topk_smem;                  // [kTopkBins]
  uint32_t* cand = topk_smem + kTopkBins;      // [kTopkCandidates]
  __shared__ unsigned warp_sums[kTopkWarps];
  __shared__ unsigned sel[2];
  __shared__ unsigned cand_count;
  const int b = blockIdx.x, tid = threadIdx.x, lane = tid % 32;
  const int n = min(max(p.seq_lens[b], 0), limit);
  const float* s = p.scores + int64_t(b) * p.score_stride;
  int32_t* out = p.out_slots + int64_t(b) * p.k;
  if (n <= p.k) {
    for (int i = tid; i < p.k; i += kTopkThreads) out[i] = i < n ? slot_of(p, b, i) : -1;
    return;
  }
  const bool vec = (reinterpret_cast<uintptr_t>(s) & 15u) == 0;
  // After each pass `prefix` holds the top bits of the k-th largest key (under `prefix_mask`) and
  // `remaining` how many keys with that prefix still belong to the top k.
  uint32_t prefix = 0, prefix_mask = 0;
  unsigned remaining = p.k;
  bool in_smem = false;
  unsigned count = 0;  // keys in cand when in_smem
  for (int pass = 0; pass < 3; ++pass) {  // digits: bits 31..21, 20..10, 9..0
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0, bits = pass == 2 ? 10 : 11, nbins = 1 << bits;
    for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[i] = 0;
    __syncthreads();
    if (in_smem) {
      for (unsigned base = 0; base < count; base += kTopkThreads) {
        const unsigned i = base + tid;
        hist_add(hist, digit_of(i < count ? cand[i] : 0u, i < count, prefix, prefix_mask, shift, bits));
      }
    } else {
      for (int base = 0; base < n; base += kTopkStep) {
        uint32_t key[kTopkPerThread];
        bool valid[kTopkPerThread];
        load_keys(s, n, base, vec, key, valid);
#pragma unroll
        for (int j = 0; j < kTopkPerThread; ++j)
          hist_add(hist, digit_of(key[j], valid[j], prefix, prefix_mask, shift, bits));
      }
    }
    __syncthreads();
    select_digit(hist, nbins, remaining, warp_sums, sel);
    const unsigned digit = sel[0], above = sel[1];
    const unsigned in_digit = hist[digit];
    prefix |= digit << shift;
    prefix_mask |= uint32_t(nbins - 1) << shift;
    remaining -= above;
    if (pass == 0 && in_digit <= kTopkCandidates) {
      // Copy the keys of the selected top digit to shared memory (any order: only counts matter).
      if (tid == 0) cand_count = 0;
      __syncthreads();
      for (int base = 0; base < n; base += kTopkStep) {
        uint32_t key[kTopkPerThread];
        bool valid[kTopkPerThread];
        load_keys(s, n, base, vec, key, valid);
#pragma unroll
        for (int j = 0; j < kTopkPerThread; ++j) {
          const bool take = valid[j] && (key[j] & prefix_mask) == prefix;
          const unsigned mask = __ballot_sync(0xffffffffu, take);
          unsigned at = 0;
          if (lane == 0 && mask) at = atomicAdd(&cand_count, unsigned(__popc(mask)));
          at = __shfl_sync(0xffffffffu, at, 0);
          if (take) cand[at + __popc(mask & ((1u << lane) - 1u))] = key[j];
        }
      }
      __syncthreads();
      in_smem = true;
      count = cand_count;  // == in_digit
    }
    __syncthreads();  // hist, sel and warp_sums are rewritten by the next pass
  }
  // Compaction in position order: keys > prefix, and the first `remaining` keys == prefix.
  const uint32_t kth = prefix;
  unsigned written = 0, eq_seen = 0;
  for (int base = 0; base < n && written < unsigned(p.k); base += kTopkStep) {
    uint32_t key[kTopkPerThread];
    bool valid[kTopkPerThread];
    load_keys(s, n, base, vec, key, valid);
    unsigned gt = 0, eq = 0;
#pragma unroll
    for (int j = 0; j < kTopkPerThread; ++j) {
      gt += valid[j] && key[j] > kth;
      eq += valid[j] && key[j] == kth;
    }
    unsigned totals = 0;  // packed: greater in the low 16 bits, equal in the high (each <= 8192)
    const unsigned before = block_exclusive_sum(gt | (eq << 16), warp_sums, &totals);
    const unsigned gt_before = before & 0xffffu, eq_before = before >> 16;
    // Equal keys are taken in position order while eq_seen + (their rank) < remaining.
    const unsigned eq_left = remaining > eq_seen ? remaining - eq_seen : 0u;
    unsigned pos = written + gt_before + min(eq_before, eq_left);
    unsigned eq_rank = eq_before;
    const int first = base + kTopkPerThread * tid;
#pragma unroll
    for (int j = 0; j < kTopkPerThread; ++j) {
      bool take = false;
      if (valid[j] && key[j] > kth) take = true;
      if (valid[j] && key[j] == kth) take = eq_rank++ < eq_left;
      if (take) {
        if (pos < unsigned(p.k)) out[pos] = slot_of(p, b, first + j);
        ++pos;
      }
    }
    const unsigned gt_total = totals & 0xffffu, eq_total = totals >> 16;
    written += gt_total + min(eq_total, eq_left);
    eq_seen += eq_total;
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
  const size_t smem = topk_smem_bytes();
  CUDA_CHECK(cudaFuncSetAttribute(topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  topk_kernel<<<p.B, kTopkThreads, smem, stream>>>(p, limit);
  CUDA_CHECK_LAUNCH();
}

}  // namespace glm5
