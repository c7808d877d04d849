// CPU tests of the two cast paths (kernels/kv_cast.h): whole-pool cast and gather-cast.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernel_test_util.h"

using namespace glm5;


class KvCast : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(KvCast, WholePoolDequantizesEveryRow) {
  const auto [L, R] = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const LatentLayout l = make_latent_layout(L, R, true);
  const int rows = 97, W = L + R;
  std::vector<uint8_t> pool(size_t(rows) * l.row_bytes);
  kv_fill_random_cpu({pool.data(), l, nullptr, {}, 0, rows, seed});
  std::vector<uint16_t> out(size_t(rows) * W, 0xffff);
  kv_cast_cpu({pool.data(), l, out.data(), rows});
  double max_err = 0;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = pool.data() + size_t(r) * l.row_bytes;
    for (int i = 0; i < L; ++i) {
      float scale;
      std::memcpy(&scale, row + L + 4 * (i / l.group), 4);
      ASSERT_EQ(out[size_t(r) * W + i], float_to_bf16_bits(e4m3_bits_to_float(row[i]) * scale)) << r << "," << i;
      // Against the generator's value: e4m3 relative precision 2^-4 (plus bf16 rounding).
      const float x = rng_normal(seed, kFillStreamLatent, uint64_t(r) * L + i);
      const double err = std::fabs(bf16_bits_to_float(out[size_t(r) * W + i]) - x);
      max_err = std::max(max_err, err);
      EXPECT_LE(err, std::max(std::fabs(x) * (1.0 / 16 + 1.0 / 256), scale / 256.0)) << r << "," << i;
    }
    for (int i = 0; i < R; ++i) {
      uint16_t bits;
      std::memcpy(&bits, row + l.rope_offset() + 2 * i, 2);
      ASSERT_EQ(out[size_t(r) * W + L + i], bits);
    }
  }
  RecordProperty("max_abs_err_vs_source", sci(max_err));
}

TEST_P(KvCast, GatherCastEqualsCastRows) {
  const auto [L, R] = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const LatentLayout l = make_latent_layout(L, R, true);
  const int rows = 150, W = L + R;
  std::vector<uint8_t> pool(size_t(rows) * l.row_bytes);
  kv_fill_random_cpu({pool.data(), l, nullptr, {}, 0, rows, seed});
  std::vector<uint16_t> full(size_t(rows) * W);
  kv_cast_cpu({pool.data(), l, full.data(), rows});
  std::vector<int32_t> idx = {5, -1, 149, 0, 5, 77, -1, 12};
  std::vector<uint16_t> out(idx.size() * W, 0x1234);
  std::vector<int32_t> compact(idx.size(), 99);
  kv_gather_cast_cpu({pool.data(), l, idx.data(), out.data(), compact.data(), int64_t(idx.size())});
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0) {
      EXPECT_EQ(compact[i], -1);
      for (int c = 0; c < W; ++c) ASSERT_EQ(out[i * W + c], 0);
    } else {
      EXPECT_EQ(compact[i], int32_t(i));
      ASSERT_EQ(0, std::memcmp(&out[i * W], &full[size_t(idx[i]) * W], 2 * W)) << "gathered row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, KvCast, ::testing::Values(std::pair{512, 64}, std::pair{64, 32}, std::pair{32, 2}));

TEST(KvCast, RejectsBf16PoolAndBadIndex) {
  const LatentLayout b = make_latent_layout(512, 64, false);
  uint8_t pool[1152];
  uint16_t out[576];
  EXPECT_THROW(kv_cast_cpu({pool, b, out, 1}), Error);
  const LatentLayout f = make_latent_layout(512, 64, true);
  int32_t idx[1] = {-2}, compact[1];
  EXPECT_THROW(kv_gather_cast_cpu({pool, f, idx, out, compact, 1}), Error);
  EXPECT_THROW(kv_cast_cpu({pool, f, out, -1}), Error);
}

// rows 0 / count 0 are no-ops (null pointers accepted); an all -1 gather writes zero rows, compact -1.
TEST(KvCast, EmptyAndAllInvalidGather) {
  const LatentLayout l = make_latent_layout(512, 64, true);
  EXPECT_NO_THROW(kv_cast_cpu({nullptr, l, nullptr, 0}));
  EXPECT_NO_THROW(kv_gather_cast_cpu({nullptr, l, nullptr, nullptr, nullptr, 0}));
  std::vector<uint8_t> pool(size_t(3) * l.row_bytes);
  kv_fill_random_cpu({pool.data(), l, nullptr, {}, 0, 3, fresh_seed()});
  std::vector<int32_t> idx(5, -1), compact(5, 7);
  std::vector<uint16_t> out(5 * 576, 0xbeef);
  kv_gather_cast_cpu({pool.data(), l, idx.data(), out.data(), compact.data(), 5});
  for (int32_t c : compact) EXPECT_EQ(c, -1);
  for (uint16_t v : out) ASSERT_EQ(v, 0);
  EXPECT_THROW(kv_gather_cast_cpu({pool.data(), l, nullptr, out.data(), compact.data(), 5}), Error);
}
