// GPU tests of kernels/indexer.h: CUDA scores against the CPU twin, CUDA top-k equal to the CPU
// twin's (same scores in: identical slots out, ties and -1 padding included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/indexer.h"
#include "kernels/kv_cache.h"
#include "kernel_test_util.h"

using namespace glm5;

namespace {


}  // namespace

namespace {

// indexer_score_cuda against the CPU twin: -inf exactly where the twin has it, else within 1e-5 of
// the largest |score| (the GPU sums in another order; at Hi 32 it runs on TF32 tensor cores).
// `varied`: head h's queries scaled by 2^(5 (h % 7) - 15) (the FP16 path's per-head exponent), and
// the block-table entries of pages wholly past seq_len set to -1 (unmapped: -inf, never read).
// `fresh` > 0 (IndexerScoreParams::fresh): the device cache starts with other keys at each request's last `fresh`
// positions and indexer_key_write_cuda writes the right ones on the stream just before the score kernel (a PDL
// launch): the kernel's early loads may see the old keys, its reload after the wait must not.
void check_scores(bool fp8, int Hi, int D, int max_pages, const std::vector<int32_t>& seq, bool varied = false,
                  int fresh = 0) {
  const uint64_t seed = fresh_seed();
  const int B = int(seq.size());
  SCOPED_TRACE("fp8 " + std::to_string(fp8) + " Hi " + std::to_string(Hi) + " D " + std::to_string(D) + " B " +
               std::to_string(B) + " max_pages " + std::to_string(max_pages) + " seed " + std::to_string(seed));
  const IndexerLayout il{D, fp8};
  std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed);
  if (varied)
    for (int b = 0; b < B; ++b)
      for (int pg = (seq[b] + 63) / 64; pg < max_pages; ++pg) bt[size_t(b) * max_pages + pg] = -1;
  const int slots_n = B * max_pages * 64;
  std::vector<uint8_t> cache(size_t(B) * max_pages * il.page_bytes());
  std::vector<float> keys(size_t(slots_n) * D);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = rng_normal(seed, 21, i);
  std::vector<int32_t> slots(slots_n);
  for (int s = 0; s < slots_n; ++s) slots[s] = s;
  indexer_key_write_cpu({keys.data(), slots.data(), cache.data(), il, slots_n});
  std::vector<float> q(size_t(B) * Hi * D), w(size_t(B) * Hi);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = rng_normal(seed, 22, i) * (varied ? std::ldexp(1.f, 5 * int(i / D % Hi % 7) - 15) : 1.f);
  for (size_t i = 0; i < w.size(); ++i) w[i] = rng_normal(seed, 23, i);
  const size_t n_scores = size_t(B) * max_pages * 64;
  std::vector<float> want(n_scores);
  IndexerScoreParams p{.q = q.data(), .head_weights = w.data(), .head_weight_scale = 1.f / std::sqrt(float(Hi)),
                       .key_cache = cache.data(), .layout = il, .block_table = bt.data(), .max_pages = max_pages,
                       .seq_lens = seq.data(), .scores = want.data(), .B = B, .Hi = Hi,
                       .softmax_scale = 1.f / std::sqrt(float(D))};
  indexer_score_cpu(p);
  std::vector<float> fresh_keys;
  std::vector<int32_t> fresh_slots;
  for (int b = 0; b < B; ++b)
    for (int pos = std::max(0, seq[b] - fresh); pos < seq[b]; ++pos) {
      const int32_t page = bt[size_t(b) * max_pages + pos / 64];
      fresh_slots.push_back(page * 64 + pos % 64);
      fresh_keys.insert(fresh_keys.end(), keys.begin() + size_t(fresh_slots.back()) * D,
                        keys.begin() + size_t(fresh_slots.back() + 1) * D);
    }
  if (!fresh_slots.empty()) {  // stale keys on the device where the write below puts the right ones
    std::vector<float> stale(fresh_keys.size());
    for (size_t i = 0; i < stale.size(); ++i) stale[i] = 10.f * rng_normal(seed, 24, i);
    indexer_key_write_cpu({stale.data(), fresh_slots.data(), cache.data(), il, int(fresh_slots.size())});
  }
  Buffer dq = to_device(q, "q"), dw = to_device(w, "w"), dc = to_device(cache, "cache"), db = to_device(bt, "bt"),
         ds = to_device(seq, "seq"), dout(Where::Device, n_scores * 4, "scores");
  if (!fresh_slots.empty()) {
    Buffer dk = to_device(fresh_keys, "fresh keys"), dsl = to_device(fresh_slots, "fresh slots");
    CUDA_CHECK(cudaDeviceSynchronize());
    indexer_key_write_cuda({dk.as<float>(), dsl.as<int32_t>(), dc.as<uint8_t>(), il, int(fresh_slots.size())}, nullptr);
    p.fresh = fresh;
    p.q = dq.as<float>();
    p.head_weights = dw.as<float>();
    p.key_cache = dc.as<uint8_t>();
    p.block_table = db.as<int32_t>();
    p.seq_lens = ds.as<int32_t>();
    p.scores = dout.as<float>();
    indexer_score_cuda(p, nullptr);  // right behind the write (PDL)
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  p.q = dq.as<float>();
  p.head_weights = dw.as<float>();
  p.key_cache = dc.as<uint8_t>();
  p.block_table = db.as<int32_t>();
  p.seq_lens = ds.as<int32_t>();
  p.scores = dout.as<float>();
  if (fresh_slots.empty()) indexer_score_cuda(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got = to_host<float>(dout, n_scores);
  double max_abs = 0, max_ref = 0;
  for (size_t i = 0; i < n_scores; ++i) {
    if (std::isinf(want[i])) {
      ASSERT_EQ(got[i], want[i]) << "position " << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(got[i])) << "position " << i;
    max_abs = std::max(max_abs, double(std::fabs(got[i] - want[i])));
    max_ref = std::max(max_ref, double(std::fabs(want[i])));
  }
  std::printf("indexer_score fp8=%d Hi=%d D=%d B=%d positions %d fresh %d: max abs err %.3g (max |score| %.3g)\n",
              fp8, Hi, D, B, max_pages * 64, fresh, max_abs, max_ref);
  EXPECT_LE(max_abs, 1e-5 * std::max(1.0, max_ref));
  if (fresh) return;
  // IndexerScoreParams::top_hist / TopkParams::top_hist: the kernel's histogram of first digits equals the one of its
  // own scores (positions < seq_len), and the top-k that reads it returns the twin's slots on those scores and leaves
  // it zero; both top-k forms, k below and above the lengths (the short path also consumes it).
  const size_t nh = size_t(B) * kTopkHistCopies * kTopkHistBins;
  std::vector<uint32_t> hist_want(size_t(B) * kTopkHistBins, 0u);
  for (int b = 0; b < B; ++b)
    for (int pos = 0; pos < std::min(seq[b], max_pages * 64); ++pos)
      ++hist_want[size_t(b) * kTopkHistBins + topk_hist_bin(got[size_t(b) * max_pages * 64 + pos])];
  Buffer dh = to_device(std::vector<uint32_t>(nh, 0u), "top_hist");
  for (int k : {256, 2048})
    for (bool gather : {true, false}) {
      SCOPED_TRACE("top-k k " + std::to_string(k) + " gather " + std::to_string(gather));
      p.top_hist = dh.as<unsigned>();
      indexer_score_cuda(p, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      ASSERT_EQ(to_host<float>(dout, n_scores), got) << "the histogram changed the scores";
      const std::vector<uint32_t> copies = to_host<uint32_t>(dh, nh);
      std::vector<uint32_t> hist_got(size_t(B) * kTopkHistBins, 0u);  // the sum of the copies
      for (size_t i = 0; i < nh; ++i) hist_got[i / (kTopkHistCopies * kTopkHistBins) * kTopkHistBins + i % kTopkHistBins] += copies[i];
      ASSERT_EQ(hist_got, hist_want);
      std::vector<int32_t> slots_want(size_t(B) * k);
      topk_cpu({got.data(), max_pages * 64, seq.data(), bt.data(), max_pages, slots_want.data(), B, k});
      Buffer dslots(Where::Device, slots_want.size() * 4, "slots");
      TopkParams t{dout.as<float>(), max_pages * 64, ds.as<int32_t>(), db.as<int32_t>(), max_pages,
                   dslots.as<int32_t>(), B, k};
      t.gather = gather;
      t.top_hist = dh.as<unsigned>();
      topk_cuda(t, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      ASSERT_EQ(to_host<int32_t>(dslots, slots_want.size()), slots_want);
      ASSERT_EQ(to_host<uint32_t>(dh, nh), std::vector<uint32_t>(nh, 0u)) << "the top-k left its histogram non-zero";
    }
}

}  // namespace

// Small contexts: Hi 32 (tensor-core path, D 32 / 64 / 128) and the fp32 kernel's shapes.
TEST(GpuIndexer, ScoresMatchCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (bool fp8 : {true, false})
    for (auto [Hi, D] : {std::pair{32, 128}, std::pair{32, 64}, std::pair{32, 32}, std::pair{16, 64},
                         std::pair{64, 128}, std::pair{5, 32}})
      check_scores(fp8, Hi, D, 20, {1, 1000, 1280});
}

// IndexerScoreParams::fresh: the new tokens' keys written by the kernel just before (PDL), at GLM-5's shape, B 1 at
// 32K + 1 (the decode step's case) and B 3 with 2 fresh positions each, one of them straddling two warps' tiles.
TEST(GpuIndexer, ScoresSeeFreshKeysWrittenJustBefore) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_scores(true, 32, 128, 520, {32769}, false, 1);
  check_scores(true, 32, 128, 40, {2017, 64, 1}, false, 2);
}

// GLM-5 shape at 131,072 positions: several pages per block on the tensor-core path (a request
// ending mid-page and pages past its end inside a block's run).
TEST(GpuIndexer, ScoresMatchCpuLongContext) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_scores(true, 32, 128, 2048, {131072, 70001});
  check_scores(false, 32, 128, 2048, {100003});
}

// Many requests (B 64) of random lengths 0..2560 (ends mid-step and mid-page, empty requests),
// unmapped pages past the ends, heads of very different magnitudes; and B 1 / 8 at 4K / 32K.
TEST(GpuIndexer, ScoresMatchCpuManyRequests) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  std::vector<int32_t> seq(64);
  for (size_t b = 0; b < seq.size(); ++b) seq[b] = int32_t(rng_uniform(seed, 41, b) * 2561.f) % 2561;
  seq[0] = 0;
  seq[1] = 2560;
  seq[2] = 33;
  for (int D : {128, 64, 32}) check_scores(true, 32, D, 40, seq, true);
  check_scores(true, 32, 128, 64, {4096}, true);
  check_scores(true, 32, 128, 512, {32768, 1, 30000, 32767, 64, 65, 31, 32}, true);
}

// Top-k on rows of <= 49,152 positions (clusters of 1..8 blocks of >= 4096 positions, or one block
// per request at B 64): random lengths, ties, -0/+0, -inf and NaN, unaligned rows (odd stride:
// scalar loads), k 2048 / 16 / 1; identical to the twin.
TEST(GpuIndexer, TopkEqualsCpuShortRows) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int stride : {49152, 32768, 4096, 40001})
    for (int B : {1, 64})
      for (int k : {2048, 16, 1}) {
        const int max_pages = (stride + 63) / 64;
        std::vector<int32_t> seq(B);
        for (int b = 0; b < B; ++b) seq[b] = int32_t(rng_uniform(seed, 51, uint64_t(b) * 131 + stride) * stride);
        seq[0] = std::min(stride, max_pages * 64);
        if (B > 8) {
          seq[1] = k;
          seq[2] = k + 1;
          seq[3] = 0;
          seq[4] = std::min(stride, 2 * k + 7);
        }
        std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed + stride);
        std::vector<float> s(size_t(B) * stride);
        for (size_t i = 0; i < s.size(); ++i) s[i] = rng_normal(seed, 52, i);
        if (B > 8)
          for (int i = 0; i < stride; ++i) {  // rows 5..7: 7 distinct values; all +-0; 3 values + specials
            s[size_t(5) * stride + i] = std::floor(rng_uniform(seed, 53, i) * 7.f) - 3.f;
            s[size_t(6) * stride + i] = i % 3 == 0 ? -0.f : 0.f;
            const float u = rng_uniform(seed, 54, i);
            s[size_t(7) * stride + i] = u < 0.05f ? -std::numeric_limits<float>::infinity()
                                        : u < 0.06f ? std::numeric_limits<float>::quiet_NaN()
                                        : u < 0.5f  ? 1.f
                                                    : 2.f;
          }
        std::vector<int32_t> want(size_t(B) * k);
        TopkParams p{s.data(), stride, seq.data(), bt.data(), max_pages, want.data(), B, k};
        topk_cpu(p);
        Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
               dout(Where::Device, want.size() * 4, "slots");
        TopkParams pd{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k};
        topk_cuda(pd, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<int32_t> got = to_host<int32_t>(dout, want.size());
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << "stride " << stride << " B " << B << " k " << k << " request " << i / k
                                     << " (seq " << seq[i / k] << ") rank " << i % k;
        if (B == 1 && k == 2048)
          for (int cluster : {1, 2, 4, 8}) {  // the tuning override: every cluster size, same slots
            pd.cluster = cluster;
            topk_cuda(pd, nullptr);
            CUDA_CHECK(cudaDeviceSynchronize());
            got = to_host<int32_t>(dout, want.size());
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_EQ(got[i], want[i]) << "stride " << stride << " cluster " << cluster << " rank " << i;
          }
      }
}

// Top-k on rows of 49,153 .. 262,144 positions, k 1 .. 8193: random rows, rows rising and falling
// with position, 7 distinct values (ties across blocks), all equal, a random row ending mid-block;
// aligned and odd strides. Identical to the CPU twin.
TEST(GpuIndexer, TopkEqualsCpuLongRows) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int stride : {49153, 131072, 262144, 100003})
    for (int k : {2048, 1, 8192, 8193}) {
      const int max_pages = (stride + 63) / 64, B = 7;
      std::vector<int32_t> seq = {stride, stride, stride, stride, stride, stride - 4099, 49153};
      std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed + stride);
      std::vector<float> s(size_t(B) * stride);
      for (int i = 0; i < stride; ++i) {
        const float r = rng_normal(seed, 61, uint64_t(i));
        s[size_t(0) * stride + i] = r;
        s[size_t(1) * stride + i] = 1e-3f * float(i) + 0.1f * r;
        s[size_t(2) * stride + i] = -1e-3f * float(i) + 0.1f * r;
        s[size_t(3) * stride + i] = std::floor(rng_uniform(seed, 62, i) * 7.f) - 3.f;
        s[size_t(4) * stride + i] = i % 5 == 0 ? -0.f : 0.f;
        s[size_t(5) * stride + i] = rng_normal(seed, 63, uint64_t(i));
        s[size_t(6) * stride + i] = float(i % 1000) + 0.5f * rng_uniform(seed, 64, i);
      }
      std::vector<int32_t> want(size_t(B) * k);
      TopkParams p{s.data(), stride, seq.data(), bt.data(), max_pages, want.data(), B, k};
      topk_cpu(p);
      Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
             dout(Where::Device, want.size() * 4, "slots");
      TopkParams pd{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k};
      topk_cuda(pd, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<int32_t> got = to_host<int32_t>(dout, want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "stride " << stride << " k " << k << " request " << i / k << " rank " << i % k;
    }
}

TEST(GpuIndexer, TopkEqualsCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int k : {2048, 16, 1}) {
    const int max_pages = 3200, stride = max_pages * 64;  // up to 204,800 positions
    std::vector<int32_t> seq = {200000, 2049, k, k + 1, 0, 1000, 70000, 50000, 3};
    const int B = int(seq.size());
    std::vector<int32_t> bt = shuffled_block_table(B, max_pages, seed);
    std::vector<float> s(size_t(B) * stride);
    for (size_t i = 0; i < s.size(); ++i) s[i] = rng_normal(seed, 31, i);
    for (int i = 0; i < stride; ++i) {  // request 6: heavy ties; request 7: all equal, with -0/+0 and -inf
      s[size_t(6) * stride + i] = std::floor(rng_uniform(seed, 32, i) * 7.f) - 3.f;
      s[size_t(7) * stride + i] = i % 3 == 0 ? -0.f : 0.f;
    }
    s[size_t(7) * stride + 5] = -std::numeric_limits<float>::infinity();
    std::vector<int32_t> want(size_t(B) * k);
    TopkParams p{s.data(), stride, seq.data(), bt.data(), max_pages, want.data(), B, k};
    topk_cpu(p);
    Buffer ds = to_device(s, "scores"), dq = to_device(seq, "seq"), db = to_device(bt, "bt"),
           dout(Where::Device, want.size() * 4, "slots");
    TopkParams pd{ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k};
    topk_cuda(pd, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<int32_t> got = to_host<int32_t>(dout, want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "k " << k << " request " << i / k << " rank " << i % k;
    if (k == 2048) {  // timing, not a check
      cudaEvent_t a, e;
      CUDA_CHECK(cudaEventCreate(&a));
      CUDA_CHECK(cudaEventCreate(&e));
      CUDA_CHECK(cudaEventRecord(a));
      for (int r = 0; r < 10; ++r) topk_cuda(pd, nullptr);
      CUDA_CHECK(cudaEventRecord(e));
      CUDA_CHECK(cudaEventSynchronize(e));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, a, e));
      std::printf("topk k=2048 over %d requests (longest 200000): %.1f us\n", B, ms * 100.0);
      CUDA_CHECK(cudaEventDestroy(a));
      CUDA_CHECK(cudaEventDestroy(e));
    }
  }
}
