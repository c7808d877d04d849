// linear_cpu with FP8 block-scaled weights (the CPU twin of linear_fp8.cu): against an independent
// double-precision dequantization, with non-uniform block scales so that a wrong block index shows, a
// column shard (ldw, offset scale pointer) and parameter errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/linear.h"

namespace glm5 {
namespace {

struct Fp8Weight {
  int n, K;  // full [n, K]
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // [ceil(n/128), ceil(K/128)]
  Fp8Weight(int n_, int K_, uint32_t seed) : n(n_), K(K_), codes(size_t(n_) * K_), scales(size_t((n_ + 127) / 128) * ((K_ + 127) / 128)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 100.f);
    std::uniform_real_distribution<float> ud(0.5f, 2.f);
    for (auto& c : codes) {
      do c = float_to_e4m3_bits(nd(rng)); while ((c & 0x7f) == 0x7f);
    }
    for (auto& s : scales) s = ud(rng) / 448.f;
  }
  double value(int r, int c) const {
    return double(e4m3_bits_to_float(codes[size_t(r) * K + c])) * double(scales[size_t(r / 128) * ((K + 127) / 128) + c / 128]);
  }
};

TEST(LinearFp8Cpu, MatchesIndependentDequantization) {
  const int n = 300, K = 520, m = 3;  // blocks not multiples of 128 on both axes
  Fp8Weight W(n, K, 1);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size_t(m) * K), y(size_t(m) * n);
  for (auto& v : x) v = nd(rng);
  LinearParams p{x.data(), W.codes.data(), DType::F8_E4M3, y.data(), m, n, K, false, false};
  p.w_scale = W.scales.data();
  linear_cpu(p);
  double max_rel = 0;
  for (int i = 0; i < m; ++i)
    for (int r = 0; r < n; ++r) {
      double ref = 0, mag = 0;
      for (int c = 0; c < K; ++c) {
        ref += double(x[size_t(i) * K + c]) * W.value(r, c);
        mag += std::fabs(double(x[size_t(i) * K + c]) * W.value(r, c));
      }
      max_rel = std::max(max_rel, std::fabs(double(y[size_t(i) * n + r]) - ref) / mag);
    }
  EXPECT_LT(max_rel, 1e-6);  // fp32 store of a double sum
}

TEST(LinearFp8Cpu, ColumnShardUsesOffsetScales) {
  const int n = 256, K = 512, c0 = 256, k = 256, m = 2;  // a --tp 2 row-parallel shard: columns [256, 512)
  Fp8Weight W(n, K, 3);
  std::vector<float> x(size_t(m) * k), y(size_t(m) * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.25f;
  LinearParams p{x.data(), W.codes.data() + c0, DType::F8_E4M3, y.data(), m, n, k, false, false};
  p.ldw = K;
  p.w_scale = W.scales.data() + c0 / 128;
  p.ld_scale = (K + 127) / 128;
  linear_cpu(p);
  for (int i = 0; i < m; ++i)
    for (int r = 0; r < n; r += 37) {
      double ref = 0;
      for (int c = 0; c < k; ++c) ref += double(x[size_t(i) * k + c]) * W.value(r, c0 + c);
      EXPECT_NEAR(y[size_t(i) * n + r], ref, 1e-5 * (1 + std::fabs(ref))) << "row " << r;
    }
}

TEST(LinearFp8Cpu, MissingScalesAndBadStrideThrow) {
  std::vector<uint8_t> w(128 * 128, 0x38);
  std::vector<float> x(128, 1.f), y(128), s(1, 1.f);
  LinearParams p{x.data(), w.data(), DType::F8_E4M3, y.data(), 1, 128, 128, false, false};
  EXPECT_THROW(linear_cpu(p), Error);  // no w_scale
  p.w_scale = s.data();
  linear_cpu(p);
  EXPECT_FLOAT_EQ(y[5], 128.f);  // 0x38 = 1.0, scale 1, 128 ones
  p.ld_scale = -1;
  EXPECT_THROW(linear_cpu(p), Error);
}

}  // namespace
}  // namespace glm5
