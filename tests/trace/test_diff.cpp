// The regression gate: rank test exact values, noise vs change on report JSON, appeared kernels,
// outputs (Markdown / JSON / JUnit), option files.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "analysis/diff.h"
#include "common/error.h"

using namespace glm5;
using json = nlohmann::json;

namespace {

// A one-run report with the given per-step samples and op times (us per step).
json report(const std::string& name, const std::vector<double>& steps, const std::map<std::string, double>& ops) {
  std::vector<double> s = steps;
  std::sort(s.begin(), s.end());
  json samples = json::array();
  for (size_t i = 0; i < steps.size(); ++i) samples.push_back({{"step", i}, {"time_us", steps[i]}, {"kernel_us", steps[i]}});
  json jops = json::array(), cells = json::array(), kernels = json::array();
  for (auto& [op, t] : ops) {
    jops.push_back({{"op", op}, {"time_us", t}});
    cells.push_back({{"layer", 0}, {"op", op}, {"time_us", t}});
    kernels.push_back({{"name", op + "_kernel"}, {"total_us", t * steps.size()}, {"calls", steps.size()}});
  }
  return {{"schema_version", "glm5prof.report/1"},
          {"runs", json::array({{{"name", name},
                                 {"steps", {{"median_us", s[s.size() / 2]}, {"samples", samples}}},
                                 {"ops", jops},
                                 {"layer_ops", cells},
                                 {"top_kernels", kernels}}})}};
}

std::vector<double> noisy(double mean, double spread, int n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-spread, spread);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(mean + u(g));
  return v;
}

}  // namespace

TEST(MannWhitney, ExactTailsByHand) {
  // n = m = 3: C(6,3) = 20 rank arrangements; complete separation has probability 1/20.
  EXPECT_NEAR(mann_whitney_greater_p({1, 2, 3}, {4, 5, 6}), 1.0 / 20, 1e-12);
  // U = 8 of 9 (one inversion): arrangements with U >= 8 are 2 of 20.
  EXPECT_NEAR(mann_whitney_greater_p({1, 2, 5}, {3, 6, 7}), 2.0 / 20, 1e-12);
  // Reversed: no evidence that b is larger.
  EXPECT_NEAR(mann_whitney_greater_p({4, 5, 6}, {1, 2, 3}), 1.0, 1e-12);
  // Large samples use the normal approximation; a clear shift is tiny, no shift about one half.
  std::vector<double> a = noisy(100, 1, 60, 1), b = noisy(103, 1, 60, 2), c = noisy(100, 1, 60, 3);
  EXPECT_LT(mann_whitney_greater_p(a, b), 1e-6);
  double p = mann_whitney_greater_p(a, c);
  EXPECT_GT(p, 0.01);
  EXPECT_LT(p, 0.99);
}

TEST(Diff, NoiseOnlyPairPasses) {
  // Same distribution, +-4% jitter per step, medians a little apart: not a regression.
  json base = report("fp8", noisy(1000, 40, 8, 11), {{"attn.mla", 300}, {"moe.experts", 500}});
  json now = report("fp8", noisy(1010, 40, 8, 12), {{"attn.mla", 305}, {"moe.experts", 505}});
  DiffResult d = diff_reports(base, now, DiffOptions{});
  EXPECT_FALSE(d.regression) << diff_to_markdown(d, DiffOptions{});
  ASSERT_FALSE(d.metrics.empty());
  EXPECT_EQ(d.metrics[0].group, "step");
  EXPECT_NE(d.metrics[0].verdict, "regression");
}

TEST(Diff, ThreePercentStepRegressionIsCaught) {
  json base = report("fp8", noisy(1000, 5, 8, 21), {{"attn.mla", 300}});
  json now = report("fp8", noisy(1035, 5, 8, 22), {{"attn.mla", 335}});
  DiffResult d = diff_reports(base, now, DiffOptions{});
  EXPECT_TRUE(d.regression);
  EXPECT_EQ(d.metrics[0].verdict, "regression");
  EXPECT_LT(d.metrics[0].p_value, 0.05);
  EXPECT_NEAR(d.metrics[0].delta_pct, 3.5, 1.0);
}

// Several runs (profile --kv-path all): a base run missing from the new report fails the step gate, named; with
// the step not gated it is only reported.
TEST(Diff, MissingBaseRunIsAStepRegression) {
  json base = report("cast", noisy(1000, 5, 8, 31), {{"attn.kv_cast", 300}});
  base["runs"].push_back(report("fp8", noisy(700, 5, 8, 32), {{"attn.mla", 100}})["runs"][0]);
  json now = report("cast", noisy(1000, 5, 8, 33), {{"attn.kv_cast", 300}});
  now["runs"].push_back(report("fp8-renamed", noisy(700, 5, 8, 34), {{"attn.mla", 100}})["runs"][0]);
  DiffResult d = diff_reports(base, now, DiffOptions{});
  EXPECT_TRUE(d.regression) << diff_to_markdown(d, DiffOptions{});
  bool named = false;
  for (const MetricDiff& m : d.metrics) named |= m.run == "fp8" && m.verdict == "regression" && m.gated;
  EXPECT_TRUE(named) << diff_to_markdown(d, DiffOptions{});
  DiffOptions ops_only;
  ops_only.gate = {"op"};
  EXPECT_FALSE(diff_reports(base, now, ops_only).regression);
  now["runs"][1]["name"] = "fp8";  // both present again: no regression
  EXPECT_FALSE(diff_reports(base, now, DiffOptions{}).regression);
}

TEST(Diff, ReappearingFullPoolCastIsCaughtEvenInNoise) {
  // A dependency bump brings back a 15% cast op; step samples are too noisy to be significant.
  json base = report("serve", {1000, 1300, 900, 1200}, {{"attn.mla", 300}});
  json now = report("serve", {1150, 1000, 1400, 1100}, {{"attn.mla", 300}, {"attn.kv_cast", 150}});
  DiffResult d = diff_reports(base, now, DiffOptions{});
  EXPECT_TRUE(d.regression);
  bool found = false;
  for (const MetricDiff& m : d.metrics) found |= m.verdict == "appeared" && m.metric == "attn.kv_cast" && m.gated;
  EXPECT_TRUE(found) << diff_to_markdown(d, DiffOptions{});
  std::string junit = diff_to_junit(d);
  EXPECT_NE(junit.find("<failure message=\"appeared"), std::string::npos) << junit;
  EXPECT_TRUE(diff_to_json(d, DiffOptions{})["regression"].get<bool>());
}

TEST(Diff, OpGateByEffectSizeWhenAsked) {
  json base = report("fp8", {1000, 1001, 999}, {{"attn.mla", 300}, {"moe.experts", 600}});
  json now = report("fp8", {1002, 1000, 1001}, {{"attn.mla", 400}, {"moe.experts", 500}});
  DiffOptions o;
  EXPECT_FALSE(diff_reports(base, now, o).regression);
  o.gate = {"op"};
  DiffResult d = diff_reports(base, now, o);
  EXPECT_TRUE(d.regression);
  int regressions = 0, improvements = 0;
  for (const MetricDiff& m : d.metrics) {
    regressions += m.group == "op" && m.verdict == "regression";
    improvements += m.group == "op" && m.verdict == "improvement";
  }
  EXPECT_EQ(regressions, 1);
  EXPECT_EQ(improvements, 1);
}

TEST(Diff, BadInputsNameTheField) {
  json ok = report("fp8", {1, 2, 3}, {{"x", 1}});
  json no_runs = {{"schema_version", "glm5prof.report/1"}};
  try {
    diff_reports(no_runs, ok, DiffOptions{}, "base.json", "new.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("base.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("runs"), std::string::npos);
  }
  json bad = ok;
  bad["runs"][0]["steps"]["median_us"] = "fast";
  EXPECT_THROW(diff_reports(ok, bad, DiffOptions{}), Error);
  // A layer index that does not fit an int (found by tools/fuzz.sh: the cast was undefined behaviour) or is
  // fractional is named as bad input; -1 (not a layer) stays accepted.
  for (double layer : {-1.92234e19, 1e300, 2.5, -2.0}) {
    json bad_layer = ok;
    bad_layer["runs"][0]["layer_ops"][0]["layer"] = layer;
    try {
      diff_reports(ok, bad_layer, DiffOptions{}, "base.json", "new.json");
      FAIL() << "expected an error for layer " << layer;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("new.json: runs[0].layer_ops: field 'layer'"), std::string::npos) << e.what();
    }
  }
  json no_layer = ok;
  no_layer["runs"][0]["layer_ops"][0]["layer"] = -1;
  EXPECT_NO_THROW(diff_reports(ok, no_layer, DiffOptions{}));
  std::string cfg = testing::TempDir() + "/gate.json";
  std::ofstream(cfg) << R"({"threshold_pct": 5, "gate": ["step", "vibes"]})";
  EXPECT_THROW(load_diff_options(cfg, DiffOptions{}), Error);
  std::ofstream(cfg) << R"({"threshold_pct": 5, "gate": ["step", "op"]})";
  DiffOptions o = load_diff_options(cfg, DiffOptions{});
  EXPECT_EQ(o.threshold_pct, 5);
  EXPECT_EQ(o.gate.size(), 2u);
}

TEST(Diff, HotspotsThatChangedAreListed) {
  json base = report("serve", {1000, 1001, 999}, {{"attn.mla", 300}});
  json now = report("serve", {1300, 1301, 1299}, {{"attn.mla", 300}, {"attn.kv_cast", 300}});
  now["runs"][0]["hotspots"] = json::array({{{"kind", "kv_dtype_cast"}, {"what", "attn.kv_cast"}, {"time_us", 300.0}}});
  base["runs"][0]["hotspots"] = json::array();
  DiffResult d = diff_reports(base, now, DiffOptions{});
  bool listed = false;
  for (const MetricDiff& m : d.metrics) listed |= m.group == "hotspot" && m.verdict == "new hotspot" && !m.gated;
  EXPECT_TRUE(listed) << diff_to_markdown(d, DiffOptions{});
}

// A kernel missing from a top-kernel list cut at 20 may only have been smaller than the cut: not
// "appeared" (two runs of one deployment under uneven CPU load crossed the cut by noise and failed the
// gate); missing from a complete list, it did not run: appeared, gated.
TEST(Diff, KernelMissingFromACutListIsNotAppeared) {
  std::map<std::string, double> ops;
  for (int i = 0; i < 20; ++i) ops["op" + std::to_string(100 + i)] = 100.0 + i;
  json base = report("fp8", {5000, 5001, 4999}, ops);
  json now = report("fp8", {5000, 5002, 4998}, ops);
  // The new run's list has a kernel the base's lacks (the same op's second kernel, larger there than
  // the base's smallest kept one), and the op table is the same on both sides.
  now["runs"][0]["top_kernels"].push_back({{"name", "op100_kernel_b"}, {"total_us", 3 * 150.0}, {"calls", 3}});
  base["runs"][0]["kernels_distinct"] = 25;  // the base had 25 kernels, listed 20
  now["runs"][0]["kernels_distinct"] = 21;
  DiffResult d = diff_reports(base, now, DiffOptions{});
  EXPECT_FALSE(d.regression) << diff_to_markdown(d, DiffOptions{});
  std::string verdict;
  for (const MetricDiff& m : d.metrics)
    if (m.metric == "op100_kernel_b") verdict = m.verdict;
  EXPECT_EQ(verdict, "entered top list");
  // A report without kernels_distinct and a full list (20) counts as cut too.
  base["runs"][0].erase("kernels_distinct");
  EXPECT_FALSE(diff_reports(base, now, DiffOptions{}).regression);
  // The base's list complete: the kernel did not run there.
  base["runs"][0]["kernels_distinct"] = 20;
  d = diff_reports(base, now, DiffOptions{});
  EXPECT_TRUE(d.regression) << diff_to_markdown(d, DiffOptions{});
  bool appeared = false;
  for (const MetricDiff& m : d.metrics) appeared |= m.metric == "op100_kernel_b" && m.verdict == "appeared" && m.gated;
  EXPECT_TRUE(appeared) << diff_to_markdown(d, DiffOptions{});
  // Left the new run's cut list: reported, never gated.
  json cut_now = report("fp8", {5000, 5002, 4998}, ops);
  cut_now["runs"][0]["kernels_distinct"] = 30;
  d = diff_reports(now, cut_now, DiffOptions{});
  EXPECT_FALSE(d.regression);
  bool left = false;
  for (const MetricDiff& m : d.metrics) left |= m.metric == "op100_kernel_b" && m.verdict == "left top list" && !m.gated;
  EXPECT_TRUE(left) << diff_to_markdown(d, DiffOptions{});
}

// What the top-kernel completeness rests on is checked: kernels_distinct an integer no smaller than the list; a
// kernel or op without a name, or listed twice, and a run name used twice, are bad input, not silently merged.
TEST(Diff, MalformedListsAreBadInput) {
  const json good = report("fp8", {1000, 1001, 999}, {{"attn.mla", 300}, {"moe.experts", 600}});
  auto expect_error = [&](json bad, const std::string& words) {
    try {
      diff_reports(bad, good, DiffOptions{}, "base.json", "new.json");
      ADD_FAILURE() << "expected an error naming: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("base.json"), std::string::npos) << e.what();
    }
  };
  json b = good;
  b["runs"][0]["kernels_distinct"] = 1;  // 2 listed
  expect_error(b, "'kernels_distinct' (1) is below the 2 kernels listed");
  b["runs"][0]["kernels_distinct"] = 2.5;
  expect_error(b, "'kernels_distinct' is not an integer (2.5)");
  b = good;
  b["runs"][0]["top_kernels"].push_back(b["runs"][0]["top_kernels"][0]);
  expect_error(b, "'attn.mla_kernel' is listed twice");
  b = good;
  b["runs"][0]["top_kernels"][0].erase("name");
  expect_error(b, "field 'name' missing");
  b = good;
  b["runs"][0]["ops"][1]["op"] = 7;
  expect_error(b, "field 'op' missing or not a string, got 7");
  // "" is the analysis's name for kernels outside every op range (read as "(unattributed)", session 29); two of them
  // in one list are still a list naming an op twice.
  b = good;
  b["runs"][0]["ops"][0]["op"] = "";
  b["runs"][0]["ops"][1]["op"] = "";
  expect_error(b, "'(unattributed)' is listed twice");
  b = good;
  b["runs"].push_back(b["runs"][0]);
  expect_error(b, "run name 'fp8' is used twice");
  b = good;
  b["runs"][0]["kernels_distinct"] = 2;  // consistent: accepted
  EXPECT_FALSE(diff_reports(b, good, DiffOptions{}).regression);
}
