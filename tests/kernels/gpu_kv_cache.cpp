// GPU tests of kernels/kv_cache.h: the CUDA writers and fill produce the CPU twins' bytes exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernel_test_util.h"

using namespace glm5;

namespace {

// Random values with a wide dynamic range (some groups tiny, some huge, some exact zeros), so the
// e4m3 subnormal and saturation paths and the amax == 0 case are exercised.
std::vector<float> wide_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float magnitude = std::pow(10.f, 6.f * rng_uniform(seed, 1, i / 16) - 3.f);
    v[i] = magnitude * rng_normal(seed, 2, i);
    if (rng_uniform(seed, 3, i) < 0.02f) v[i] = 0.f;
  }
  return v;
}

size_t first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return i;
  return a.size();
}

}  // namespace

TEST(GpuKvCache, WriteMatchesCpuBytes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (auto [L, R, fp8] : {std::tuple{512, 64, true}, std::tuple{64, 32, true}, std::tuple{512, 64, false},
                           std::tuple{256, 6, true}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("L " + std::to_string(L) + " R " + std::to_string(R) + " fp8 " + std::to_string(fp8) + " seed " +
                 std::to_string(seed));
    const LatentLayout l = make_latent_layout(L, R, fp8);
    const int B = 37, capacity = 300, ls = L + 8, rs = R + 2;
    std::vector<float> latent = wide_values(size_t(B) * ls, seed), rope = wide_values(size_t(B) * rs, seed + 1);
    for (int i = 0; i < L; ++i) latent[i] = 0.f;  // request 0: an all-zero row
    std::vector<int32_t> slots(B);
    for (int b = 0; b < B; ++b) slots[b] = b % 9 == 4 ? -1 : (b * 7 + 3) % capacity;
    std::vector<uint8_t> pool(size_t(capacity) * l.row_bytes);
    for (size_t i = 0; i < pool.size(); ++i) pool[i] = uint8_t(i * 31);
    Buffer d_lat = to_device(latent, "latent"), d_rope = to_device(rope, "rope"), d_slots = to_device(slots, "slots"),
           d_pool = to_device(pool, "pool");
    kv_write_cpu({latent.data(), rope.data(), ls, rs, slots.data(), pool.data(), l, B});
    kv_write_cuda({d_lat.as<float>(), d_rope.as<float>(), ls, rs, d_slots.as<int32_t>(), d_pool.as<uint8_t>(), l, B},
                  nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint8_t> got = to_host<uint8_t>(d_pool);
    const size_t d = first_diff(pool, got);
    ASSERT_EQ(d, pool.size()) << "first differing byte " << d << " (row " << d / l.row_bytes << ", byte "
                              << d % l.row_bytes << "): cpu " << int(pool[d]) << " gpu " << int(got[d]);
  }
}

TEST(GpuKvCache, IndexerKeyWriteMatchesCpuBytes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (auto [D, fp8] : {std::pair{128, true}, std::pair{64, true}, std::pair{128, false}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("D " + std::to_string(D) + " seed " + std::to_string(seed));
    const IndexerLayout il{D, fp8};
    const int B = 50, pages = 4;
    std::vector<float> key = wide_values(size_t(B) * D, seed);
    std::vector<int32_t> slots(B);
    for (int b = 0; b < B; ++b) slots[b] = b == 7 ? -1 : (b * 5 + 1) % (pages * 64);
    std::vector<uint8_t> cache(size_t(pages) * il.page_bytes(), 0x5a);
    Buffer d_key = to_device(key, "key"), d_slots = to_device(slots, "slots"), d_cache = to_device(cache, "cache");
    indexer_key_write_cpu({key.data(), slots.data(), cache.data(), il, B});
    indexer_key_write_cuda({d_key.as<float>(), d_slots.as<int32_t>(), d_cache.as<uint8_t>(), il, B}, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint8_t> got = to_host<uint8_t>(d_cache);
    ASSERT_EQ(first_diff(cache, got), cache.size());
  }
}

TEST(GpuKvCache, FillMatchesCpuBytes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (auto [L, R, D] : {std::tuple{512, 64, 128}, std::tuple{64, 32, 64}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("L " + std::to_string(L) + " seed " + std::to_string(seed));
    const LatentLayout l = make_latent_layout(L, R, true);
    const IndexerLayout il{D, true};
    const int capacity = 640;
    std::vector<uint8_t> pool(size_t(capacity) * l.row_bytes, 0), idx(size_t(capacity / 64) * il.page_bytes(), 0);
    Buffer d_pool = to_device(pool, "pool"), d_idx = to_device(idx, "indexer cache");
    kv_fill_random_cpu({pool.data(), l, idx.data(), il, 5, 600, seed});
    kv_fill_random_cuda({d_pool.as<uint8_t>(), l, d_idx.as<uint8_t>(), il, 5, 600, seed}, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    ASSERT_EQ(first_diff(pool, to_host<uint8_t>(d_pool)), pool.size());
    ASSERT_EQ(first_diff(idx, to_host<uint8_t>(d_idx)), idx.size());
  }
}
