// GPU top-k (kernels/indexer.cu) on the paths the radix select takes: undecided keys kept in shared
// memory or re-read (more than 16,384 of a block's keys share the top 11 bits), 16-byte or scalar
// loads (odd score_stride), k small and large; the slots must equal the CPU twin's exactly.
// Also the multi-block (cluster) split of one request at small batch, and both forms of the passes after the
// first: the gathered one (TopkParams::gather, the default: the top digit's keys resolved by one block of the
// cluster) and the three cluster passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/indexer.h"
#include "kernel_test_util.h"

using namespace glm5;

namespace {

// topk_cuda with `d` (its out_slots first filled with 0x7f7f7f7f), then its slots against `want`, slot for slot.
void expect_gpu_topk(const TopkParams& d, const Buffer& dout, const std::vector<int32_t>& want) {
  CUDA_CHECK(cudaMemset(dout.data(), 0x7f, want.size() * 4));
  topk_cuda(d, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<int32_t> got = to_host<int32_t>(dout, want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "cluster " << d.cluster << " gather " << d.gather << " top_hist "
                               << (d.top_hist != nullptr) << " request " << i / d.k << " rank " << i % d.k;
}

// TopkParams::top_hist as the score kernel leaves it (built here on the host, position i counted in copy i % 8, so
// the kernel must sum the copies); then topk_cuda with it against `want`, and the histogram zero afterwards. `d`'s
// score_stride must be max_pages * 64.
void expect_gpu_topk_with_hist(TopkParams d, const Buffer& dout, const std::vector<int32_t>& want,
                               const std::vector<float>& scores, const std::vector<int32_t>& seq) {
  const std::vector<uint32_t> hist = topk_hist_spread_cpu(scores.data(), d.B, d.score_stride, seq.data());
  Buffer dh = to_device(hist, "top_hist");
  d.top_hist = dh.as<unsigned>();
  expect_gpu_topk(d, dout, want);
  ASSERT_EQ(to_host<uint32_t>(dh, hist.size()), std::vector<uint32_t>(hist.size(), 0u)) << "top_hist left non-zero";
}

}  // namespace

TEST(GpuTopkPaths, EqualsCpuOnEveryPath) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int stride : {131072, 100003}) {  // aligned rows (vector loads) and odd rows (scalar loads)
    for (int k : {2048, 100, 40000}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE("stride " + std::to_string(stride) + " k " + std::to_string(k) + " seed " + std::to_string(seed));
      const int max_pages = (stride + 63) / 64;
      std::vector<int32_t> seq = {std::min(stride, 131072), 100000, 90000, 60000, 33000, 8193};
      const int B = int(seq.size());
      std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed);
      std::vector<float> s(size_t(B) * stride);
      for (int i = 0; i < stride; ++i) {
        const size_t r = size_t(i);
        s[r] = rng_normal(seed, 1, i);                                    // spread: shared-memory path
        s[stride + r] = 1.f + 0.2499f * rng_uniform(seed, 2, i);          // one top digit: re-read path
        s[2 * size_t(stride) + r] = 1.f + float(i % 5000) * 1e-6f;        // one top digit, many ties
        s[3 * size_t(stride) + r] = -rng_uniform(seed, 3, i);             // negative scores
        s[4 * size_t(stride) + r] = i % 2 ? 7.f : -std::numeric_limits<float>::infinity();
        s[5 * size_t(stride) + r] = std::floor(rng_normal(seed, 4, i) * 4.f);
      }
      std::vector<int32_t> want(size_t(B) * k);
      topk_cpu({s.data(), stride, seq.data(), bt.data(), max_pages, want.data(), B, k});
      Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
             dout(Where::Device, want.size() * 4, "slots");
      for (bool gather : {true, false}) {
        TopkParams d{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k};
        d.gather = gather;
        expect_gpu_topk(d, dout, want);
        if (stride == max_pages * 64) expect_gpu_topk_with_hist(d, dout, want, s, seq);
      }
    }
  }
}

// The cluster split (topk_cuda runs C = 8 / 4 / 2 / 1 blocks per request as B grows): B = 1, 20, 32
// and 80 at 131,072 / 204,800 positions, with every score pattern above rotated over the requests
// (ties and all-equal runs straddle the blocks' position ranges; one top digit over 200,000
// positions overflows a block's shared-memory candidates at C = 4), lengths from k + 1 to the stride.
TEST(GpuTopkPaths, ClusterSplitEqualsCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const int k = 2048;
  for (auto [B, stride] : {std::pair{1, 131072}, std::pair{20, 204800}, std::pair{32, 131072}, std::pair{80, 131072}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("B " + std::to_string(B) + " stride " + std::to_string(stride) + " seed " + std::to_string(seed));
    const int max_pages = stride / 64;
    const int lens[] = {stride, 2049, 131071, 8193, 100000, 200000, 65536, 16385};
    std::vector<int32_t> seq(B);
    for (int b = 0; b < B; ++b) seq[b] = std::min(stride, lens[b % 8]);
    std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed);
    std::vector<float> s(size_t(B) * stride);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < stride; ++i) {
        float& v = s[size_t(b) * stride + i];
        const uint64_t at = uint64_t(b) * stride + i;
        switch ((b + 3) % 7) {
          case 0: v = rng_normal(seed, 1, at); break;
          case 1: v = 1.f + 0.2499f * rng_uniform(seed, 2, at); break;       // one top digit
          case 2: v = 1.f + float(i % 5000) * 1e-6f; break;                  // one top digit, ties
          case 3: v = -rng_uniform(seed, 3, at); break;
          case 4: v = i % 2 ? 7.f : -std::numeric_limits<float>::infinity(); break;
          case 5: v = std::floor(rng_normal(seed, 4, at) * 4.f); break;     // heavy ties
          default: v = i % 3 == 0 ? -0.f : 0.f; break;                      // all equal
        }
      }
    std::vector<int32_t> want(size_t(B) * k);
    topk_cpu({s.data(), stride, seq.data(), bt.data(), max_pages, want.data(), B, k});
    Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
           dout(Where::Device, want.size() * 4, "slots");
    for (bool gather : {true, false}) {
      TopkParams d{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k};
      d.gather = gather;
      expect_gpu_topk(d, dout, want);
      expect_gpu_topk_with_hist(d, dout, want, s, seq);  // B > 1 clusters, n <= k rows, the fallback's top digit
    }
  }
}

// A histogram that does not count the request's positions (a score kernel run without its top-k before): the kernel
// falls back to its own first pass, returns the twin's slots, and leaves the histogram zero.
TEST(GpuTopkPaths, MismatchedHistogramFallsBackToItsOwnPass) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int k = 2048, n = 32769, stride = 32832, max_pages = stride / 64;
  std::vector<float> s(stride, 0.f);
  for (int i = 0; i < n; ++i) s[i] = rng_normal(seed, 7, i);
  std::vector<int32_t> seq = {n}, bt(max_pages);
  for (int i = 0; i < max_pages; ++i) bt[i] = i;
  std::vector<int32_t> want(k);
  topk_cpu({s.data(), stride, seq.data(), bt.data(), max_pages, want.data(), 1, k});
  Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
         dout(Where::Device, want.size() * 4, "slots");
  std::vector<uint32_t> hist(size_t(kTopkHistCopies) * kTopkHistBins, 0u);
  for (int i = 0; i < n; ++i) hist[topk_hist_bin(s[i])] += 2;  // every position twice
  Buffer dh = to_device(hist, "top_hist");
  TopkParams d{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), 1, k};
  d.top_hist = dh.as<unsigned>();
  expect_gpu_topk(d, dout, want);
  ASSERT_EQ(to_host<uint32_t>(dh, hist.size()), std::vector<uint32_t>(hist.size(), 0u));
}

// The decode step's batch-1 shape (32,768 + 1 positions, C = 8) with the gathered form at its capacity: `top`
// keys share the selected top digit (distinct values in [1, 1.25), at shuffled positions so every block sends
// some), the rest lie below it; 16,384 is the most rank 0 holds (gathered), 16,385 falls back to the cluster
// passes. Also normal and lognormal scores as the step's indexer gives them, and every cluster size forced.
TEST(GpuTopkPaths, GatheredFormAtCapacityAndStepShape) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const int k = 2048, n = 32769, stride = 32832, max_pages = stride / 64;
  for (int pattern = 0; pattern < 4; ++pattern) {
    const uint64_t seed = fresh_seed();
    const int top = pattern == 0 ? 16384 : 16385;
    SCOPED_TRACE("pattern " + std::to_string(pattern) + " seed " + std::to_string(seed));
    std::vector<float> s(stride, 0.f);
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    std::mt19937_64 g(seed);
    std::shuffle(pos.begin(), pos.end(), g);
    for (int i = 0; i < n; ++i) {
      float v;
      if (pattern < 2) v = i < top ? 1.f + 0.2499f * float(i) / float(top) : -1.f - rng_uniform(seed, 1, i);
      else if (pattern == 2) v = rng_normal(seed, 2, i);
      else v = std::exp(rng_normal(seed, 3, i));
      s[pos[i]] = v;
    }
    std::vector<int32_t> seq = {n}, bt(max_pages);
    for (int i = 0; i < max_pages; ++i) bt[i] = max_pages - 1 - i;
    std::vector<int32_t> want(k);
    topk_cpu({s.data(), stride, seq.data(), bt.data(), max_pages, want.data(), 1, k});
    Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
           dout(Where::Device, want.size() * 4, "slots");
    for (int cluster : {0, 1, 2, 4, 8})
      for (bool gather : {true, false}) {
        TopkParams d{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), 1, k,
                     cluster};
        d.gather = gather;
        expect_gpu_topk(d, dout, want);
        expect_gpu_topk_with_hist(d, dout, want, s, seq);  // at and one past the gathered form's capacity
      }
  }
}

// The flat form (TopkParams::flat_workspace with top_hist: a grid of 512-thread blocks per request, the k-th key
// resolved by the last block to finish): B 1 / 8 at the step's 32,768 + 1 positions, B 2 / 3 at 131,072, every score
// pattern rotated over the requests (ties and all-equal runs straddling the blocks' 4096-position ranges, one top
// digit over all positions, n <= k rows), each twice in a row (the ticket and generation words carried from one
// launch to the next) and once with a histogram that does not count the positions (every key a candidate). The
// slots must equal the CPU twin's, the histogram and every request's ticket word zero afterwards, and each request
// with n > k must have bumped its generation word once per launch (the flat form ran, and its last block published).
TEST(GpuTopkPaths, FlatFormEqualsCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const int k = 2048;
  for (auto [B, stride] : {std::pair{1, 32832}, std::pair{3, 131072}, std::pair{8, 32832}, std::pair{2, 131072}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("B " + std::to_string(B) + " stride " + std::to_string(stride) + " seed " + std::to_string(seed));
    const int max_pages = stride / 64;
    ASSERT_TRUE(topk_flat_fits_here(B, stride)) << "the flat form must run for this test to mean anything";
    const int lens[] = {32769, stride, 2049, 2048, 4097, 8193, 100, stride - 5};
    std::vector<int32_t> seq(B);
    for (int b = 0; b < B; ++b) seq[b] = std::min(stride, lens[b % 8]);
    std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed);
    if (B > 1) bt[size_t(max_pages) + 3] = -1;  // an unmapped page below seq_len: slot -1 (the kernel's rule)
    std::vector<float> s(size_t(B) * stride);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < stride; ++i) {
        float& v = s[size_t(b) * stride + i];
        const uint64_t at = uint64_t(b) * stride + i;
        switch (b % 8) {
          case 0: v = std::exp(rng_normal(seed, 1, at)); break;              // lognormal, as the indexer gives
          case 1: v = 1.f + 0.2499f * rng_uniform(seed, 2, at); break;       // one top digit
          case 2: v = 1.f + float(i % 5000) * 1e-6f; break;                  // one top digit, ties
          case 3: v = std::floor(rng_normal(seed, 4, at) * 4.f); break;     // heavy ties across blocks
          case 4: v = i % 3 == 0 ? -0.f : 0.f; break;                       // all equal
          case 5: v = -rng_uniform(seed, 3, at); break;
          case 6: v = rng_normal(seed, 5, at); break;
          default: v = i % 2 ? 7.f : -std::numeric_limits<float>::infinity(); break;
        }
      }
    // The CPU twin rejects an unmapped page below seq_len; it gives the same slots with the page mapped (to an id
    // no other page has), except -1 for the positions of that page.
    std::vector<int32_t> bt_cpu = bt;
    const int32_t spare = B * max_pages;
    if (B > 1) bt_cpu[size_t(max_pages) + 3] = spare;
    std::vector<int32_t> want(size_t(B) * k);
    topk_cpu({s.data(), stride, seq.data(), bt_cpu.data(), max_pages, want.data(), B, k});
    for (int32_t& w : want)
      if (w >= spare * kPageSize) w = -1;
    Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
           dout(Where::Device, want.size() * 4, "slots");
    const size_t ws_bytes = topk_flat_workspace_bytes(B, stride);
    Buffer dws(Where::Device, ws_bytes, "flat workspace");
    CUDA_CHECK(cudaMemset(dws.data(), 0, ws_bytes));
    TopkParams d{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k};
    d.flat_workspace = dws.data();
    d.flat_workspace_bytes = ws_bytes;
    for (int round = 0; round < 2; ++round) expect_gpu_topk_with_hist(d, dout, want, s, seq);
    // A histogram counting every position twice: every key becomes a candidate of the last block.
    const size_t row = size_t(kTopkHistCopies) * kTopkHistBins;
    std::vector<uint32_t> twice(size_t(B) * row, 0u);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < seq[b]; ++i) twice[b * row + topk_hist_bin(s[size_t(b) * stride + i])] += 2;
    Buffer dh = to_device(twice, "top_hist");
    TopkParams m = d;
    m.top_hist = dh.as<unsigned>();
    expect_gpu_topk(m, dout, want);
    ASSERT_EQ(to_host<uint32_t>(dh, twice.size()), std::vector<uint32_t>(twice.size(), 0u));
    const std::vector<uint32_t> words = to_host<uint32_t>(dws, ws_bytes / 4);
    for (int b = 0; b < B; ++b) {  // header of request b at word b * kTopkFlatHeaderWords: ticket, generation
      EXPECT_EQ(words[size_t(b) * kTopkFlatHeaderWords], 0u) << "request " << b << "'s ticket left non-zero";
      EXPECT_EQ(words[size_t(b) * kTopkFlatHeaderWords + 1], seq[b] > k ? 3u : 0u)
          << "request " << b << "'s generation: one bump per launch with n > k";
    }
  }
}

