// CUPTI with a tiny activity buffer (GLM5_CUPTI_BUFFER_BYTES): many kernels are launched; either
// every launch has its kernel record, or the loss is reported (records_dropped or launched >
// recorded, Timeline.complete false, a message) and the analysis and the report flag the trace as
// incomplete. Nothing is lost silently.
#include <gtest/gtest.h>

#include <cstdlib>

#include "analysis/analysis.h"
#include "common/buffer.h"
#include "common/error.h"
#include "profiler/cupti_tracer.h"
#include "report/report.h"

namespace glm5 {
namespace {

__global__ void tick_kernel(int* counter) { atomicAdd(counter, 1); }

struct EnvScope {
  EnvScope(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvScope() { unsetenv(name_); }
  const char* name_;
};

TEST(CuptiSmallBufferGpu, ManyKernelsAreAllRecordedOrTheLossIsReported) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  arrange_nvtx_injection();
  int* counter = nullptr;
  CUDA_CHECK(cudaMalloc(&counter, sizeof(int)));
  CUDA_CHECK(cudaMemset(counter, 0, sizeof(int)));
  CUDA_CHECK(cudaDeviceSynchronize());

  const int n = 20000;  // ~20000 kernel + ~20000 runtime records: far more than one 1 KB buffer holds
  Timeline t;
  {
    EnvScope env("GLM5_CUPTI_BUFFER_BYTES", "1024");
    CuptiTracer tracer;
    ASSERT_EQ(tracer.buffer_bytes(), 1024u);
    {
      RangeScope s(tracer, "step.0");
      OpScope o(tracer, OpDesc{0, 0, "tick", 0, 0});
      for (int i = 0; i < n; ++i) {
        tick_kernel<<<1, 1>>>(counter);
        CUDA_CHECK_LAUNCH();
      }
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    t = tracer.finish();
  }
  int ticks = 0;
  CUDA_CHECK(cudaMemcpy(&ticks, counter, sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(counter));
  ASSERT_EQ(ticks, n);  // the kernels did run

  int recorded_ticks = 0;
  for (const Activity& a : t.activities)
    if (a.kind == ActivityKind::kernel && a.name.find("tick_kernel") != std::string::npos) ++recorded_ticks;
  std::printf("1 KB CUPTI buffers: %d launches, %d tick records, kernels_launched %llu, kernels_recorded %llu, "
              "records_dropped %llu, complete %d\n",
              n, recorded_ticks, (unsigned long long)t.kernels_launched, (unsigned long long)t.kernels_recorded,
              (unsigned long long)t.records_dropped, int(t.complete));
  for (const std::string& m : t.messages) std::printf("timeline message: %s\n", m.c_str());

  const Analysis a = analyze(t, Peaks{});
  ReportInput in;
  RunReport r;
  r.name = "tiny-buffer";
  r.analysis = a;
  in.runs.push_back(r);
  const nlohmann::json j = report_to_json(in);
  const std::string md = report_to_markdown(in);
  EXPECT_EQ(j["runs"][0]["trace"]["kernels_recorded"].get<uint64_t>(), t.kernels_recorded);
  EXPECT_EQ(j["runs"][0]["trace"]["records_dropped"].get<uint64_t>(), t.records_dropped);

  const bool all_recorded = recorded_ticks == n && t.records_dropped == 0 && t.kernels_launched == t.kernels_recorded;
  if (all_recorded) {
    EXPECT_GE(t.kernels_launched, uint64_t(n));
    EXPECT_TRUE(a.complete);
    EXPECT_TRUE(j["trace_complete"].get<bool>());
    EXPECT_EQ(md.find("INCOMPLETE TRACE"), std::string::npos);
  } else {
    // Loss: it must be visible in the counts, the Timeline, the analysis and the report.
    EXPECT_TRUE(t.records_dropped > 0 || t.kernels_launched > t.kernels_recorded)
        << "kernel records lost without a count: launched " << t.kernels_launched << ", recorded "
        << t.kernels_recorded << ", dropped " << t.records_dropped;
    EXPECT_FALSE(a.complete);
    EXPECT_FALSE(t.messages.empty());
    EXPECT_FALSE(j["trace_complete"].get<bool>());
    EXPECT_FALSE(j["incomplete_traces"].empty());
    EXPECT_NE(md.find("INCOMPLETE TRACE"), std::string::npos);
  }
}

TEST(CuptiSmallBufferGpu, BadBufferSizeIsOneClearError) {
  EnvScope env("GLM5_CUPTI_BUFFER_BYTES", "12kb");
  try {
    CuptiTracer tracer;
    FAIL() << "expected glm5::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GLM5_CUPTI_BUFFER_BYTES='12kb'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace glm5
