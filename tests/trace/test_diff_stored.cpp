// The regression gate on stored H200 reports (reports/baselines, device run of 2026-11-29): the same
// fp8 deployment profiled twice must pass; the same deployment serving its FP8 KV cache through a
// full-pool cast must be caught.
#include <gtest/gtest.h>

#include "analysis/diff.h"
#include "report/diff_input.h"

using namespace glm5;

namespace {
std::string baseline(const char* name) { return std::string(GLM5_SOURCE_DIR) + "/reports/baselines/" + name; }
}  // namespace

TEST(DiffStoredH200, NoiseOnlyPairPasses) {
  DiffResult d = diff_reports(load_report_or_trace(baseline("h200-glm5-b1-ctx32k-fp8.json")),
                              load_report_or_trace(baseline("h200-glm5-b1-ctx32k-fp8-rerun.json")), DiffOptions{});
  EXPECT_FALSE(d.regression) << diff_to_markdown(d, DiffOptions{});
  EXPECT_EQ(d.metrics.at(0).group, "step");
}

TEST(DiffStoredH200, FullPoolCastComingBackIsCaught) {
  DiffResult d = diff_reports(load_report_or_trace(baseline("h200-glm5-b1-ctx32k-fp8.json")),
                              load_report_or_trace(baseline("h200-glm5-b1-ctx32k-cast.json")), DiffOptions{});
  EXPECT_TRUE(d.regression);
  EXPECT_EQ(d.metrics.at(0).verdict, "regression");
  EXPECT_LT(d.metrics.at(0).p_value, 0.05);
  bool cast_appeared = false;
  for (const MetricDiff& m : d.metrics) cast_appeared |= m.verdict == "appeared" && m.metric == "attn.kv_cast";
  EXPECT_TRUE(cast_appeared) << diff_to_markdown(d, DiffOptions{});
}
