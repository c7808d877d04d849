// DSA lightning indexer (HF GlmMoeDsaIndexer; DeepSeek-V3.2 reference):
//   score[b,t] = sum_h w[b,h] * ReLU(softmax_scale * q[b,h,:] . k[t,:]),   t < seq_len[b]
// with w = weights_proj(x) * head_weight_scale (n_heads^-0.5) and softmax_scale = D^-0.5;
// then the top-k positions by score (all positions when seq_len <= k).
#pragma once
#include <cstdint>

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
};
void indexer_score_cpu(const IndexerScoreParams& p);
void indexer_score_cuda(const IndexerScoreParams& p, cudaStream_t stream);

// Top-k logical positions by score, translated to pool slots through the block table; written in
// ascending position order, padded with -1 when seq_len < k. Ties go to the lower position.
struct TopkParams {
  const float* scores;        // [B, score_stride]
  int score_stride = 0;
  const int32_t* seq_lens;    // [B]
  const int32_t* block_table; // [B, max_pages]
  int max_pages = 0;
  int32_t* out_slots;         // [B, k]
  int B = 0, k = 0;
};
void topk_cpu(const TopkParams& p);
void topk_cuda(const TopkParams& p, cudaStream_t stream);

}  // namespace glm5
