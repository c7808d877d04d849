// CUPTI unavailable (issue 7): GLM5_FORCE_NO_CUPTI=1 makes CuptiTracer enable nothing and report why,
// as a failing cuptiActivityEnable does (no CUPTI call is made, so this runs without a GPU); the host
// clock tracer's sync hook (what `profile` falls back to on the GPU) runs before every clock reading.
// The end-to-end fallback (profile exits 0 on the host clock and says so) is tests/cli/gpu_robustness.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "profiler/cupti_tracer.h"
#include "profiler/host_clock_tracer.h"

using namespace glm5;

TEST(NoCupti, ForcedUnavailableTracerRecordsNothingAndSaysWhy) {
  setenv("GLM5_FORCE_NO_CUPTI", "1", 1);
  {
    CuptiTracer t;
    EXPECT_FALSE(t.ok());
    ASSERT_EQ(t.errors().size(), 1u);
    EXPECT_NE(t.errors()[0].find("GLM5_FORCE_NO_CUPTI=1"), std::string::npos) << t.errors()[0];
    t.begin_op(OpDesc{0, 0, "attn.mla", 1, 0});  // no CUPTI call is made while disabled
    t.end_op();
    Timeline tl = t.finish();
    EXPECT_FALSE(tl.complete);
    EXPECT_TRUE(tl.activities.empty());
    ASSERT_FALSE(tl.messages.empty());
    EXPECT_NE(tl.messages[0].find("GLM5_FORCE_NO_CUPTI"), std::string::npos);
  }
  unsetenv("GLM5_FORCE_NO_CUPTI");
}

TEST(NoCupti, HostClockSyncRunsBeforeEveryReading) {
  HostClockTracer t;
  int syncs = 0;
  // A 2 ms "device synchronize": the op's span must include the wait at its end.
  t.set_sync([&] {
    ++syncs;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  t.begin_range("step.0");
  t.begin_op(OpDesc{0, 0, "attn.kv_cast", 8, 0});
  t.end_op();
  t.end_range();
  Timeline tl = t.finish();
  EXPECT_EQ(syncs, 4);
  ASSERT_EQ(tl.activities.size(), 1u);
  EXPECT_GE(tl.activities[0].duration_ns(), 2'000'000);
  EXPECT_EQ(tl.source, "host-clock");
}
