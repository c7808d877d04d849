// DSA lightning indexer (HF GlmMoeDsaIndexer; DeepSeek-V3.2 reference):
//   score[b,t] = sum_h w[b,h] * ReLU(softmax_scale * q[b,h,:] . k[t,:]),   t < seq_len[b]
// with w = weights_proj(x) * head_weight_scale (n_heads^-0.5) and softmax_scale = D^-0.5;
// then the top-k positions by score (all positions when seq_len <= k).
#pragma once
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/kv_layout.h"

namespace glm5 {

struct IndexerScoreParams {
  const float* q;             // [B, Hi, D] rotated indexer queries
  const float* head_weights;  // [B, Hi] weights_proj(x), before head_weight_scale
  float head_weight_scale = 1.f;  // n_heads^-0.5 (HF GlmMoeDsaIndexer)
  const uint8_t* key_cache;   // paged indexer key cache (kv_layout.h)
  IndexerLayout layout;
  const int32_t* block_table; // [B, max_pages] page id of each request's logical page
  int max_pages = 0;
  const int32_t* seq_lens;    // [B] tokens of each request (positions 0 .. seq_len-1)
  float* scores;              // [B, max_pages*64]: score of each logical position (rest: -inf)
  int B = 0, Hi = 0;
  float softmax_scale = 1.f;
  // Positions [seq_len - fresh, seq_len) of each request may be written by the kernels just before this one (the new
  // tokens' keys, attn.prologue); the others were written by earlier steps. 0: any may (every key load waits for
  // the previous kernel). >= 1 (the GPU FP8 tensor-core path; the engine's decode step: 1): each warp issues its
  // first tile's block-table and key loads before its PDL wait, so their DRAM round trip overlaps the previous
  // kernel's tail, and reloads that tile after the wait when it holds a fresh position. The same results.
  int fresh = 0;
  // Optional [B, kTopkHistCopies, kTopkHistBins]: the first radix pass of the top-k that reads these scores
  // (TopkParams::top_hist), built here. Every position pos < seq_len (pos < max_pages*64) adds 1 to bin
  // topk_hist_bin(its score) of one copy of its request's histogram (the GPU: the writing warp's index mod
  // kTopkHistCopies, so the hot bins' atomics spread; the CPU twin: copy 0), -inf scores of unmapped pages included;
  // the histogram is the sum of the copies. Must hold zeros on entry: the top-k that reads it leaves it zero
  // (session 22: the top-k's own first-pass histogram and its cluster merge were ~3 us of its ~16 at batch 1 / 32K;
  // here it costs one warp-aggregated atomic per distinct bin per warp of 32 positions).
  unsigned* top_hist = nullptr;
};
// Key of logical position pos: slot = block_table[b][pos / 64] * 64 + pos % 64 (page slot / 64 of
// the indexer cache); FP8 keys dequantize to e4m3 * scale in fp32, BF16 keys to their value.
// Throws glm5::Error on null pointers, B/Hi < 0, max_pages < 1, and (CPU twin only, it reads them)
// seq_len outside [0, max_pages*64] or a negative page id below seq_len; the kernel writes -inf there.
// GPU: FP8 keys with Hi = 32 and D 32 / 64 / 128 (GLM-5: 32 x 128) run on FP16 tensor cores (e4m3
// codes exact in FP16, q as two FP16 terms after a per-head power-of-2 scale, the FP8 scale applied
// after the dot product); BF16 keys with Hi = 32 and D a multiple of 16 in [32, 128] on TF32 tensor
// cores (q as two TF32 terms). Both equal the fp32 twin within ~1e-6 relative (not bit for bit);
// other shapes use an fp32 FMA kernel.
void validate_indexer_score_params(const IndexerScoreParams& p);
void indexer_score_cpu(const IndexerScoreParams& p);
void indexer_score_cuda(const IndexerScoreParams& p, cudaStream_t stream);

// Top-k logical positions by score, translated to pool slots through the block table; written in
// ascending position order, padded with -1 when seq_len < k. Ties go to the lower position.
// GPU: radix select on the order-preserving uint32 of each score (3 passes of 11/11/10-bit digits over
// shared-memory histograms; the keys left undecided after the first pass are kept in shared memory
// when they fit, by default gathered into one block of the cluster: TopkParams::gather), then an ordered
// compaction. One thread-block cluster of C blocks (1024 threads,
// 208 KiB of shared memory each) per request, each block owning 1/C of the positions (read from
// global memory once when they are <= 32,768, else once per scan) and the
// histograms summed through distributed shared memory: C = 8 at small batch (>= 4096 positions per
// block), down to 1 when B alone fills the GPU (chosen by topk_cuda; sm_90 clusters).
// The top-k's first radix digit: the top 11 bits of the order key (topk_order_key below); the histogram of those
// digits that the score kernel builds has kTopkHistCopies copies per request (IndexerScoreParams::top_hist).
constexpr int kTopkHistBins = 2048;
constexpr int kTopkHistCopies = 8;

struct TopkParams {
  const float* scores;        // [B, score_stride]
  int score_stride = 0;
  const int32_t* seq_lens;    // [B]
  const int32_t* block_table; // [B, max_pages]
  int max_pages = 0;
  int32_t* out_slots;         // [B, k]
  int B = 0, k = 0;
  int cluster = 0;            // GPU blocks per request: 0 = chosen by topk_cuda; 1, 2, 4, 8 = forced (tuning)
  // The gathered form (default): after the first pass, the keys of the selected top digit go to one block of the
  // cluster, which resolves the k-th key alone and sends each block its compaction counts (two cluster barriers
  // instead of five); used when they fit its shared memory (<= 16,384 keys), else the three cluster passes run.
  // false: always the three cluster passes (A/B tuning). The same slots either way.
  bool gather = true;
  // Optional [B, kTopkHistCopies, kTopkHistBins]: the histogram of these scores' first digits built by indexer_score
  // (IndexerScoreParams::top_hist): the first pass reads it instead of building and merging its own; the kernel
  // (and the CPU twin) then zero it for the next use. Requires score_stride == max_pages * 64 (the positions the
  // score kernel counted are the ones the top-k ranks).
  unsigned* top_hist = nullptr;
  // Optional, GPU only (the CPU twin ignores it): the flat form's workspace, at least
  // topk_flat_workspace_bytes(B, positions) bytes, zeroed before its first use (every launch leaves its ticket
  // words zero). With top_hist also set, topk_cuda runs the flat form when it fits (topk_flat_fits): per request a
  // grid of ceil(positions / 4096) blocks of 512 threads, no cluster; the last block to finish its positions
  // resolves the k-th key among the top digit's keys and every block writes its own winners (kernels/indexer.cu,
  // topk_flat_kernel). The same slots.
  void* flat_workspace = nullptr;
  size_t flat_workspace_bytes = 0;
};
// Order: scores compare as floats with -0 == +0, ties to the lower position; NaN ranks above +inf
// (positive NaN) or below -inf (negative NaN), the order of the float's sign-magnitude bits.
// Throws glm5::Error on null pointers, B < 0, k < 1, max_pages < 1, score_stride < 1, cluster not
// 0 / 1 / 2 / 4 / 8, a flat workspace smaller than topk_flat_workspace_bytes; the CPU twin
// also on seq_len outside [0, min(score_stride, max_pages*64)] or a negative page id below seq_len
// (the kernel clamps seq_len to that range and writes slot -1 for a negative page id).
void validate_topk_params(const TopkParams& p);

// Blocks per request (the thread-block cluster size) topk_cuda starts from for B requests of `limit` positions on a GPU
// of `sms` SMs: the largest power of two <= 8 with B * C * 2 <= sms and C * 2 * 4096 <= limit (topk_cuda halves it
// further if the GPU cannot co-schedule it; TopkParams::cluster overrides it). H200 (132 SMs), >= 32K positions:
// B <= 16: 8, B <= 33: 4, B <= 66: 2, else 1.
int topk_cluster_blocks(int B, int limit, int sms);
// The flat form's layout: positions per block, blocks per request at most, 32-bit counter words per request
// before its (key, position) slots.
constexpr int kTopkFlatChunk = 4096;
constexpr int kTopkFlatMaxBlocks = 64;
constexpr int kTopkFlatHeaderWords = 512;
// Blocks per request of the flat form for `limit` positions: ceil(limit / kTopkFlatChunk), at least 1.
int topk_flat_blocks(int limit);
// Bytes of TopkParams::flat_workspace for B requests of `limit` positions (min(score_stride, max_pages * 64)):
// per request 2 KiB of counters (all requests' first, at fixed offsets) and an 8-byte (key, position) slot per position
// rounded up to 4096. The flat form runs only with top_hist 16-byte and the workspace 8-byte aligned.
size_t topk_flat_workspace_bytes(int B, int limit);
// Whether the flat form can run B requests of `limit` positions on a GPU with `resident` blocks of it at once
// (SMs x its occupancy): at most 64 blocks per request (262,144 positions), and B x blocks within half of
// `resident`. Its blocks wait for the request's last block, so all of them must be resident together.
bool topk_flat_fits(int B, int limit, int64_t resident);
// topk_flat_fits on the current CUDA device (its SMs x the flat kernel's occupancy): whether topk_cuda runs the flat
// form for these requests when given the workspace and the histogram. Throws glm5::Error when the query fails.
bool topk_flat_fits_here(int B, int limit);
// Whether the score kernel's first-digit histogram (IndexerScoreParams / TopkParams::top_hist) pays: while the top-k
// runs each request as a cluster (topk_cluster_blocks > 1), where it replaces a merge through distributed shared
// memory; not when each request is one block, whose own histogram costs less than the score kernel's atomics.
// Measured on the H200 (bench kernels --only indexer, S22b, score + top-k at 32K): B 1 21.0 us with it against 23.0
// without, B 8 34.9 / 36.2, B 32 (4 blocks each) 83.2 / 84.1, B 128 (one block each) 239.3 / 230.8.
bool topk_score_hist_pays(int B, int limit, int sms);
// The same on the current CUDA device (its SM count). Throws glm5::Error when the device query fails.
bool topk_score_hist_pays_here(int B, int limit);
void topk_cpu(const TopkParams& p);
// The first-digit histogram [B, kTopkHistCopies, kTopkHistBins] as the GPU score kernel leaves it, with every copy
// used: position i of request b (i < seq_lens[b], scores [B, score_stride] fp32) counted in copy i % kTopkHistCopies,
// bin topk_hist_bin(score). For tests and the bench's checks of TopkParams::top_hist (the top-k must sum the copies;
// indexer_score_cpu counts in copy 0 only).
std::vector<uint32_t> topk_hist_spread_cpu(const float* scores, int B, int score_stride, const int32_t* seq_lens);
void topk_cuda(const TopkParams& p, cudaStream_t stream);

// The total order topk uses: an unsigned key that sorts like the float (-0 mapped to +0).
GLM5_HD uint32_t topk_order_key(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
GLM5_HD unsigned topk_hist_bin(float f) { return topk_order_key(f) >> 21; }

}  // namespace glm5
