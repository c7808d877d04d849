// CPU tests of the DSA lightning indexer (kernels/indexer.h): scores over the paged key cache, top-k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/rng.h"
#include "kernels/indexer.h"
#include "kernels/kv_cache.h"
#include "kernel_test_util.h"

using namespace glm5;

namespace {


}  // namespace

TEST(IndexerScore, MatchesDoubleReferenceThroughBlockTable) {
  for (bool fp8 : {true, false})
    for (auto [Hi, D] : {std::pair{32, 128}, std::pair{16, 64}, std::pair{3, 32}}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE("fp8 " + std::to_string(fp8) + " Hi " + std::to_string(Hi) + " D " + std::to_string(D) +
                   " seed " + std::to_string(seed));
      const int B = 3, max_pages = 4;
      IndexerLayout il{D, fp8};
      std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed);
      const int pool_pages = B * max_pages;
      std::vector<uint8_t> cache(size_t(pool_pages) * il.page_bytes());
      std::vector<float> keys(size_t(pool_pages) * 64 * D);
      for (size_t i = 0; i < keys.size(); ++i) keys[i] = rng_normal(seed, 21, i);
      std::vector<int32_t> slots(pool_pages * 64);
      for (int s = 0; s < pool_pages * 64; ++s) slots[s] = s;
      indexer_key_write_cpu({keys.data(), slots.data(), cache.data(), il, pool_pages * 64});
      std::vector<float> q(size_t(B) * Hi * D), w(size_t(B) * Hi);
      for (size_t i = 0; i < q.size(); ++i) q[i] = rng_normal(seed, 22, i);
      for (size_t i = 0; i < w.size(); ++i) w[i] = rng_normal(seed, 23, i);
      std::vector<int32_t> seq = {1, 200, 256};
      std::vector<float> scores(size_t(B) * max_pages * 64, 3.f);
      const float hws = 1.f / std::sqrt(float(Hi));
      IndexerScoreParams p{.q = q.data(), .head_weights = w.data(), .head_weight_scale = hws,
                           .key_cache = cache.data(), .layout = il, .block_table = bt.data(), .max_pages = max_pages,
                           .seq_lens = seq.data(), .scores = scores.data(), .B = B, .Hi = Hi,
                           .softmax_scale = 1.f / std::sqrt(float(D))};
      indexer_score_cpu(p);
      double max_err = 0, max_ref = 0;
      for (int b = 0; b < B; ++b)
        for (int pos = 0; pos < max_pages * 64; ++pos) {
          const float got = scores[size_t(b) * max_pages * 64 + pos];
          if (pos >= seq[b]) {
            ASSERT_TRUE(std::isinf(got) && got < 0) << b << "," << pos;
            continue;
          }
          const int64_t slot = int64_t(bt[b * max_pages + pos / 64]) * 64 + pos % 64;
          // Dequantized key straight from the writer's bytes.
          std::vector<double> k(D);
          for (int d = 0; d < D; ++d) {
            if (fp8) {
              float scale;
              std::memcpy(&scale, cache.data() + (slot / 64) * il.page_bytes() + 64 * D + (slot % 64) * 4, 4);
              k[d] = double(e4m3_bits_to_float(cache[(slot / 64) * il.page_bytes() + (slot % 64) * D + d])) * scale;
            } else {
              k[d] = round_bf16(keys[size_t(slot) * D + d]);
            }
          }
          double ref = 0;
          for (int h = 0; h < Hi; ++h) {
            double dot = 0;
            for (int d = 0; d < D; ++d) dot += double(q[(size_t(b) * Hi + h) * D + d]) * k[d];
            ref += double(w[b * Hi + h] * hws) * std::max(0.0, dot / std::sqrt(double(D)));
          }
          max_err = std::max(max_err, std::fabs(got - ref));
          max_ref = std::max(max_ref, std::fabs(ref));
        }
      RecordProperty("max_abs_err", sci(max_err));
      EXPECT_LE(max_err, 1e-5 * std::max(1.0, max_ref)) << "max |score| " << max_ref;
    }
}

TEST(IndexerScore, RejectsSeqLenBeyondPages) {
  IndexerLayout il{64, true};
  std::vector<uint8_t> cache(il.page_bytes());
  float q[64] = {1}, w[1] = {1}, scores[64];
  int32_t bt[1] = {0}, seq[1] = {65};
  IndexerScoreParams p{.q = q, .head_weights = w, .key_cache = cache.data(), .layout = il, .block_table = bt,
                       .max_pages = 1, .seq_lens = seq, .scores = scores, .B = 1, .Hi = 1, .softmax_scale = 0.125f};
  EXPECT_THROW(indexer_score_cpu(p), Error);
  seq[0] = 10;
  bt[0] = -1;
  EXPECT_THROW(indexer_score_cpu(p), Error);
}

namespace {

// Brute force: full stable sort by (score desc, position asc).
std::vector<int32_t> brute_topk(const float* s, int n, int k, const int32_t* bt) {
  std::vector<int> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  std::stable_sort(pos.begin(), pos.end(), [&](int a, int b) { return s[a] > s[b]; });
  pos.resize(std::min(n, k));
  std::sort(pos.begin(), pos.end());
  std::vector<int32_t> out(k, -1);
  for (size_t i = 0; i < pos.size(); ++i) out[i] = bt[pos[i] / 64] * 64 + pos[i] % 64;
  return out;
}

}  // namespace

TEST(Topk, MatchesBruteForceWithTiesAndPadding) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int B = 5, max_pages = 40, stride = max_pages * 64 + 3, k = 100;
  std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed);
  std::vector<int32_t> seq = {2560, 100, 37, 0, 1000};
  std::vector<float> scores(size_t(B) * stride);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = rng_normal(seed, 31, i);
  // Request 4: heavily tied scores (few distinct values), with -0 and +0 ties and -inf.
  for (int i = 0; i < 1000; ++i) scores[size_t(4) * stride + i] = std::floor(rng_uniform(seed, 32, i) * 5.f) - 3.f;
  scores[size_t(4) * stride + 10] = -0.f;
  scores[size_t(4) * stride + 11] = -std::numeric_limits<float>::infinity();
  std::vector<int32_t> out(size_t(B) * k, 12345);
  topk_cpu({scores.data(), stride, seq.data(), bt.data(), max_pages, out.data(), B, k});
  for (int b = 0; b < B; ++b) {
    std::vector<int32_t> want = brute_topk(scores.data() + size_t(b) * stride, seq[b], k, bt.data() + b * max_pages);
    for (int i = 0; i < k; ++i) ASSERT_EQ(out[size_t(b) * k + i], want[i]) << "request " << b << " rank " << i;
  }
}

TEST(Topk, KLargerThanAllAndErrors) {
  const int max_pages = 2;
  std::vector<int32_t> bt = {7, 3};
  std::vector<float> scores(128, 1.f);
  int32_t seq[1] = {70};
  std::vector<int32_t> out(2048);
  topk_cpu({scores.data(), 128, seq, bt.data(), max_pages, out.data(), 1, 2048});
  for (int i = 0; i < 70; ++i) ASSERT_EQ(out[i], i < 64 ? 7 * 64 + i : 3 * 64 + i - 64);
  for (int i = 70; i < 2048; ++i) ASSERT_EQ(out[i], -1);
  seq[0] = 129;
  EXPECT_THROW(topk_cpu({scores.data(), 128, seq, bt.data(), max_pages, out.data(), 1, 2048}), Error);
  seq[0] = 10;
  EXPECT_THROW(topk_cpu({scores.data(), 128, seq, bt.data(), max_pages, out.data(), 1, 0}), Error);
  for (int cluster : {-1, 3, 16})  // the GPU tuning override: 0 (auto), 1, 2, 4, 8
    EXPECT_THROW(validate_topk_params({scores.data(), 128, seq, bt.data(), max_pages, out.data(), 1, 16, cluster}),
                 Error);
  for (int cluster : {0, 1, 2, 4, 8})
    EXPECT_NO_THROW(validate_topk_params({scores.data(), 128, seq, bt.data(), max_pages, out.data(), 1, 16, cluster}));
  // TopkParams::top_hist counts the positions of score rows max_pages * 64 long: another stride is refused.
  std::vector<unsigned> hist(kTopkHistCopies * kTopkHistBins, 0u);
  TopkParams p{scores.data(), 127, seq, bt.data(), max_pages, out.data(), 1, 16};
  p.top_hist = hist.data();
  try {
    validate_topk_params(p);
    FAIL() << "score_stride 127 with top_hist accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_hist needs score_stride = max_pages * 64 = 128, got 127"), std::string::npos)
        << e.what();
  }
  p.score_stride = 128;
  EXPECT_NO_THROW(validate_topk_params(p));
}

// IndexerScoreParams::top_hist on the CPU twin: bin topk_hist_bin(score) of every position below seq_len, added to
// what the row holds; topk_cpu with top_hist returns the same slots and zeroes every row it was given.
TEST(Topk, FirstDigitHistogramBuiltByScoresAndConsumed) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int B = 3, Hi = 4, D = 32, max_pages = 6, k = 50;
  const IndexerLayout il{D, true};
  std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed), seq = {384, 70, 1};
  std::vector<uint8_t> cache(size_t(B) * max_pages * il.page_bytes());
  const int slots_n = B * max_pages * 64;
  std::vector<float> keys(size_t(slots_n) * D);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = rng_normal(seed, 51, i);
  std::vector<int32_t> slots(slots_n);
  for (int s = 0; s < slots_n; ++s) slots[s] = s;
  indexer_key_write_cpu({keys.data(), slots.data(), cache.data(), il, slots_n});
  std::vector<float> q(size_t(B) * Hi * D), w(size_t(B) * Hi), scores(size_t(B) * max_pages * 64);
  for (size_t i = 0; i < q.size(); ++i) q[i] = rng_normal(seed, 52, i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = rng_normal(seed, 53, i);
  std::vector<unsigned> hist(size_t(B) * kTopkHistCopies * kTopkHistBins, 0u);
  hist[5] = 7;  // not zero on entry: the twin adds to it (copy 0 of each request)
  IndexerScoreParams p{.q = q.data(), .head_weights = w.data(), .key_cache = cache.data(), .layout = il,
                       .block_table = bt.data(), .max_pages = max_pages, .seq_lens = seq.data(),
                       .scores = scores.data(), .B = B, .Hi = Hi};
  p.top_hist = hist.data();
  indexer_score_cpu(p);
  std::vector<unsigned> want(size_t(B) * kTopkHistCopies * kTopkHistBins, 0u);
  want[5] = 7;
  for (int b = 0; b < B; ++b)
    for (int pos = 0; pos < seq[b]; ++pos) {
      const float s = scores[size_t(b) * max_pages * 64 + pos];
      ASSERT_FALSE(std::isinf(s));
      ++want[size_t(b) * kTopkHistCopies * kTopkHistBins + (topk_order_key(s) >> 21)];
    }
  EXPECT_EQ(hist, want);
  std::vector<int32_t> plain(size_t(B) * k), with(size_t(B) * k);
  TopkParams t{scores.data(), max_pages * 64, seq.data(), bt.data(), max_pages, plain.data(), B, k};
  topk_cpu(t);
  t.out_slots = with.data();
  t.top_hist = hist.data();
  try {  // the 7 that was there before: not the histogram of request 0's scores
    topk_cpu(t);
    FAIL() << "a histogram that does not match the scores was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_hist of request 0 is not the first-digit histogram of its 384 scores"),
              std::string::npos)
        << e.what();
  }
  hist[5] -= 7;
  hist[size_t(kTopkHistCopies) * kTopkHistBins + topk_hist_bin(scores[size_t(max_pages) * 64])] -= 1;  // request 1:
  hist[size_t(kTopkHistCopies + 3) * kTopkHistBins + topk_hist_bin(scores[size_t(max_pages) * 64])] += 1;  // copy 3
  topk_cpu(t);  // the copies are summed
  EXPECT_EQ(with, plain);
  EXPECT_EQ(hist, std::vector<unsigned>(size_t(B) * kTopkHistCopies * kTopkHistBins, 0u));
}

// The cluster-size rule topk_cuda starts from, and where the score kernel's histogram is used (the H200's 132 SMs).
TEST(Topk, ClusterRuleAndWhereTheScoreHistogramPays) {
  EXPECT_EQ(topk_cluster_blocks(1, 32832, 132), 8);
  EXPECT_EQ(topk_cluster_blocks(8, 131072, 132), 8);
  EXPECT_EQ(topk_cluster_blocks(16, 32832, 132), 8);
  EXPECT_EQ(topk_cluster_blocks(17, 32832, 132), 4);
  EXPECT_EQ(topk_cluster_blocks(33, 32832, 132), 4);
  EXPECT_EQ(topk_cluster_blocks(34, 32832, 132), 2);
  EXPECT_EQ(topk_cluster_blocks(66, 32832, 132), 2);
  EXPECT_EQ(topk_cluster_blocks(67, 32832, 132), 1);
  EXPECT_EQ(topk_cluster_blocks(1, 8192, 132), 2);   // >= 4096 positions per block
  EXPECT_EQ(topk_cluster_blocks(1, 8191, 132), 1);
  EXPECT_TRUE(topk_score_hist_pays(1, 32832, 132));
  EXPECT_TRUE(topk_score_hist_pays(32, 32832, 132));
  EXPECT_TRUE(topk_score_hist_pays(64, 32832, 132));
  EXPECT_FALSE(topk_score_hist_pays(67, 32832, 132));
  EXPECT_FALSE(topk_score_hist_pays(128, 8256, 132));
  EXPECT_FALSE(topk_score_hist_pays(1, 4096, 132));
}

// The flat form's workspace size and fit rule (CPU): 2 KiB + 8 bytes per position rounded up to 4096 per request;
// at most 64 blocks per request, B x blocks within half the resident blocks.
TEST(Topk, FlatFormSizeAndFitRule) {
  EXPECT_EQ(topk_flat_workspace_bytes(1, 32832), size_t(2048 + 9 * 4096 * 8));
  EXPECT_EQ(topk_flat_workspace_bytes(3, 4096), size_t(3 * (2048 + 4096 * 8)));
  EXPECT_TRUE(topk_flat_fits(1, 262144, 128));
  EXPECT_FALSE(topk_flat_fits(1, 262145, 100000));  // 65 blocks
  EXPECT_TRUE(topk_flat_fits(8, 32832, 144));       // 8 x 9 x 2 = 144
  EXPECT_FALSE(topk_flat_fits(8, 32832, 143));
  TopkParams p{reinterpret_cast<const float*>(16), 32832, reinterpret_cast<const int32_t*>(16),
               reinterpret_cast<const int32_t*>(16), 513, reinterpret_cast<int32_t*>(16), 1, 2048};
  p.flat_workspace = reinterpret_cast<void*>(16);
  p.flat_workspace_bytes = topk_flat_workspace_bytes(1, 32832) - 1;
  EXPECT_THROW(validate_topk_params(p), Error);
  p.flat_workspace_bytes += 1;
  EXPECT_NO_THROW(validate_topk_params(p));
}
