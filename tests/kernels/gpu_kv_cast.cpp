// GPU tests of kernels/kv_cast.h: CUDA cast / gather-cast equal the CPU twins bit for bit, on the
// 16-byte path (GLM-5 rows) and the 4-byte path (glm5-tiny 132-byte rows, misaligned output).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernel_test_util.h"

using namespace glm5;


TEST(GpuKvCast, CastAndGatherCastMatchCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (auto [L, R, out_offset] : {std::tuple{512, 64, 0}, std::tuple{64, 32, 0}, std::tuple{512, 64, 4},
                                  std::tuple{256, 6, 0}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("L " + std::to_string(L) + " R " + std::to_string(R) + " out offset " + std::to_string(out_offset) +
                 " seed " + std::to_string(seed));
    const LatentLayout l = make_latent_layout(L, R, true);
    const int rows = 1000, W = L + R;
    std::vector<uint8_t> pool(size_t(rows) * l.row_bytes);
    kv_fill_random_cpu({pool.data(), l, nullptr, {}, 0, rows, seed});
    Buffer d_pool(Where::Device, pool.size(), "pool");
    d_pool.upload(pool.data(), pool.size());
    kv_fill_random_cuda({d_pool.as<uint8_t>(), l, nullptr, {}, 0, rows, seed}, nullptr);  // same bytes

    std::vector<uint16_t> want(size_t(rows) * W);
    kv_cast_cpu({pool.data(), l, want.data(), rows});
    Buffer d_out(Where::Device, want.size() * 2 + out_offset, "bf16 pool");
    uint16_t* out = reinterpret_cast<uint16_t*>(d_out.as<uint8_t>() + out_offset);
    kv_cast_cuda({d_pool.as<uint8_t>(), l, out, rows}, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> got = to_host<uint16_t>(d_out, want.size(), out_offset);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "row " << i / W << " value " << i % W;

    std::vector<int32_t> idx(777);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i % 11 == 3 ? -1 : int32_t(rng_uniform(seed, 5, i) * rows);
    std::vector<uint16_t> gwant(idx.size() * W);
    std::vector<int32_t> cwant(idx.size());
    kv_gather_cast_cpu({pool.data(), l, idx.data(), gwant.data(), cwant.data(), int64_t(idx.size())});
    Buffer d_idx(Where::Device, idx.size() * 4, "indices"), d_cidx(Where::Device, idx.size() * 4, "compact");
    d_idx.upload(idx.data(), idx.size() * 4);
    kv_gather_cast_cuda({d_pool.as<uint8_t>(), l, d_idx.as<int32_t>(), out, d_cidx.as<int32_t>(), int64_t(idx.size())},
                        nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> ggot = to_host<uint16_t>(d_out, gwant.size(), out_offset);
    EXPECT_EQ(to_host<int32_t>(d_cidx, idx.size()), cwant);
    for (size_t i = 0; i < gwant.size(); ++i)
      ASSERT_EQ(ggot[i], gwant[i]) << "gathered row " << i / W << " value " << i % W;
  }
}

// Not a pass/fail check: the achieved bandwidth of the full-pool cast at GLM-5 size (495,000 rows),
// the cost the `cast` path pays per layer per step.
TEST(GpuKvCast, Glm5PoolCastBandwidth) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const LatentLayout l = make_latent_layout(512, 64, true);
  const int64_t rows = 495000;
  Buffer pool(Where::Device, size_t(rows) * l.row_bytes, "pool"), out(Where::Device, size_t(rows) * 1152, "bf16");
  kv_fill_random_cuda({pool.as<uint8_t>(), l, nullptr, {}, 0, rows, 1}, nullptr);
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr);  // warm-up
  const int reps = 20;
  CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) kv_cast_cuda({pool.as<uint8_t>(), l, out.as<uint16_t>(), rows}, nullptr);
  CUDA_CHECK(cudaEventRecord(b));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  const double us = 1000.0 * ms / reps, bytes = double(rows) * (l.row_bytes + 1152);
  std::printf("kv_cast GLM-5 pool: %lld rows, %.1f MB, %.1f us, %.0f GB/s\n", (long long)rows, bytes / 1e6, us,
              bytes / us / 1e3);
  RecordProperty("us", std::to_string(us));
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
}
