// L2 prefetch (kernels/l2_prefetch.h), host side: the plan's shape and byte count against hand counts,
// and every invalid field refused with its name.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "kernels/l2_prefetch.h"

namespace glm5 {
namespace {

alignas(16) unsigned char g_bytes[64];

TEST(L2Prefetch, PlanTakesTheFractionOfEveryPeriod) {
  // GLM-5's o_proj at --tp 1: 6144 rows of 16384 FP8 codes; 4 periods of 4096 bytes per row.
  const L2PrefetchParams p = l2_prefetch_plan(g_bytes, 6144, 16384, 16384, 0.4);
  EXPECT_EQ(p.period, 4096);
  EXPECT_EQ(p.take, 1632);  // 0.4 * 4096 = 1638.4, rounded down to 16
  EXPECT_EQ(l2_prefetch_bytes(p), int64_t(6144) * 4 * 1632);
  EXPECT_NO_THROW(validate_l2_prefetch_params(p));
  // A short last period: rows of 5000 bytes = one full period + 904 bytes, of which 904 (< take) are fetched.
  const L2PrefetchParams q = l2_prefetch_plan(g_bytes, 3, 5000, 5008, 0.5);
  EXPECT_EQ(q.take, 2048);
  EXPECT_EQ(l2_prefetch_bytes(q), 3 * (2048 + 896));  // the 904-byte tail rounded down to 16
  // Rows shorter than a period (GLM-5's q_b: 2048 FP8 codes): one period per row.
  const L2PrefetchParams r = l2_prefetch_plan(g_bytes, 16384, 2048, 2048, 0.4);
  EXPECT_EQ(r.period, 2048);
  EXPECT_EQ(r.take, 816);  // 819.2 rounded down to 16
  EXPECT_EQ(l2_prefetch_bytes(r), int64_t(16384) * 816);
  EXPECT_EQ(l2_prefetch_plan(g_bytes, 3, 100, 112, 0.5).period, 112);
  // A period of choice (8192: GLM-5 o_proj's split-K range per CTA at batch 1), capped at the row.
  EXPECT_EQ(l2_prefetch_plan(g_bytes, 6144, 16384, 16384, 0.5, 8192).take, 4096);
  EXPECT_EQ(l2_prefetch_plan(g_bytes, 4, 2048, 2048, 0.5, 8192).period, 2048);
  EXPECT_THROW(l2_prefetch_plan(g_bytes, 4, 64, 64, 0.5, 24), Error);
  // The whole matrix, and the smallest take.
  EXPECT_EQ(l2_prefetch_bytes(l2_prefetch_plan(g_bytes, 2, 8192, 8192, 1.0)), 2 * 8192);
  EXPECT_EQ(l2_prefetch_plan(g_bytes, 2, 8192, 8192, 1e-6).take, 16);
}

// Every request the kernel issues (l2_prefetch_request) is 16-byte aligned, a multiple of 16 bytes, inside its own
// row's row_bytes, starts a period of that row, and the requests add up to l2_prefetch_bytes.
TEST(L2Prefetch, RequestsStayInsideTheirRowsAndAddUp) {
  struct Case {
    int64_t rows, row_bytes, row_stride;
    double fraction;
    int64_t period;
  };
  for (const Case& c : {Case{6144, 16384, 16384, 0.4, 0}, Case{6144, 2048, 16384, 1.0, 0}, Case{7, 5000, 5008, 0.33, 0},
                        Case{3, 100, 112, 0.5, 0}, Case{5, 9000, 9024, 0.5, 8192}, Case{1, 16, 16, 0.01, 0},
                        Case{4, 4100, 4112, 1.0, 0}}) {
    const L2PrefetchParams p = l2_prefetch_plan(g_bytes, c.rows, c.row_bytes, c.row_stride, c.fraction, c.period);
    ASSERT_NO_THROW(validate_l2_prefetch_params(p));
    int64_t total = 0;
    const int64_t n = l2_prefetch_requests(p);
    EXPECT_EQ(n, c.rows * ((c.row_bytes + p.period - 1) / p.period));
    for (int64_t i = 0; i < n; ++i) {
      const L2PrefetchRequest r = l2_prefetch_request(p, i);
      const int64_t row = r.offset / c.row_stride, in_row = r.offset % c.row_stride;
      ASSERT_EQ(r.offset % 16, 0) << i;
      ASSERT_EQ(r.bytes % 16, 0u) << i;
      ASSERT_EQ(in_row % p.period, 0) << i;  // starts a period
      ASSERT_LE(in_row + int64_t(r.bytes), c.row_bytes) << "request " << i << " runs past its row";
      ASSERT_LE(int64_t(r.bytes), p.take) << i;
      ASSERT_LT(row, c.rows) << i;
      total += r.bytes;
    }
    EXPECT_EQ(total, l2_prefetch_bytes(p)) << c.rows << " x " << c.row_bytes;
  }
}

TEST(L2Prefetch, RefusesBadFieldsByName) {
  const L2PrefetchParams good = l2_prefetch_plan(g_bytes, 4, 64, 64, 0.5);
  auto refuses = [&](L2PrefetchParams p, const std::string& field) {
    try {
      l2_prefetch_cpu(p);
      ADD_FAILURE() << field << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  L2PrefetchParams p = good;
  p.base = nullptr;
  refuses(p, "base");
  p = good;
  p.base = g_bytes + 8;
  refuses(p, "base");
  p = good;
  p.rows = 0;
  refuses(p, "rows");
  p = good;
  p.row_bytes = -1;
  refuses(p, "row_bytes");
  p = good;
  p.row_stride = 48;  // < row_bytes
  refuses(p, "row_stride");
  p = good;
  p.row_stride = 72;  // not a multiple of 16
  refuses(p, "row_stride");
  p = good;
  p.period = 24;
  refuses(p, "period");
  p = good;
  p.take = p.period + 16;
  refuses(p, "take");
  p = good;
  p.take = 8;
  refuses(p, "take");
  p = good;
  p.rows = int64_t(1) << 40;
  refuses(p, "2^31");
  EXPECT_THROW(l2_prefetch_plan(g_bytes, 4, 64, 64, 0.0), Error);
  EXPECT_THROW(l2_prefetch_plan(g_bytes, 4, 64, 64, 1.5), Error);
  EXPECT_NO_THROW(l2_prefetch_cpu(good));
}

}  // namespace
}  // namespace glm5
