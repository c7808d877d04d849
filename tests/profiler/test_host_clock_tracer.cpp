#include <gtest/gtest.h>

#include <thread>

#include "analysis/analysis.h"
#include "common/error.h"
#include "profiler/host_clock_tracer.h"
#include "profiler/nvtx_tracer.h"

namespace glm5 {
namespace {

void busy_us(int us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Two steps of two layers, each a 1200 us cast and a 100 us attention op, traced on the host clock.
Timeline trace_two_steps() {
  HostClockTracer tracer;
  for (int step = 0; step < 2; ++step) {
    RangeScope s(tracer, "step." + std::to_string(step));
    for (int layer = 0; layer < 2; ++layer) {
      RangeScope l(tracer, "layer." + std::to_string(layer));
      // The cast is 12x the attention so that it stays above half of the step even when a loaded CI
      // machine (ASan, parallel ctest on two cores) preempts the tracer between ops: a 3:1 ratio once
      // measured 49% there.
      { OpScope o(tracer, OpDesc{step, layer, "attn.kv_cast", 1e6, 0}); busy_us(1200); }
      { OpScope o(tracer, OpDesc{step, layer, "attn.mla", 1e5, 1e6}); busy_us(100); }
    }
  }
  return tracer.finish();
}

TEST(HostClockTracer, OpsBecomeAttributedCpuKernelsAndRangesNest) {
  // The cast's share of the step depends on wall time: a machine running many jobs on two cores can
  // preempt the thread between ops for tens of milliseconds (measured 26% once with 12 copies of this test
  // at once). The structure and the exact share below are checked on every run; the > 50% bound on the
  // quietest of up to three runs.
  auto cast_share = [](const Timeline& x) {
    const Analysis a = analyze(x, Peaks{});
    return a.hotspots.empty() ? 0.0 : a.hotspots.front().share_of_step;
  };
  Timeline t = trace_two_steps();
  for (int attempt = 1; attempt < 3 && cast_share(t) <= 0.5; ++attempt) t = trace_two_steps();
  EXPECT_EQ(t.source, "host-clock");
  EXPECT_TRUE(t.complete);
  ASSERT_EQ(t.activities.size(), 8u);
  for (const Activity& a : t.activities) {
    EXPECT_EQ(a.kind, ActivityKind::kernel);
    EXPECT_EQ(a.device, -1);
    EXPECT_GE(a.step, 0);
    EXPECT_GE(a.layer, 0);
    EXPECT_GT(a.duration_ns(), 0);
  }
  EXPECT_EQ(t.ops.size(), 8u);
  ASSERT_EQ(t.ranges.size(), 2u + 4u + 8u);
  for (const Range& r : t.ranges) {
    if (r.name.rfind("layer.", 0) == 0) {
      EXPECT_EQ(r.depth, 1);
      EXPECT_GE(r.step, 0);
    }
    if (r.name == "attn.mla") {
      EXPECT_EQ(r.depth, 2);
    }
  }
  const Analysis a = analyze(t, Peaks{});
  ASSERT_EQ(a.steps.size(), 2u);
  EXPECT_GE(a.step_median_us, 2 * (1200 + 100));  // the step range
  // The hotspot's share, recomputed from the timeline: the cast activities' mean time per step over the
  // median step.
  double cast_ns = 0;
  for (const Activity& x : t.activities)
    if (x.op == "attn.kv_cast") cast_ns += static_cast<double>(x.duration_ns());
  const double expected_share = cast_ns / 2 / 1e3 / a.step_median_us;
  EXPECT_EQ(a.hotspots.front().kind, "kv_dtype_cast");
  EXPECT_NEAR(a.hotspots.front().share_of_step, expected_share, 1e-9);
  EXPECT_GT(a.hotspots.front().share_of_step, 0.5);
}

TEST(HostClockTracer, MismatchedEndsThrowAndOpenSpansAreClosedAtFinish) {
  HostClockTracer tracer;
  EXPECT_THROW(tracer.end_range(), Error);
  EXPECT_THROW(tracer.end_op(), Error);
  tracer.begin_range("step.0");
  EXPECT_THROW(tracer.end_op(), Error);
  tracer.begin_op(OpDesc{0, 0, "attn.mla", 0, 0});
  EXPECT_THROW(tracer.end_range(), Error);
  const Timeline t = tracer.finish();
  EXPECT_EQ(t.activities.size(), 1u);
  EXPECT_EQ(t.ranges.size(), 2u);
  EXPECT_FALSE(t.messages.empty());
}

TEST(NvtxTracer, PushAndPopWithoutAProfilerAttached) {
  NvtxTracer tracer;
  RangeScope s(tracer, "step.0");
  OpScope o(tracer, OpDesc{0, 0, "attn.mla", 0, 0});
}

}  // namespace
}  // namespace glm5
