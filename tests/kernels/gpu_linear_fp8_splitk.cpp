// The FP8 GEMV's in-kernel split-K sum (linear_fp8_gemv_cuda with tile counters: the last CTA of each
// output tile adds the partials) against the separate reduce kernel: bit for bit (same split order),
// at GLM-5 batch-1 shapes (o_proj 16384 -> 6144, kv_a 6144 -> 576, q_a 6144 -> 2048) and m = 3 with
// odd n, with and without accumulate, over repeated launches (the counters must be left at zero) and
// through a CUDA graph replayed three times.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/linear_fp8.h"

namespace glm5 {
namespace {

TEST(GpuLinearFp8SplitK, InKernelSumEqualsReduceKernelBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  struct Shape {
    int m, n, k;
  };
  for (const Shape sh : {Shape{1, 6144, 16384}, Shape{1, 576, 6144}, Shape{1, 2048, 6144}, Shape{3, 1000, 6144}}) {
    for (bool acc : {false, true}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE("m " + std::to_string(sh.m) + " n " + std::to_string(sh.n) + " k " + std::to_string(sh.k) +
                   " accumulate " + std::to_string(acc) + " seed " + std::to_string(seed));
      std::vector<uint8_t> codes(size_t(sh.n) * sh.k);
      for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(splitmix64(seed + i) & 0x77u);  // finite
      std::vector<float> scales(size_t((sh.n + 127) / 128) * ((sh.k + 127) / 128)), x(size_t(sh.m) * sh.k),
          y0(size_t(sh.m) * sh.n);
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = (0.5f + rng_uniform(seed, 1, i)) / 448.f;
      for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 2, i);
      for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(seed, 3, i);
      Buffer dw = to_device(codes, "w"), ds = to_device(scales, "s"), dx = to_device(x, "x");
      LinearParams p{dx.as<float>(), dw.data(), DType::F8_E4M3, nullptr, sh.m, sh.n, sh.k, acc, false};
      p.w_scale = ds.as<float>();
      const int S = linear_fp8_gemv_splits(p);
      ASSERT_GT(S, 1) << "the shape must take the split-K path";
      const size_t elems = size_t(S) * sh.m * sh.n, tiles = linear_fp8_gemv_counters(p);
      Buffer part(Where::Device, elems * 4, "partials");
      std::vector<int> zeros(tiles, 0);
      Buffer ctr = to_device(zeros, "counters");
      auto run = [&](bool counters, int launches) {
        Buffer dy = to_device(y0, "y");
        p.y = dy.as<float>();
        for (int i = 0; i < launches; ++i) {
          if (i > 0) dy.upload(y0.data(), y0.size() * 4);  // accumulate: the same start each time
          linear_fp8_gemv_cuda(p, part.as<float>(), elems, nullptr, counters ? ctr.as<int>() : nullptr,
                               counters ? tiles : 0);
        }
        CUDA_CHECK(cudaDeviceSynchronize());
        return to_host<float>(dy);
      };
      const std::vector<float> ref = run(false, 1), got = run(true, 3);
      EXPECT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * 4), 0);
      EXPECT_EQ(to_host<int>(ctr), zeros) << "counters left non-zero";
      // Captured in a graph and replayed: the counters reset inside each replay.
      Buffer dy = to_device(y0, "y");
      p.y = dy.as<float>();
      cudaStream_t st;
      CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      linear_fp8_gemv_cuda(p, part.as<float>(), elems, st, ctr.as<int>(), tiles);
      CUDA_CHECK(cudaStreamEndCapture(st, &g));
      CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
      for (int r = 0; r < 3; ++r) {
        CUDA_CHECK(cudaMemcpyAsync(dy.data(), y0.data(), y0.size() * 4, cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaGraphLaunch(ge, st));
      }
      CUDA_CHECK(cudaStreamSynchronize(st));
      const std::vector<float> graph = to_host<float>(dy);
      EXPECT_EQ(std::memcmp(ref.data(), graph.data(), ref.size() * 4), 0) << "graph replay";
      EXPECT_EQ(to_host<int>(ctr), zeros) << "counters left non-zero after graph replays";
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      cudaStreamDestroy(st);
    }
  }
}

}  // namespace
}  // namespace glm5
