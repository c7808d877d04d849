// L2 prefetch (kernels/l2_prefetch.h) on the GPU: it launches for GLM-5's o_proj plan and for ragged
// shapes (short last periods, strided rows, a sub-matrix), reports no error, and leaves every byte of the
// matrix and of its neighbours as it was (a prefetch reads and writes nothing). Whether the lines are still
// in L2 when the consumer runs is a performance question: the decode-step benchmark measures it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "kernels/l2_prefetch.h"
#include "kernel_test_util.h"

namespace glm5 {
namespace {

void check(int64_t rows, int64_t row_bytes, int64_t row_stride, double fraction, uint64_t seed, bool evict_last = false) {
  std::mt19937_64 rng(seed);
  const int64_t pad = 4096;  // bytes before and after the matrix, checked too
  std::vector<unsigned char> host(size_t(pad + rows * row_stride + pad));
  for (auto& b : host) b = static_cast<unsigned char>(rng());
  Buffer d = to_device(host);
  L2PrefetchParams p = l2_prefetch_plan(d.as<unsigned char>() + pad, rows, row_bytes, row_stride, fraction);
  p.evict_last = evict_last;
  l2_prefetch_cuda(p, nullptr);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<unsigned char> got = to_host<unsigned char>(d);
  std::printf("l2_prefetch rows=%lld row_bytes=%lld stride=%lld fraction=%.2f evict_last=%d: %lld bytes asked\n",
              (long long)rows, (long long)row_bytes, (long long)row_stride, fraction, int(evict_last),
              (long long)l2_prefetch_bytes(p));
  EXPECT_EQ(std::memcmp(host.data(), got.data(), host.size()), 0) << "a prefetch changed memory";
}

TEST(GpuL2Prefetch, LeavesMemoryAsItWas) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  check(6144, 16384, 16384, 0.4, seed);      // GLM-5 o_proj, FP8, --tp 1
  check(6144, 2048, 16384, 1.0, seed + 1);   // its --tp 8 column shard (rows 16384 apart)
  check(7, 5000, 5008, 0.33, seed + 2);      // ragged: a short last period
  check(1, 16, 16, 0.01, seed + 3);          // one 16-byte request
  check(6144, 16384, 16384, 0.4, seed + 4, true);  // with the evict_last cache hint
  check(7, 5000, 5008, 0.33, seed + 5, true);
}

}  // namespace
}  // namespace glm5
