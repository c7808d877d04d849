// GPU top-k (kernels/indexer.cu) on the paths the radix select takes: undecided keys kept in shared
// memory or re-read from the scores (more than 32,768 keys share the top 11 bits), 16-byte or scalar
// loads (odd score_stride), k small and large; the slots must equal the CPU twin's exactly.
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
