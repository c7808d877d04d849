// GPU top-k (kernels/indexer.cu) on the paths the radix select takes: undecided keys kept in shared
// memory or re-read (more than 16,384 of a block's keys share the top 11 bits), 16-byte or scalar
// loads (odd score_stride), k small and large; the slots must equal the CPU twin's exactly.
// Also the multi-block (cluster) split of one request at small batch.
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

TEST(GpuTopkPaths, EqualsCpuOnEveryPath) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int stride : {131072, 100003}) {  // aligned rows (vector loads) and odd rows (scalar loads)
    for (int k : {2048, 100, 40000}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE("stride " + std::to_string(stride) + " k " + std::to_string(k) + " seed " + std::to_string(seed));
      const int max_pages = (stride + 63) / 64;
      std::vector<int32_t> seq = {std::min(stride, 131072), 100000, 90000, 60000, 33000, 8193};
      const int B = int(seq.size());
      std::vector<int32_t> bt(size_t(B) * max_pages);
      for (size_t i = 0; i < bt.size(); ++i) bt[i] = int32_t(i);
      std::mt19937_64 g(seed);
      std::shuffle(bt.begin(), bt.end(), g);
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
      topk_cuda({ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k},
                nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<int32_t> got = to_host<int32_t>(dout, want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "request " << i / k << " rank " << i % k;
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
    std::vector<int32_t> bt(size_t(B) * max_pages);
    for (size_t i = 0; i < bt.size(); ++i) bt[i] = int32_t(i);
    std::mt19937_64 g(seed);
    std::shuffle(bt.begin(), bt.end(), g);
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
    topk_cuda({ds.as<float>(), stride, dq.as<int32_t>(), db.as<int32_t>(), max_pages, dout.as<int32_t>(), B, k},
              nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<int32_t> got = to_host<int32_t>(dout, want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "request " << i / k << " (seq_len " << seq[i / k] << ") rank " << i % k;
  }
}
