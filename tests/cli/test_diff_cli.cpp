// `glm5prof diff` as a CI gate on CPU-backend reports of the tiny model, written by this test: the
// same fp8 deployment twice passes; the same deployment serving its KV cache through a full-pool cast
// is caught (the cast op appears). Step timings on a shared CI machine are noise, so these pairs gate
// on "appeared" only; the rank test on step samples is covered by the stored H200 pairs
// (tests/trace/test_diff_stored.cpp). Exit codes: 0 pass, 1 regression, 2 bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "run_binary.h"

namespace fs = std::filesystem;
using glm5::test::run_glm5prof;

class DiffCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("glm5_diff_cli_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (auto [name, path] : {std::pair{"fp8-a", "fp8"}, std::pair{"fp8-b", "fp8"}, std::pair{"cast", "cast"}}) {
      auto r = run_glm5prof({"profile", "--backend", "cpu", "--kv-path", path, "--steps", "3", "--out", (dir_ / name).string()}, dir_);
      ASSERT_EQ(r.status, 0) << r.err;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string report(const char* name) { return (dir_ / name / "report.json").string(); }
  static inline fs::path dir_;
};

TEST_F(DiffCli, SameDeploymentTwicePasses) {
  auto r = run_glm5prof({"diff", report("fp8-a"), report("fp8-b"), "--gate", "appeared"}, dir_);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("No regression"), std::string::npos) << r.out;
}

TEST_F(DiffCli, FullPoolCastComingBackFailsWithJUnitAndJson) {
  const std::string junit = (dir_ / "junit.xml").string(), js = (dir_ / "diff.json").string(), md = (dir_ / "summary.md").string();
  auto r = run_glm5prof({"diff", report("fp8-a"), report("cast"), "--gate", "appeared", "--junit", junit, "--json", js, "--md", md}, dir_);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("attn.kv_cast"), std::string::npos) << r.out;
  const std::string xml = glm5::test::slurp(junit);
  EXPECT_NE(xml.find("<failure message=\"appeared"), std::string::npos) << xml;
  auto j = nlohmann::json::parse(glm5::test::slurp(js));
  EXPECT_TRUE(j["regression"].get<bool>());
  EXPECT_EQ(glm5::test::slurp(md), r.out);
}

TEST_F(DiffCli, TracesCanBeComparedToo) {
  auto r = run_glm5prof({"diff", (dir_ / "fp8-a" / "trace.json").string(), (dir_ / "cast" / "trace.json").string(),
                         "--gate", "appeared"}, dir_);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
}

TEST_F(DiffCli, BadInputExitsTwoWithOneLine) {
  auto r = run_glm5prof({"diff", report("fp8-a"), (dir_ / "missing.json").string()}, dir_);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  auto u = run_glm5prof({"diff", report("fp8-a"), report("fp8-b"), "--gate", "vibes"}, dir_);
  EXPECT_EQ(u.status, 2) << u.err;
}
