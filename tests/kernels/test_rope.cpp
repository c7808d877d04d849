// RoPE CPU twin against hand-checked rotations and an independent double-precision computation, for
// both pair layouts (rotate_half and interleaved), a slice offset and strides.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/rope.h"

namespace glm5 {
namespace {

TEST(Rope, HandCheckedQuarterTurn) {
  // rope_dim 4, inv_freq [pi/2, 0], position 1: pair 0 turns by 90 degrees, pair 1 stays.
  const float half_pi = 1.5707963267948966f;
  std::vector<float> inv_freq = {half_pi, 0.f};
  std::vector<int32_t> pos = {1};
  // rotate_half: pairs (x0, x2), (x1, x3).
  std::vector<float> x = {1.f, 2.f, 3.f, 4.f};
  RopeParams p{x.data(), pos.data(), inv_freq.data(), 1, 1, 4, 4, 0, 4, false, 1.f};
  rope_cpu(p);
  EXPECT_NEAR(x[0], -3.f, 1e-6f);  // a cos - b sin = 1*0 - 3*1
  EXPECT_NEAR(x[2], 1.f, 1e-6f);   // b cos + a sin = 3*0 + 1*1
  EXPECT_NEAR(x[1], 2.f, 1e-6f);
  EXPECT_NEAR(x[3], 4.f, 1e-6f);
  // interleave: pairs (x0, x1), (x2, x3); attention_scaling 2 doubles the result.
  x = {1.f, 2.f, 3.f, 4.f};
  p.interleave = true;
  p.attention_scaling = 2.f;
  rope_cpu(p);
  EXPECT_NEAR(x[0], -4.f, 1e-6f);
  EXPECT_NEAR(x[1], 2.f, 1e-6f);
  EXPECT_NEAR(x[2], 6.f, 1e-6f);
  EXPECT_NEAR(x[3], 8.f, 1e-6f);
}

void check_random(bool interleave) {
  std::mt19937 rng(interleave ? 21 : 22);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int rows = 3, heads = 5, nope = 192, rope_dim = 64, head_stride = nope + rope_dim + 3;
  const int row_stride = heads * head_stride + 7;
  std::vector<float> inv_freq(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) inv_freq[i] = float(1.0 / std::pow(1e6, 2.0 * i / rope_dim));
  std::vector<int32_t> pos = {0, 17, 123457};
  std::vector<float> x(rows * row_stride);
  for (auto& v : x) v = nd(rng);
  const std::vector<float> x0 = x;
  RopeParams p{x.data(), pos.data(), inv_freq.data(), rows, heads, row_stride, head_stride, nope, rope_dim,
               interleave, 1.f};
  rope_cpu(p);
  std::vector<float> ref = x0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      const size_t base = size_t(r) * row_stride + size_t(h) * head_stride + nope;
      for (int i = 0; i < rope_dim / 2; ++i) {
        const double angle = double(float(pos[r]) * inv_freq[i]);  // the fp32 angle HF uses
        const size_t ia = interleave ? base + 2 * i : base + i;
        const size_t ib = interleave ? base + 2 * i + 1 : base + i + rope_dim / 2;
        ref[ia] = float(x0[ia] * std::cos(angle) - x0[ib] * std::sin(angle));
        ref[ib] = float(x0[ib] * std::cos(angle) + x0[ia] * std::sin(angle));
      }
    }
  double max_err = 0;
  for (size_t i = 0; i < x.size(); ++i) max_err = std::max(max_err, double(std::abs(x[i] - ref[i])));
  std::printf("rope interleave=%d max abs err vs double: %.3g\n", int(interleave), max_err);
  EXPECT_LT(max_err, 2e-6);
}

TEST(Rope, RandomRotateHalf) { check_random(false); }
TEST(Rope, RandomInterleaved) { check_random(true); }

TEST(Rope, BadParamsThrow) {
  std::vector<float> x(8), inv_freq(2);
  std::vector<int32_t> pos = {0};
  RopeParams p{x.data(), pos.data(), inv_freq.data(), 1, 1, 8, 8, 0, 3, false, 1.f};
  EXPECT_THROW(rope_cpu(p), Error);  // odd rope_dim
  p.rope_dim = 4;
  p.positions = nullptr;
  EXPECT_THROW(rope_cpu(p), Error);
}

}  // namespace
}  // namespace glm5
