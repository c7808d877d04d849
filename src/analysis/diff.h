// Regression diff between two glm5prof reports (report.json, or Chrome traces turned into one):
// step time with a rank test over the per-step samples (noise vs change), per op / per layer /
// per kernel changes, kernels that appeared or vanished. Used by `glm5prof diff` as a CI gate.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glm5 {

struct DiffOptions {
  double threshold_pct = 3.0;   // smallest relative change of a median that counts [%]
  double alpha = 0.05;          // one-sided Mann-Whitney U significance for step samples
  double min_abs_us = 1.0;      // smallest absolute change per step that counts [us]
  double min_share = 0.01;      // ops / kernels below this share of the step are not gated
  // Which metric groups gate the exit status: "step" (rank test on per-step samples), "op", "layer",
  // "kernel" (effect size only: reports carry one mean per step for these), "appeared" (an op, or a
  // kernel when the base's top-kernel list is complete, of >= min_share of the step that the base did
  // not have, e.g. a full-pool KV cast coming back).
  std::vector<std::string> gate = {"step", "appeared"};
};

// Reads a {"threshold_pct", "alpha", "min_abs_us", "min_share", "gate": [...]} JSON file over the
// defaults. Throws glm5::Error naming the file and key for a wrong type or value.
DiffOptions load_diff_options(const std::string& path, DiffOptions base);

struct MetricDiff {
  std::string run;              // run (KV path) name
  std::string group;            // "step" | "op" | "layer" | "kernel" | "appeared" | "vanished" | "hotspot"
  std::string metric;           // e.g. "step median", "attn.kv_cast", "layer 12", kernel name
  double base_us = 0, new_us = 0;  // per step [us]
  double delta_pct = 0;         // 100 * (new - base) / base (0 when base is 0)
  double p_value = -1;          // one-sided Mann-Whitney p for "new is slower" (-1: no samples)
  bool gated = false;           // this group gates the exit status
  std::string verdict;          // "regression" | "improvement" | "noise" | "unchanged" | "appeared" | "vanished" |
                                // "entered top list" / "left top list" (a kernel missing from a list cut at 20)
                                // (hotspots: "new hotspot" | "hotspot gone" | the effect verdict)
};

struct DiffResult {
  std::vector<MetricDiff> metrics;  // step first, then appeared/vanished, then ops, layers, kernels
  bool regression = false;          // any gated metric with verdict regression or appeared
  std::vector<std::string> notes;   // e.g. runs present in only one report
};

// Compares every run of `now` with the run of the same name in `base` (when both hold exactly one
// run, those two regardless of name). Throws glm5::Error for inputs that are not glm5prof reports
// (naming `base_name` / `now_name` and the missing field).
DiffResult diff_reports(const nlohmann::json& base, const nlohmann::json& now, const DiffOptions& opt,
                        const std::string& base_name = "BASE", const std::string& now_name = "NEW");

// One-sided exact Mann-Whitney U test: P(U >= u_observed) that `b` is stochastically larger than `a`
// under the null of exchangeability (exact by counting for n_a * n_b <= 2500, normal approximation
// with continuity correction beyond). Mann & Whitney 1947.
double mann_whitney_greater_p(const std::vector<double>& a, const std::vector<double>& b);

std::string diff_to_markdown(const DiffResult& d, const DiffOptions& opt);
nlohmann::json diff_to_json(const DiffResult& d, const DiffOptions& opt);
// JUnit XML: one <testcase> per gated metric; regressions are <failure>s.
std::string diff_to_junit(const DiffResult& d);

}  // namespace glm5
