// CPU twins of indexer.h: DSA lightning-indexer scores over the paged key cache, and exact top-k.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/indexer.h"

namespace glm5 {
namespace {

void check_seq_and_pages(int b, int seq_len, int limit, const int32_t* block_table, int max_pages, const char* who) {
  require(seq_len >= 0 && seq_len <= limit, std::string(who) + ": seq_lens[" + std::to_string(b) + "] = " +
                                                std::to_string(seq_len) + ", expected 0.." + std::to_string(limit));
  for (int pg = 0; pg * kPageSize < seq_len; ++pg)
    require(block_table[int64_t(b) * max_pages + pg] >= 0,
            std::string(who) + ": block_table[" + std::to_string(b) + "][" + std::to_string(pg) + "] = " +
                std::to_string(block_table[int64_t(b) * max_pages + pg]) + ", expected a page id >= 0");
}

}  // namespace

void validate_indexer_score_params(const IndexerScoreParams& p) {
  check_indexer_layout(p.layout, "indexer_score");
  require(p.B >= 0 && p.Hi >= 0, "indexer_score: B = " + std::to_string(p.B) + ", Hi = " + std::to_string(p.Hi) +
                                     ", expected both >= 0");
  require(p.max_pages >= 1, "indexer_score: max_pages = " + std::to_string(p.max_pages) + ", expected >= 1");
  require(p.fresh >= 0, "indexer_score: fresh = " + std::to_string(p.fresh) + ", expected >= 0");
  if (p.B == 0) return;
  require(p.q && p.head_weights && p.key_cache && p.block_table && p.seq_lens && p.scores,
          "indexer_score: q, head_weights, key_cache, block_table, seq_lens and scores must be non-null");
}

void indexer_score_cpu(const IndexerScoreParams& p) {
  validate_indexer_score_params(p);
  const int D = p.layout.dim;
  const int64_t positions = int64_t(p.max_pages) * kPageSize;
  std::vector<float> k(D);
  for (int b = 0; b < p.B; ++b) {
    const int n = p.seq_lens[b];
    check_seq_and_pages(b, n, int(positions), p.block_table, p.max_pages, "indexer_score");
    float* out = p.scores + b * positions;
    for (int64_t pos = 0; pos < positions; ++pos) {
      if (pos >= n) {
        out[pos] = -std::numeric_limits<float>::infinity();
        continue;
      }
      int64_t slot = int64_t(p.block_table[int64_t(b) * p.max_pages + pos / kPageSize]) * kPageSize + pos % kPageSize;
      if (p.layout.fp8) {
        const uint8_t* kq = p.key_cache + indexer_key_offset(slot, D);
        float scale;
        std::memcpy(&scale, p.key_cache + indexer_scale_offset(slot, D), 4);
        for (int d = 0; d < D; ++d) k[d] = e4m3_bits_to_float(kq[d]) * scale;
      } else {
        const uint8_t* kb = p.key_cache + slot * 2 * D;
        for (int d = 0; d < D; ++d) {
          uint16_t bits;
          std::memcpy(&bits, kb + 2 * d, 2);
          k[d] = bf16_bits_to_float(bits);
        }
      }
      float score = 0.f;
      for (int h = 0; h < p.Hi; ++h) {
        const float* q = p.q + (int64_t(b) * p.Hi + h) * D;
        float dot = 0.f;
        for (int d = 0; d < D; ++d) dot += q[d] * k[d];
        const float w = p.head_weights[int64_t(b) * p.Hi + h] * p.head_weight_scale;
        score += w * std::fmax(p.softmax_scale * dot, 0.f);
      }
      out[pos] = score;
    }
    if (p.top_hist)
      for (int64_t pos = 0; pos < std::min<int64_t>(n, positions); ++pos) ++p.top_hist[int64_t(b) * kTopkHistCopies * kTopkHistBins + topk_hist_bin(out[pos])];
  }
}

void validate_topk_params(const TopkParams& p) {
  require(p.B >= 0, "topk: B = " + std::to_string(p.B) + ", expected >= 0");
  require(p.k >= 1, "topk: k = " + std::to_string(p.k) + ", expected >= 1");
  require(p.max_pages >= 1, "topk: max_pages = " + std::to_string(p.max_pages) + ", expected >= 1");
  require(p.score_stride >= 1, "topk: score_stride = " + std::to_string(p.score_stride) + ", expected >= 1");
  require(p.cluster == 0 || p.cluster == 1 || p.cluster == 2 || p.cluster == 4 || p.cluster == 8,
          "topk: cluster = " + std::to_string(p.cluster) + ", expected 0 (auto), 1, 2, 4 or 8");
  require(!p.top_hist || p.score_stride == int64_t(p.max_pages) * kPageSize,
          "topk: top_hist needs score_stride = max_pages * 64 = " + std::to_string(int64_t(p.max_pages) * kPageSize) +
              ", got " + std::to_string(p.score_stride));
  if (p.B == 0) return;
  require(p.scores && p.seq_lens && p.block_table && p.out_slots,
          "topk: scores, seq_lens, block_table and out_slots must be non-null");
  if (p.flat_workspace) {
    const int limit = int(std::min<int64_t>(p.score_stride, int64_t(p.max_pages) * kPageSize));
    const size_t need = topk_flat_workspace_bytes(p.B, limit);
    require(p.flat_workspace_bytes >= need, "topk: flat_workspace_bytes = " + std::to_string(p.flat_workspace_bytes) +
                                                ", expected >= " + std::to_string(need) + " for B " +
                                                std::to_string(p.B) + " x " + std::to_string(limit) + " positions");
  }
}

int topk_flat_blocks(int limit) { return (std::max(limit, 1) + kTopkFlatChunk - 1) / kTopkFlatChunk; }

size_t topk_flat_workspace_bytes(int B, int limit) {
  return size_t(std::max(B, 0)) * (size_t(kTopkFlatHeaderWords) * 4 + size_t(topk_flat_blocks(limit)) * kTopkFlatChunk * 8);
}

bool topk_flat_fits(int B, int limit, int64_t resident) {
  const int G = topk_flat_blocks(limit);
  return G <= kTopkFlatMaxBlocks && int64_t(B) * G * 2 <= resident;
}

int topk_cluster_blocks(int B, int limit, int sms) {
  int C = 1;
  while (C < 8 && int64_t(B) * C * 2 <= sms && int64_t(C) * 2 * 4096 <= limit) C *= 2;
  return C;
}

bool topk_score_hist_pays(int B, int limit, int sms) { return topk_cluster_blocks(B, limit, sms) > 1; }

void topk_cpu(const TopkParams& p) {
  validate_topk_params(p);
  const int limit = int(std::min<int64_t>(p.score_stride, int64_t(p.max_pages) * kPageSize));
  std::vector<int> pos;
  for (int b = 0; b < p.B; ++b) {
    const int n = p.seq_lens[b];
    check_seq_and_pages(b, n, limit, p.block_table, p.max_pages, "topk");
    const float* s = p.scores + int64_t(b) * p.score_stride;
    if (p.top_hist) {  // the contract the GPU kernel relies on: the copies sum to the first digits of these n scores
      std::vector<unsigned> want(kTopkHistBins, 0u), got(kTopkHistBins, 0u);
      for (int i = 0; i < n; ++i) ++want[topk_hist_bin(s[i])];
      for (int c = 0; c < kTopkHistCopies; ++c)
        for (int d = 0; d < kTopkHistBins; ++d) got[d] += p.top_hist[(int64_t(b) * kTopkHistCopies + c) * kTopkHistBins + d];
      require(got == want, "topk: top_hist of request " + std::to_string(b) +
                               " is not the first-digit histogram of its " + std::to_string(n) +
                               " scores (IndexerScoreParams::top_hist builds it; it must start zeroed)");
    }
    pos.resize(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    const int keep = std::min(n, p.k);
    if (n > p.k) {
      // Higher score first; equal scores: lower position first.
      std::nth_element(pos.begin(), pos.begin() + keep, pos.end(), [&](int a, int c) {
        uint32_t ka = topk_order_key(s[a]), kc = topk_order_key(s[c]);
        return ka != kc ? ka > kc : a < c;
      });
      std::sort(pos.begin(), pos.begin() + keep);
    }
    int32_t* out = p.out_slots + int64_t(b) * p.k;
    for (int i = 0; i < keep; ++i)
      out[i] = p.block_table[int64_t(b) * p.max_pages + pos[i] / kPageSize] * kPageSize + pos[i] % kPageSize;
    for (int i = keep; i < p.k; ++i) out[i] = -1;
  }
  if (p.top_hist) std::fill(p.top_hist, p.top_hist + int64_t(p.B) * kTopkHistCopies * kTopkHistBins, 0u);  // consumed (GPU: the same)
}

std::vector<uint32_t> topk_hist_spread_cpu(const float* scores, int B, int score_stride, const int32_t* seq_lens) {
  const size_t row = size_t(kTopkHistCopies) * kTopkHistBins;
  std::vector<uint32_t> hist(size_t(B) * row, 0u);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < seq_lens[b]; ++i)
      ++hist[b * row + size_t(i % kTopkHistCopies) * kTopkHistBins + topk_hist_bin(scores[size_t(b) * score_stride + i])];
  return hist;
}

}  // namespace glm5
