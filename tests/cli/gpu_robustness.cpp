// Robustness of `glm5prof profile` on the GPU (issue 7):
// - CUPTI unavailable (GLM5_FORCE_NO_CUPTI=1 simulates cuptiActivityEnable failing, as with another
//   profiler attached): the run falls back to the host clock, says so in one stderr line and in
//   report.json / report.md, and exits 0;
// - a KV pool larger than the GPU's free memory: one line naming the bytes needed and free
//   (cudaMemGetInfo), before anything is allocated; exit 1, no output folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/buffer.h"
#include "run_binary.h"

using namespace glm5;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("glm5_gpu_robust_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(RobustnessGpu, CuptiUnavailableFallsBackToHostClock) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const fs::path d = scratch("nocupti");
  setenv("GLM5_FORCE_NO_CUPTI", "1", 1);
  test::RunResult r = test::run_glm5prof({"profile", "--backend", "cuda", "--model", "glm5-tiny", "--steps", "3",
                                          "--warmup", "1", "--kv-path", "all", "--out", (d / "out").string()}, d);
  unsetenv("GLM5_FORCE_NO_CUPTI");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count(r.err, "glm5prof: CUPTI unavailable"), 1) << r.err;  // one line, not one per KV path
  EXPECT_EQ(count(r.err, "GLM5_FORCE_NO_CUPTI=1"), 1) << r.err;
  EXPECT_NE(r.err.find("glm5prof: CUPTI unavailable: fell back to the host clock"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::exists(d / "out" / "report.json"));
  nlohmann::json j = nlohmann::json::parse(test::slurp(d / "out" / "report.json"));
  ASSERT_EQ(j["runs"].size(), 3u);
  for (const auto& run : j["runs"]) {
    EXPECT_EQ(run["source"], "host-clock");
    EXPECT_EQ(run["complete"], true);
    ASSERT_FALSE(run["trace"]["messages"].empty());
    EXPECT_NE(run["trace"]["messages"][0].get<std::string>().find("GLM5_FORCE_NO_CUPTI=1"), std::string::npos);
    EXPECT_GT(run["steps"]["median_us"].get<double>(), 0.0);
  }
  const std::string md = test::slurp(d / "out" / "report.md");
  EXPECT_NE(md.find("CUPTI unavailable: fell back to the host clock"), std::string::npos);
  EXPECT_NE(md.find("source: host-clock"), std::string::npos);
}

TEST(RobustnessGpu, PoolLargerThanGpuMemoryIsOneLineBeforeAllocating) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const fs::path d = scratch("oom");
  // 2^38 tokens of the tiny model's latent rows: tens of TB, far beyond any GPU.
  test::RunResult r = test::run_glm5prof({"profile", "--backend", "cuda", "--model", "glm5-tiny", "--steps", "1",
                                          "--pool-tokens", "274877906944", "--out", (d / "out").string()}, d);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(count(r.err, "glm5prof: error: "), 1) << r.err;
  EXPECT_NE(r.err.find("model does not fit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" bytes) is free on the GPU"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "out"));
}
