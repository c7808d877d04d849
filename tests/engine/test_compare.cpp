// Crossovers of a sweep: the winning path changing along context or pool size, ties ignored.
#include <gtest/gtest.h>

#include "engine/compare_session.h"

using namespace glm5;
using json = nlohmann::json;

namespace {
json point(int batch, int ctx, int64_t pool, const char* winner, double margin) {
  return {{"batch", batch}, {"context", ctx}, {"pool_tokens", pool}, {"winner", winner}, {"margin", margin}};
}
}  // namespace

TEST(CompareCrossovers, FoundAlongContextAndPoolIgnoringTies) {
  json points = json::array({point(1, 4096, 131072, "gather-cast", 0.10), point(1, 32768, 131072, "fp8", 0.20),
                             point(1, 131072, 131072, "fp8", 0.30), point(1, 4096, 495000, "gather-cast", 0.01),
                             point(1, 32768, 495000, "fp8", 0.25)});
  json x = find_crossovers(points);
  // context series at pool 131072: gather-cast -> fp8 between 4096 and 32768; pool 495000: a tie at 4096.
  // pool series at context 4096: gather-cast both; at 32768: fp8 both.
  ASSERT_EQ(x.size(), 1u) << x.dump();
  EXPECT_EQ(x[0]["along"], "context");
  EXPECT_EQ(x[0]["from"], 4096);
  EXPECT_EQ(x[0]["to"], 32768);
  EXPECT_EQ(x[0]["winner_before"], "gather-cast");
  EXPECT_EQ(x[0]["winner_after"], "fp8");
}

TEST(CompareCrossovers, SkippedPointsAreLeftOut) {
  json points = json::array({point(1, 4096, 4096, "fp8", 0.2), {{"batch", 1}, {"context", 8192}, {"pool_tokens", 4096}, {"skipped", "does not fit"}}});
  EXPECT_TRUE(find_crossovers(points).empty());
}
