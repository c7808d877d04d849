// CuptiTracer on a real GPU: kernels launched inside begin_op/end_op are recorded and attributed.
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "common/buffer.h"
#include "common/error.h"
#include "profiler/cupti_tracer.h"

namespace glm5 {
namespace {

__global__ void scale_kernel(float* x, int n, float s) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

__global__ void add_kernel(float* x, int n, float v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

TEST(CuptiTracerGpu, KernelsAreRecordedAndAttributed) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  arrange_nvtx_injection();  // before the first NVTX call of this process
  const int n = 1 << 20;
  float* x = nullptr;
  CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CUDA_CHECK(cudaDeviceSynchronize());

  CuptiTracer tracer;
  for (int step = 0; step < 2; ++step) {
    RangeScope s(tracer, "step." + std::to_string(step));
    RangeScope l(tracer, "layer.0");
    {
      OpScope o(tracer, OpDesc{step, 0, "attn.kv_cast", 2.0 * n * sizeof(float), 0});
      scale_kernel<<<(n + 255) / 256, 256>>>(x, n, 2.0f);
      CUDA_CHECK_LAUNCH();
      scale_kernel<<<(n + 255) / 256, 256>>>(x, n, 0.5f);
      CUDA_CHECK_LAUNCH();
    }
    {
      OpScope o(tracer, OpDesc{step, 0, "attn.mla", 2.0 * n * sizeof(float), double(n)});
      add_kernel<<<(n + 255) / 256, 256>>>(x, n, 1.0f);
      CUDA_CHECK_LAUNCH();
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  const Timeline t = tracer.finish();
  for (const std::string& m : t.messages) std::printf("timeline message: %s\n", m.c_str());
  CUDA_CHECK(cudaFree(x));

  EXPECT_EQ(t.source, "cupti");
  int cast = 0, mla = 0;
  for (const Activity& a : t.activities) {
    if (a.kind != ActivityKind::kernel) continue;
    EXPECT_GE(a.device, 0);
    EXPECT_GT(a.end_ns, a.start_ns);
    EXPECT_GE(a.step, 0) << a.name;
    EXPECT_EQ(a.layer, 0) << a.name;
    if (a.op == "attn.kv_cast") {
      ++cast;
      EXPECT_NE(a.name.find("scale_kernel"), std::string::npos) << a.name;
      EXPECT_EQ(a.grid.x, (n + 255) / 256);
      EXPECT_EQ(a.block.x, 256);
    }
    if (a.op == "attn.mla") ++mla;
  }
  EXPECT_EQ(cast, 4);
  EXPECT_EQ(mla, 2);
  EXPECT_EQ(t.kernels_recorded, 6u);
  EXPECT_EQ(t.records_dropped, 0u);
  EXPECT_FALSE(t.devices.empty());
  int markers = 0;
  for (const Range& r : t.ranges) markers += r.kind == RangeKind::user_annotation;
  std::printf("NVTX ranges recorded: %d (expected 2 steps x (step, layer, 2 ops) = 8 with injection)\n", markers);

  const Analysis an = analyze(t, Peaks{4800, 989});
  EXPECT_EQ(an.steps.size(), 2u);
  ASSERT_FALSE(an.hotspots.empty());
  EXPECT_EQ(an.hotspots.front().kind, "kv_dtype_cast");
}

TEST(CuptiTracerGpu, SecondConcurrentTracerDegradesInsteadOfFailing) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  CuptiTracer first;
  CuptiTracer second;
  EXPECT_FALSE(second.ok());
  const Timeline t2 = second.finish();
  EXPECT_FALSE(t2.complete);
  const Timeline t1 = first.finish();
  EXPECT_EQ(t1.source, "cupti");
}

}  // namespace
}  // namespace glm5
