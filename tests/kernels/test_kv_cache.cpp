// CPU tests of the KV pool layouts and writers (kernels/kv_layout.h, kernels/kv_cache.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/rng.h"
#include "kernels/kv_cache.h"
#include "kernel_test_util.h"

using namespace glm5;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng_normal(seed, 7, i);
  return v;
}

float scale_at(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

TEST(KvLayout, Glm5AndTinyRows) {
  LatentLayout g = make_latent_layout(512, 64, true);
  EXPECT_EQ(g.group, 128);
  EXPECT_EQ(g.num_groups(), 4);
  EXPECT_EQ(g.row_bytes, 656);
  EXPECT_EQ(g.scale_offset(), 512);
  EXPECT_EQ(g.rope_offset(), 528);
  EXPECT_EQ(bf16_layout_of(g).row_bytes, 1152);
  EXPECT_EQ(make_latent_layout(512, 64, false).row_bytes, 1152);
  LatentLayout t = make_latent_layout(64, 32, true);  // glm5-tiny: G = L when L % 128 != 0
  EXPECT_EQ(t.group, 64);
  EXPECT_EQ(t.row_bytes, 132);
  EXPECT_EQ(t.rope_offset(), 68);
  LatentLayout tb = bf16_layout_of(t);
  EXPECT_NO_THROW(check_latent_layout(tb, "test"));
  IndexerLayout il;
  EXPECT_EQ(il.bytes_per_token(), 132);
  EXPECT_EQ(il.page_bytes(), 64 * 132);
  // slot 70 = page 1, offset 6
  EXPECT_EQ(indexer_key_offset(70, 128), 64 * 132 + 6 * 128);
  EXPECT_EQ(indexer_scale_offset(70, 128), 64 * 132 + 64 * 128 + 6 * 4);
}

TEST(KvLayout, RejectsBadDimensions) {
  EXPECT_THROW(make_latent_layout(500, 64, true), Error);
  EXPECT_THROW(make_latent_layout(0, 64, true), Error);
  EXPECT_THROW(make_latent_layout(512, 63, true), Error);
  LatentLayout l = make_latent_layout(512, 64, true);
  l.row_bytes = 576;
  try {
    check_latent_layout(l, "kv_write");
    FAIL() << "expected glm5::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row_bytes 576"), std::string::npos) << e.what();
  }
}

class KvWrite : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(KvWrite, Fp8RowsQuantizeAndRoundTrip) {
  const auto [L, R] = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const LatentLayout l = make_latent_layout(L, R, true);
  const int B = 5, latent_stride = L + 3, rope_stride = R + 1, capacity = 200;
  std::vector<float> latent = random_floats(size_t(B) * latent_stride, seed, 3.f);
  std::vector<float> rope = random_floats(size_t(B) * rope_stride, seed + 1);
  for (int i = 0; i < l.group; ++i) latent[size_t(2) * latent_stride + i] = 0.f;  // request 2, group 0: all zero
  std::vector<int32_t> slots = {3, 130, 64, -1, 199};
  std::vector<uint8_t> pool(size_t(capacity) * l.row_bytes, 0xab);
  const std::vector<uint8_t> before = pool;
  kv_write_cpu({latent.data(), rope.data(), latent_stride, rope_stride, slots.data(), pool.data(), l, B});

  double max_rel = 0;
  for (int b = 0; b < B; ++b) {
    if (slots[b] < 0) continue;
    const uint8_t* row = pool.data() + size_t(slots[b]) * l.row_bytes;
    const float* x = latent.data() + size_t(b) * latent_stride;
    for (int g = 0; g < l.num_groups(); ++g) {
      float amax = 0;
      for (int i = 0; i < l.group; ++i) amax = std::max(amax, std::fabs(x[g * l.group + i]));
      const float scale = scale_at(row + l.scale_offset() + 4 * g);
      EXPECT_EQ(scale, amax > 0 ? amax / 448.f : 1.f) << "b " << b << " group " << g;
      for (int i = 0; i < l.group; ++i) {
        const int c = g * l.group + i;
        ASSERT_EQ(row[c], float_to_e4m3_bits(x[c] / scale)) << "b " << b << " value " << c;
        const float deq = e4m3_bits_to_float(row[c]) * scale;
        const double err = std::fabs(double(deq) - x[c]);
        EXPECT_LE(err, std::max(std::fabs(x[c]) / 16.0, scale / 512.0) * 1.0001) << "b " << b << " value " << c;
        if (std::fabs(x[c]) > scale * 0.02) max_rel = std::max(max_rel, err / std::fabs(x[c]));
      }
    }
    const float* r = rope.data() + size_t(b) * rope_stride;
    for (int i = 0; i < R; ++i) ASSERT_EQ(u16_at(row + l.rope_offset() + 2 * i), float_to_bf16_bits(r[i]));
  }
  RecordProperty("max_rel_err", sci(max_rel));
  EXPECT_LE(max_rel, 1.0 / 16 + 1e-6);
  // Untouched rows stay untouched (slot -1 skipped).
  for (int s = 0; s < capacity; ++s) {
    bool written = s == 3 || s == 130 || s == 64 || s == 199;
    if (written) continue;
    ASSERT_EQ(0, std::memcmp(pool.data() + size_t(s) * l.row_bytes, before.data() + size_t(s) * l.row_bytes,
                             l.row_bytes)) << "slot " << s;
  }
  // request 2's all-zero group: scale 1, codes 0
  const uint8_t* row2 = pool.data() + size_t(64) * l.row_bytes;
  EXPECT_EQ(scale_at(row2 + l.scale_offset()), 1.f);
  for (int i = 0; i < l.group; ++i) EXPECT_EQ(row2[i], 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, KvWrite, ::testing::Values(std::pair{512, 64}, std::pair{64, 32}, std::pair{256, 64},
                                                             std::pair{16, 2}));

TEST(KvWrite, Bf16Rows) {
  const LatentLayout l = make_latent_layout(64, 32, false);
  const uint64_t seed = fresh_seed();
  std::vector<float> latent = random_floats(2 * 64, seed), rope = random_floats(2 * 32, seed + 9);
  std::vector<int32_t> slots = {1, 0};
  std::vector<uint8_t> pool(2 * l.row_bytes);
  kv_write_cpu({latent.data(), rope.data(), 64, 32, slots.data(), pool.data(), l, 2});
  for (int b = 0; b < 2; ++b) {
    const uint8_t* row = pool.data() + size_t(slots[b]) * l.row_bytes;
    for (int i = 0; i < 64; ++i) ASSERT_EQ(u16_at(row + 2 * i), float_to_bf16_bits(latent[b * 64 + i]));
    for (int i = 0; i < 32; ++i) ASSERT_EQ(u16_at(row + 128 + 2 * i), float_to_bf16_bits(rope[b * 32 + i]));
  }
}

TEST(KvWrite, RejectsShortStride) {
  const LatentLayout l = make_latent_layout(512, 64, true);
  float x[4];
  int32_t s[1] = {0};
  uint8_t pool[656];
  EXPECT_THROW(kv_write_cpu({x, x, 100, 64, s, pool, l, 1}), Error);
  EXPECT_THROW(kv_write_cpu({nullptr, x, 512, 64, s, pool, l, 1}), Error);
}

TEST(IndexerKeyWrite, PagedFp8AndBf16) {
  for (int D : {128, 64}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("D " + std::to_string(D) + " seed " + std::to_string(seed));
    IndexerLayout il{D, true};
    const int B = 4, pages = 3;
    std::vector<float> key = random_floats(size_t(B) * D, seed, 2.f);
    std::vector<int32_t> slots = {70, 0, 191, -1};
    std::vector<uint8_t> cache(size_t(pages) * il.page_bytes(), 0);
    indexer_key_write_cpu({key.data(), slots.data(), cache.data(), il, B});
    for (int b = 0; b < 3; ++b) {
      const int64_t slot = slots[b], page = slot / 64, off = slot % 64;
      const uint8_t* k = cache.data() + page * il.page_bytes() + off * D;
      const float scale = scale_at(cache.data() + page * il.page_bytes() + 64 * D + off * 4);
      float amax = 0;
      for (int d = 0; d < D; ++d) amax = std::max(amax, std::fabs(key[b * D + d]));
      EXPECT_EQ(scale, amax / 448.f);
      for (int d = 0; d < D; ++d) ASSERT_EQ(k[d], float_to_e4m3_bits(key[b * D + d] / scale)) << "b " << b << " d " << d;
    }
    IndexerLayout ib{D, false};
    std::vector<uint8_t> cb(size_t(pages) * ib.page_bytes(), 0);
    indexer_key_write_cpu({key.data(), slots.data(), cb.data(), ib, B});
    for (int d = 0; d < D; ++d) ASSERT_EQ(u16_at(cb.data() + 70 * 2 * D + 2 * d), float_to_bf16_bits(key[d]));
  }
}

TEST(KvFill, MatchesWritersAndDependsOnlyOnSlot) {
  for (auto [L, R, D] : {std::tuple{512, 64, 128}, std::tuple{64, 32, 64}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("L " + std::to_string(L) + " seed " + std::to_string(seed));
    const LatentLayout l = make_latent_layout(L, R, true);
    const IndexerLayout il{D, true};
    const int rows = 130;
    std::vector<uint8_t> pool(size_t(rows) * l.row_bytes), idx(size_t(3) * il.page_bytes());
    kv_fill_random_cpu({pool.data(), l, idx.data(), il, 0, rows, seed});
    // Same bytes as the writers applied to the generator's values.
    std::vector<uint8_t> pool2(pool.size()), idx2(idx.size());
    for (int s = 0; s < rows; ++s) {
      std::vector<float> lat(L), rope(R), key(D);
      for (int i = 0; i < L; ++i) lat[i] = rng_normal(seed, kFillStreamLatent, uint64_t(s) * L + i);
      for (int i = 0; i < R; ++i) rope[i] = rng_normal(seed, kFillStreamRope, uint64_t(s) * R + i);
      for (int i = 0; i < D; ++i) key[i] = rng_normal(seed, kFillStreamIndexer, uint64_t(s) * D + i);
      int32_t slot = s;
      kv_write_cpu({lat.data(), rope.data(), L, R, &slot, pool2.data(), l, 1});
      indexer_key_write_cpu({key.data(), &slot, idx2.data(), il, 1});
    }
    EXPECT_EQ(pool, pool2);
    EXPECT_EQ(0, std::memcmp(idx.data(), idx2.data(), size_t(rows / 64) * il.page_bytes()));
    // A fill starting at slot 100 writes the same bytes for slots 100..129.
    std::vector<uint8_t> pool3(pool.size(), 0);
    kv_fill_random_cpu({pool3.data(), l, nullptr, il, 100, 30, seed});
    EXPECT_EQ(0, std::memcmp(pool3.data() + 100 * l.row_bytes, pool.data() + 100 * l.row_bytes, 30 * l.row_bytes));
    // Another seed gives other bytes.
    kv_fill_random_cpu({pool3.data(), l, nullptr, il, 0, rows, seed + 1});
    EXPECT_NE(pool3, pool);
  }
}
