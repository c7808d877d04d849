// The BF16-weight GEMV (kernels/linear_bf16.h, what linear_cuda runs for small BF16 projections at
// m <= 4) against linear_cpu (fp32 x, fp32 products: rel 1e-5 of sum |x w|), at GLM-5's router
// (256 x 6144) and indexer weights_proj (32 x 6144), odd n and k, m = 1..4, with accumulate; the
// dispatch rule; and agreement with the cuBLASLt path it replaces (x rounded to BF16 there: 2^-8).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/linear.h"
#include "kernels/linear_bf16.h"

namespace glm5 {
namespace {

TEST(GpuLinearBf16Gemv, MatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  struct Shape {
    int n, k;
  };
  for (const Shape sh : {Shape{256, 6144}, Shape{32, 6144}, Shape{37, 1032}, Shape{5, 8}, Shape{1000, 2048}}) {
    for (int m = 1; m <= 4; ++m) {
      for (bool acc : {false, true}) {
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE("n " + std::to_string(sh.n) + " k " + std::to_string(sh.k) + " m " + std::to_string(m) +
                     " accumulate " + std::to_string(acc) + " seed " + std::to_string(seed));
        std::vector<uint16_t> w(size_t(sh.n) * sh.k);
        std::vector<float> x(size_t(m) * sh.k), y0(size_t(m) * sh.n);
        for (size_t i = 0; i < w.size(); ++i) w[i] = float_to_bf16_bits(rng_normal(seed, 1, i) / 64.f);
        for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 2, i);
        for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(seed, 3, i);
        Buffer dw = to_device(w, "w"), dx = to_device(x, "x"), dy = to_device(y0, "y");
        LinearParams p{dx.as<float>(), dw.data(), DType::BF16, dy.as<float>(), m, sh.n, sh.k, acc, false};
        ASSERT_TRUE(linear_bf16_gemv_preferred(p));
        LinearContext ctx;
        linear_cuda(p, ctx, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got = to_host<float>(dy);
        std::vector<float> ref = y0;
        LinearParams h = p;
        h.x = x.data();
        h.w = w.data();
        h.y = ref.data();
        linear_cpu(h);
        double worst = 0;
        for (int t = 0; t < m; ++t)
          for (int r = 0; r < sh.n; ++r) {
            double l1 = acc ? std::fabs(y0[size_t(t) * sh.n + r]) : 0.0;
            for (int c = 0; c < sh.k; ++c)
              l1 += std::fabs(double(x[size_t(t) * sh.k + c]) * bf16_bits_to_float(w[size_t(r) * sh.k + c]));
            const size_t i = size_t(t) * sh.n + r;
            worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / std::max(l1, 1e-30));
          }
        EXPECT_LT(worst, 1e-5);
        if (m == 1 && !acc && sh.n == 256)
          std::printf("bf16 gemv n=%d k=%d: max err / sum|x w| %.3g vs CPU\n", sh.n, sh.k, worst);
        // The cuBLASLt path (x rounded to BF16) agrees within BF16's 2^-8 of sum |x w|.
        LinearContext lt;
        lt.bf16_gemv = false;
        Buffer dy2 = to_device(y0, "y2");
        LinearParams q = p;
        q.y = dy2.as<float>();
        linear_cuda(q, lt, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> lt_y = to_host<float>(dy2);
        double e = 0, m1 = 0;
        for (size_t i = 0; i < lt_y.size(); ++i) {
          e = std::max(e, std::fabs(double(lt_y[i]) - got[i]));
          m1 = std::max(m1, std::fabs(double(got[i])));
        }
        EXPECT_LT(e, 2e-2 * std::max(m1, 1.0)) << "vs cuBLASLt";
      }
    }
  }
}

TEST(GpuLinearBf16Gemv, DispatchRule) {
  LinearParams p{nullptr, nullptr, DType::BF16, nullptr, 1, 256, 6144, false, false};
  alignas(16) static float xs[16];
  alignas(16) static uint16_t ws[16];
  p.x = xs;
  p.w = ws;
  EXPECT_TRUE(linear_bf16_gemv_preferred(p));
  p.m = 5;
  EXPECT_FALSE(linear_bf16_gemv_preferred(p));  // larger batches: cuBLASLt
  p.m = 1;
  p.n = 154880;  // lm_head: cuBLASLt streams it at full bandwidth
  EXPECT_FALSE(linear_bf16_gemv_preferred(p));
  p.n = 256;
  p.k = 6140;  // not a multiple of 8
  EXPECT_FALSE(linear_bf16_gemv_preferred(p));
  p.k = 6144;
  p.split_bf16 = true;
  EXPECT_TRUE(linear_bf16_gemv_preferred(p));  // fp32 x is at least split_bf16's precision
  p.split_bf16 = false;
  p.w_dtype = DType::F8_E4M3;
  EXPECT_FALSE(linear_bf16_gemv_preferred(p));
}

}  // namespace
}  // namespace glm5
