// `glm5prof diff` as a CI gate on CPU-backend reports of the tiny model, written by this test: the
// same fp8 deployment twice passes; the same deployment serving its KV cache through a full-pool cast
// is caught (the cast op appears). Step timings on a shared CI machine are noise, so these pairs gate
// on "appeared" only; the rank test on step samples is covered by the stored H200 pairs
// (tests/trace/test_diff_stored.cpp). Exit codes: 0 pass, 1 regression, 2 bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "run_binary.h"
#include "tests/shared_dir.h"

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

// Found by a bad-input attack (session 29). An op outside every op range is written as "op": "" (shown as
// "(unattributed)") by analyze and profile; diff refused it, so it could not compare most real traces, nor
// analyze's own report.json. And corrupt reports it accepted (exit 0 or a regression verdict) are bad input now.
TEST_F(DiffCli, ReadsUnattributedOpsAndRefusesCorruptReports) {
  const fs::path ext = fs::path(glm5::test::shared_dir()) / "traces" / "external";
  const fs::path base = ext / "hta_trace_compare_base_base.json.gz", test = ext / "hta_trace_compare_test_test.json.gz";
  if (fs::exists(base) && fs::exists(test)) {
    auto t = run_glm5prof({"diff", base.string(), test.string()}, dir_);
    EXPECT_TRUE(t.status == 0 || t.status == 1) << t.status << " " << t.err;
    EXPECT_TRUE(t.err.empty()) << t.err;
    auto a = run_glm5prof({"analyze", base.string(), "--out", (dir_ / "analyzed").string()}, dir_);
    ASSERT_EQ(a.status, 0) << a.err;
    const std::string own = (dir_ / "analyzed" / "report.json").string();
    const auto j = nlohmann::json::parse(glm5::test::slurp(own));
    bool has_unattributed = false;
    for (const auto& o : j["runs"][0]["ops"]) has_unattributed |= o["op"] == "";
    EXPECT_TRUE(has_unattributed) << "the trace was expected to hold kernels outside every op range";
    const std::string js = (dir_ / "own.json").string();
    auto s = run_glm5prof({"diff", own, own, "--json", js}, dir_);
    ASSERT_EQ(s.status, 0) << s.err;
    bool compared = false;  // the unattributed op is one of the compared metrics, under its label
    const auto d = nlohmann::json::parse(glm5::test::slurp(js));
    for (const auto& m : d["metrics"])
      compared |= m["group"] == "op" && m["metric"] == "(unattributed)" && m["verdict"] == "unchanged";
    EXPECT_TRUE(compared);
  }
  // Corrupt copies of a valid report: each exits 2 with one line naming the field.
  const auto good = nlohmann::json::parse(glm5::test::slurp(report("fp8-a")));
  auto corrupt = [&](const char* label, auto edit, const std::string& key) {
    SCOPED_TRACE(label);
    nlohmann::json j = good;
    edit(j);
    const std::string path = (dir_ / (std::string(label) + ".json")).string();
    std::ofstream(path) << j.dump();
    auto r = run_glm5prof({"diff", path, report("fp8-b")}, dir_);
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
  };
  corrupt("no_name", [](nlohmann::json& j) { j["runs"][0].erase("name"); }, "'name'");
  corrupt("huge_op", [](nlohmann::json& j) { j["runs"][0]["ops"][0]["time_us"] = 1e308; }, "above the plausible");
  corrupt("huge_median", [](nlohmann::json& j) { j["runs"][0]["steps"]["median_us"] = 1.2345678901234568e29; },
          "'median_us'");
  corrupt("zero_median", [](nlohmann::json& j) { j["runs"][0]["steps"]["median_us"] = 0; }, "outside its samples");
  // A config with an empty gate list would turn the gate off; refused like `--gate ""`.
  const std::string cfg = (dir_ / "empty_gate.json").string();
  std::ofstream(cfg) << R"({"gate": []})";
  auto g = run_glm5prof({"diff", report("fp8-a"), report("cast"), "--config", cfg}, dir_);
  EXPECT_EQ(g.status, 2) << g.out << g.err;
  EXPECT_NE(g.err.find("'gate' must be a non-empty list"), std::string::npos) << g.err;
}
