// Crossovers of a sweep: the winning path changing along context or pool size, ties ignored.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
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

// The points' reports move into OUT/points only when the sweep is complete (session 29: a killed sweep left points/
// without compare.json): a stale staging folder from a killed run is cleared, the previous sweep's points are
// replaced, and a sweep that fails leaves the earlier points/ as it was and no staging folder.
TEST(CompareSweep, PointsAppearOnlyWithACompleteSweep) {
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / ("glm5_compare_sweep_" + std::to_string(::getpid()));
  fs::remove_all(out);
  fs::create_directories(out / ".points.partial" / "killed-run");
  fs::create_directories(out / "points" / "old-point");
  std::ofstream(out / "points" / "old-point" / "report.json") << "{}";
  CompareOptions c;
  c.base.backend = "cpu";
  c.base.model = "glm5-tiny";
  c.base.steps = 1;
  c.base.warmup = 0;
  c.base.out_dir = out.string();
  c.progress = false;
  c.contexts = {8192};  // cannot fit a 64-token pool: every point skipped, the sweep fails
  c.pools = {64};
  c.batches = {1};
  EXPECT_THROW(run_compare(c), Error);
  EXPECT_FALSE(fs::exists(out / ".points.partial"));
  EXPECT_TRUE(fs::exists(out / "points" / "old-point" / "report.json"));
  EXPECT_FALSE(fs::exists(out / "compare.json"));
  c.contexts = {128, 256};
  c.pools = {4096};
  run_compare(c);
  EXPECT_FALSE(fs::exists(out / ".points.partial"));
  EXPECT_FALSE(fs::exists(out / "points" / "old-point"));
  for (const char* p : {"b1-ctx128-pool4096", "b1-ctx256-pool4096"})
    EXPECT_TRUE(fs::exists(out / "points" / p / "report.json")) << p;
  const json j = json::parse(std::ifstream(out / "compare.json"));
  EXPECT_EQ(j["points"].size(), 2u);
  fs::remove_all(out);
}
