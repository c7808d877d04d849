// RMSNorm / LayerNorm CPU twins against hand-checked values and an independent double-precision
// computation on random rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/norm.h"

namespace glm5 {
namespace {

TEST(RmsNorm, HandChecked) {
  // x = [3, 4]: mean(x^2) = 12.5, rsqrt(12.5) = 0.28284271; w = [1, 2].
  std::vector<float> x = {3.f, 4.f}, w = {1.f, 2.f}, y(2);
  NormParams p{x.data(), w.data(), nullptr, y.data(), 1, 2, 2, 2, 0.f};
  rmsnorm_cpu(p);
  EXPECT_NEAR(y[0], 3.f * 0.28284271f, 1e-6f);
  EXPECT_NEAR(y[1], 2.f * 4.f * 0.28284271f, 1e-6f);
}

TEST(RmsNorm, RandomRowsStridedAndInPlace) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 2.f);
  const int rows = 3, dim = 257, stride = 300;
  std::vector<float> x(rows * stride), w(dim);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = 1.f + 0.1f * nd(rng);
  std::vector<float> y(rows * stride, 7.f), x_inplace = x;
  NormParams p{x.data(), w.data(), nullptr, y.data(), rows, dim, stride, stride, 1e-5f};
  rmsnorm_cpu(p);
  p.x = x_inplace.data();
  p.y = x_inplace.data();
  rmsnorm_cpu(p);
  double max_err = 0;
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(x[r * stride + i]) * x[r * stride + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int i = 0; i < dim; ++i) {
      const double ref = w[i] * x[r * stride + i] * inv;
      max_err = std::max(max_err, std::abs(ref - y[r * stride + i]));
      EXPECT_EQ(y[r * stride + i], x_inplace[r * stride + i]);
    }
    for (int i = dim; i < stride; ++i) EXPECT_EQ(y[r * stride + i], 7.f) << "wrote past dim";
  }
  std::printf("rmsnorm max abs err vs double: %.3g\n", max_err);
  EXPECT_LT(max_err, 1e-5);
}

TEST(LayerNorm, HandChecked) {
  // x = [1, 2, 3, 4]: mean 2.5, biased var 1.25, inv std = 1/sqrt(1.25) = 0.89442719.
  std::vector<float> x = {1.f, 2.f, 3.f, 4.f}, w = {1.f, 1.f, 2.f, 2.f}, b = {0.f, 1.f, 0.f, -1.f}, y(4);
  NormParams p{x.data(), w.data(), b.data(), y.data(), 1, 4, 4, 4, 0.f};
  layernorm_cpu(p);
  const float s = 0.89442719f;
  EXPECT_NEAR(y[0], -1.5f * s, 1e-6f);
  EXPECT_NEAR(y[1], -0.5f * s + 1.f, 1e-6f);
  EXPECT_NEAR(y[2], 0.5f * s * 2.f, 1e-6f);
  EXPECT_NEAR(y[3], 1.5f * s * 2.f - 1.f, 1e-6f);
  p.bias = nullptr;  // no bias
  layernorm_cpu(p);
  EXPECT_NEAR(y[1], -0.5f * s, 1e-6f);
}

TEST(LayerNorm, RandomRows) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.5f, 3.f);
  const int rows = 5, dim = 128;
  std::vector<float> x(rows * dim), w(dim), b(dim), y(rows * dim);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = nd(rng);
  for (auto& v : b) v = nd(rng);
  NormParams p{x.data(), w.data(), b.data(), y.data(), rows, dim, dim, dim, 1e-6f};
  layernorm_cpu(p);
  double max_err = 0;
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < dim; ++i) mean += x[r * dim + i];
    mean /= dim;
    for (int i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
    var /= dim;
    for (int i = 0; i < dim; ++i) {
      const double ref = (x[r * dim + i] - mean) / std::sqrt(var + 1e-6) * w[i] + b[i];
      max_err = std::max(max_err, std::abs(ref - y[r * dim + i]) / (1.0 + std::abs(ref)));
    }
  }
  std::printf("layernorm max rel err vs double: %.3g\n", max_err);
  EXPECT_LT(max_err, 1e-5);
}

TEST(Norm, BadParamsThrowNamingTheField) {
  std::vector<float> x(4), w(4), y(4);
  NormParams p{x.data(), w.data(), nullptr, y.data(), 1, 4, 4, 4, 1e-6f};
  p.dim = 0;
  try {
    rmsnorm_cpu(p);
    FAIL() << "expected glm5::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dim"), std::string::npos) << e.what();
  }
  p.dim = 4;
  p.x_stride = 2;
  EXPECT_THROW(layernorm_cpu(p), Error);
  p.x_stride = 4;
  p.weight = nullptr;
  EXPECT_THROW(rmsnorm_cpu(p), Error);
}

}  // namespace
}  // namespace glm5
