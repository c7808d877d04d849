// linear_cpu against a hand-checked product and an independent computation with F32 and BF16
// weights, including accumulate (y += x W^T) and odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/linear.h"
#include "kernels/rope.h"

namespace glm5 {
namespace {

TEST(LinearCpu, HandChecked) {
  // x [2,3], w [2,3]: y = x w^T.
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, w = {1, 0, -1, 0.5f, 0.5f, 0.5f}, y(4);
  LinearParams p{x.data(), w.data(), DType::F32, y.data(), 2, 2, 3, false};
  linear_cpu(p);
  EXPECT_EQ(y, (std::vector<float>{-2.f, 3.f, -2.f, 7.5f}));
  p.accumulate = true;
  linear_cpu(p);
  EXPECT_EQ(y, (std::vector<float>{-4.f, 6.f, -4.f, 15.f}));
}

TEST(LinearCpu, RandomF32AndBf16) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int m = 3, n = 37, k = 129;
  std::vector<float> x(m * k), w(n * k), y0(m * n);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = nd(rng);
  for (auto& v : y0) v = nd(rng);
  std::vector<uint16_t> wb(n * k);
  for (int i = 0; i < n * k; ++i) wb[i] = float_to_bf16_bits(w[i]);
  for (DType dt : {DType::F32, DType::BF16}) {
    for (bool acc : {false, true}) {
      std::vector<float> y = y0;
      LinearParams p{x.data(), dt == DType::F32 ? (const void*)w.data() : (const void*)wb.data(), dt, y.data(),
                     m, n, k, acc};
      linear_cpu(p);
      double max_err = 0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          long double s = 0;
          for (int c = 0; c < k; ++c) {
            const float wv = dt == DType::F32 ? w[j * k + c] : round_bf16(w[j * k + c]);
            s += (long double)x[i * k + c] * wv;
          }
          const double ref = double(s) + (acc ? y0[i * n + j] : 0.0);
          max_err = std::max(max_err, std::abs(ref - y[i * n + j]) / (1 + std::abs(ref)));
        }
      std::printf("linear_cpu %s accumulate=%d max rel err: %.3g\n", dtype_name(dt).c_str(), int(acc), max_err);
      EXPECT_LT(max_err, 1e-6);
    }
  }
}

TEST(LinearCpu, BadParamsThrow) {
  std::vector<float> x(4), w(4), y(4);
  LinearParams p{x.data(), w.data(), DType::F16, y.data(), 1, 1, 4, false};
  EXPECT_THROW(linear_cpu(p), Error);
  p.w_dtype = DType::F32;
  p.k = -1;
  EXPECT_THROW(linear_cpu(p), Error);
}

// linear_group_cpu: each projection exactly as linear_cpu alone; a count outside 1..4 throws.
TEST(LinearCpu, GroupIsEachProjection) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> nd(0.f, 1.f);
  const int m = 2, k = 33;
  std::vector<float> x(size_t(m) * k), w1(5 * k), w2(3 * k), a1(m * 5), a2(m * 3), b1(m * 5), b2(m * 3);
  for (auto* v : {&x, &w1, &w2})
    for (float& e : *v) e = nd(rng);
  LinearGroupParams g;
  g.count = 2;
  g.p[0] = LinearParams{x.data(), w1.data(), DType::F32, a1.data(), m, 5, k, false};
  g.p[1] = LinearParams{x.data(), w2.data(), DType::F32, a2.data(), m, 3, k, false};
  linear_group_cpu(g);
  linear_cpu({x.data(), w1.data(), DType::F32, b1.data(), m, 5, k, false});
  linear_cpu({x.data(), w2.data(), DType::F32, b2.data(), m, 3, k, false});
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(a2, b2);
  EXPECT_NE(a1[0], 0.f);
  g.count = 5;
  EXPECT_THROW(linear_group_cpu(g), Error);
  g.count = 0;
  EXPECT_THROW(linear_group_cpu(g), Error);
}

// linear_group_cpu with LinearGroupParams::norm: each projection of RMSNorm(x) = w * x / sqrt(mean(x^2) + eps),
// against the formula evaluated here in double (tokens of different scales, so a per-token inv_rms shows); bad
// norm parameters throw naming the field.
TEST(LinearCpu, GroupWithInputNormIsProjectionOfNormalizedRows) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.5f, 1.5f);
  const int m = 3, k = 40, n = 6;
  const float eps = 1e-5f;
  std::vector<float> x(size_t(m) * k), w(size_t(n) * k), nw(k), y(size_t(m) * n);
  for (int t = 0; t < m; ++t)
    for (int c = 0; c < k; ++c) x[size_t(t) * k + c] = nd(rng) * float(1 + 3 * t);
  for (float& e : w) e = nd(rng);
  for (float& e : nw) e = ud(rng);
  LinearGroupParams g;
  g.count = 1;
  g.p[0] = LinearParams{x.data(), w.data(), DType::F32, y.data(), m, n, k, false};
  g.norm = {nw.data(), eps};
  linear_group_cpu(g);
  for (int t = 0; t < m; ++t) {
    double ss = 0;
    for (int c = 0; c < k; ++c) ss += double(x[size_t(t) * k + c]) * x[size_t(t) * k + c];
    const double inv = 1.0 / std::sqrt(ss / k + eps);
    for (int r = 0; r < n; ++r) {
      double want = 0, mag = 0;
      for (int c = 0; c < k; ++c) {
        const double v = double(w[size_t(r) * k + c]) * nw[c] * x[size_t(t) * k + c] * inv;
        want += v;
        mag += std::fabs(v);
      }
      EXPECT_NEAR(y[size_t(t) * n + r], want, 1e-6 * mag) << "token " << t << " row " << r;
    }
  }
  g.norm.eps = std::nanf("");
  EXPECT_THROW(linear_group_cpu(g), Error);
  g.norm.eps = eps;
  // With a RoPE of the output (LinearGroupParams::rope): the same product, then rope_cpu on it.
  std::vector<float> y_rope(y.size()), y_ref(y.size());
  std::vector<int32_t> pos(m);
  std::vector<float> inv_freq = {1.f, 0.1f};
  for (int t = 0; t < m; ++t) pos[t] = 7 + 1000 * t;
  LinearGroupParams gr = g;
  gr.p[0].y = y_rope.data();
  gr.rope[0] = RopeParams{y_rope.data(), pos.data(), inv_freq.data(), m, 1, n, n, 2, 4, true, 1.f};
  linear_group_cpu(gr);
  gr.p[0].y = y_ref.data();
  gr.rope[0] = {};
  linear_group_cpu(gr);
  rope_cpu(RopeParams{y_ref.data(), pos.data(), inv_freq.data(), m, 1, n, n, 2, 4, true, 1.f});
  EXPECT_EQ(y_rope, y_ref);
  EXPECT_NE(y_rope, y);  // the rope moved columns 2..5
  gr.p[0].y = y_rope.data();
  gr.rope[0] = RopeParams{y_rope.data(), pos.data(), inv_freq.data(), m, 1, n, n, 2, 4, false, 1.f};
  EXPECT_THROW(linear_group_cpu(gr), Error);  // not interleaved
  gr.rope[0] = RopeParams{y_ref.data(), pos.data(), inv_freq.data(), m, 1, n, n, 2, 4, true, 1.f};
  EXPECT_THROW(linear_group_cpu(gr), Error);  // x is not the projection's y
  std::vector<float> x2(x);
  g.count = 2;
  g.p[1] = g.p[0];
  g.p[1].x = x2.data();
  EXPECT_THROW(linear_group_cpu(g), Error);  // the norm needs one shared x
}

}  // namespace
}  // namespace glm5
