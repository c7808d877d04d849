// linear_cuda (cuBLASLt, BF16 x BF16 -> FP32) vs linear_cpu on bf16-rounded x, at GLM-5's projection
// shapes (q_a 6144->2048, q_b 2048->16384, kv_a 6144->576, kv_b 512->28672, o_proj 16384->6144,
// lm_head 6144->154880) and odd ones, batch 1, 3, 32, with accumulate and an unaligned y.
// Large outputs are compared on their first and last 256 rows of W (CPU time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/linear.h"

namespace glm5 {
namespace {

// A BF16 weight [n, k] with uniform values in [-scale, scale), on the host and the device. Four
// values per splitmix64 draw: the lm_head (951M values) takes seconds, not minutes.
struct Weight {
  int n, k;
  std::vector<uint16_t> host;
  Buffer device;
  Weight(int n_, int k_) : n(n_), k(k_), host(size_t(n_) * k_) {
    const float scale = 1.f / std::sqrt(float(k));
    for (size_t i = 0; i < host.size(); i += 4) {
      const uint64_t h = splitmix64(i * 0x9e37u + size_t(n) * 31 + k);
      for (size_t q = 0; q < 4 && i + q < host.size(); ++q)
        host[i + q] = float_to_bf16_bits((float((h >> (16 * q)) & 0xffffu) / 32768.f - 1.f) * scale);
    }
    device = Buffer(Where::Device, host.size() * 2, "w");
    device.upload(host.data(), device.bytes());
  }
};

void check(LinearContext& ctx, const Weight& W, int m, bool accumulate, int y_offset) {
  const int n = W.n, k = W.k;
  const std::vector<uint16_t>& w = W.host;
  const Buffer& dw = W.device;
  std::vector<float> x(size_t(m) * k), y0(size_t(m) * n + y_offset);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(8, m + k, i);
  for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(9, m + n, i);
  Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, y0.size() * 4, "y");
  dx.upload(x.data(), dx.bytes());
  dy.upload(y0.data(), dy.bytes());
  LinearParams dp{dx.as<float>(), dw.data(), DType::BF16, dy.as<float>() + y_offset, m, n, k, accumulate};
  linear_cuda(dp, ctx, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got(y0.size());
  dy.download(got.data(), dy.bytes());

  std::vector<float> xr(x.size());
  for (size_t i = 0; i < x.size(); ++i) xr[i] = round_bf16(x[i]);
  // Reference rows of W: all, or the first and last 256.
  std::vector<std::pair<int, int>> slices = {{0, n}};
  if (n > 1024) slices = {{0, 256}, {n - 256, 256}};
  double max_abs = 0, max_ref = 0, max_rel = 0;
  for (auto [n0, ns] : slices) {
    std::vector<float> ref(size_t(m) * ns);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < ns; ++j) ref[size_t(i) * ns + j] = y0[y_offset + size_t(i) * n + n0 + j];
    linear_cpu({xr.data(), w.data() + size_t(n0) * k, DType::BF16, ref.data(), m, ns, k, accumulate});
    // linear_cpu wrote rows with stride ns; compare with the GPU's stride n.
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < ns; ++j) {
        const double r = ref[size_t(i) * ns + j], g = got[y_offset + size_t(i) * n + n0 + j];
        max_abs = std::max(max_abs, std::abs(r - g));
        max_ref = std::max(max_ref, std::abs(r));
        max_rel = std::max(max_rel, std::abs(r - g) / (std::abs(r) + 1e-2));
      }
  }
  std::printf("linear m=%d n=%d k=%d acc=%d y+%d: max abs %.3g, max |ref| %.3g, max rel %.3g\n", m, n, k,
              int(accumulate), y_offset, max_abs, max_ref, max_rel);
  EXPECT_LT(max_abs / max_ref, 1e-4);
  EXPECT_LT(max_rel, 1e-2);
  if (y_offset > 0) {
    EXPECT_EQ(got[0], y0[0]) << "wrote before y";
  }
}

TEST(GpuLinear, MatchesCpuTwinAtGlm5Shapes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;
  ctx.bf16_gemv = false;  // these tests pin the cuBLASLt path (x rounded to BF16); gpu_linear_bf16 tests the GEMV
  const std::pair<int, int> shapes[] = {{2048, 6144}, {16384, 2048}, {576, 6144}, {28672, 512},
                                        {6144, 16384}, {154880, 6144}, {37, 129}, {1000, 77}};
  for (auto [n, k] : shapes) {
    const Weight w(n, k);
    for (int m : {1, 3, 32}) check(ctx, w, m, false, 0);
  }
}

TEST(GpuLinear, AccumulateAndUnalignedOutput) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;
  ctx.bf16_gemv = false;  // these tests pin the cuBLASLt path (x rounded to BF16); gpu_linear_bf16 tests the GEMV
  const Weight w1(6144, 2048), w2(576, 6144), w3(37, 129);
  check(ctx, w1, 3, true, 0);
  check(ctx, w2, 32, true, 1);  // y 4-byte aligned only
  check(ctx, w3, 1, false, 3);
  check(ctx, w2, 32, true, 1);  // the same shape again: the cached plan
  check(ctx, w1, 1, false, 0);
}

TEST(GpuLinear, BadParamsThrow) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;
  ctx.bf16_gemv = false;  // these tests pin the cuBLASLt path (x rounded to BF16); gpu_linear_bf16 tests the GEMV
  std::vector<float> x(4), w(4), y(4);
  LinearParams p{x.data(), w.data(), DType::F32, y.data(), 1, 1, 4, false};
  EXPECT_THROW(linear_cuda(p, ctx, nullptr), Error);  // F32 weight: CUDA takes BF16 only
  p.w_dtype = DType::BF16;
  p.m = 0;
  EXPECT_THROW(linear_cuda(p, ctx, nullptr), Error);
}

}  // namespace
}  // namespace glm5

namespace glm5 {
namespace {
// split_bf16 carries x as bf16 hi + lo: compared with the CPU twin on the UNROUNDED fp32 x, the error
// must be far below what bf16 rounding of x alone gives (~3e-3 relative).
TEST(GpuLinear, SplitBf16ActivationsMatchFp32) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;
  ctx.bf16_gemv = false;  // these tests pin the cuBLASLt path (x rounded to BF16); gpu_linear_bf16 tests the GEMV
  for (auto [m, n, k, acc] : {std::tuple{1, 32, 6144, false}, std::tuple{3, 128, 6144, true},
                              std::tuple{32, 4096, 2048, false}}) {
    Weight W(n, k);
    std::vector<float> x(size_t(m) * k), y0(size_t(m) * n), got(y0.size()), ref;
    for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(21, m + k, i);
    for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(22, m + n, i);
    Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, y0.size() * 4, "y");
    dx.upload(x.data(), dx.bytes());
    dy.upload(y0.data(), dy.bytes());
    LinearParams dp{dx.as<float>(), W.device.data(), DType::BF16, dy.as<float>(), m, n, k, acc, true};
    linear_cuda(dp, ctx, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    dy.download(got.data(), dy.bytes());
    ref = y0;
    linear_cpu({x.data(), W.host.data(), DType::BF16, ref.data(), m, n, k, acc});
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
      den += double(ref[i]) * ref[i];
    }
    const double rel = std::sqrt(num / den);
    std::printf("linear split-bf16 m=%d n=%d k=%d acc=%d: relative error vs fp32 x %.3g\n", m, n, k, int(acc), rel);
    EXPECT_LT(rel, 2e-4);
  }
}
}  // namespace
}  // namespace glm5
