// linear_cpu with FP8 block-scaled weights (the CPU twin of linear_fp8.cu): against an independent
// double-precision dequantization, with non-uniform block scales so that a wrong block index shows, a
// column shard (ldw, offset scale pointer) and parameter errors. linear_fp8_mma_cpu (twin of the
// tensor-core path): its power-of-two scale choice, its f16 rounding (against g++'s _Float16), and its
// result against exact arithmetic within the documented f16 bound, across blocks of wildly different
// magnitude (1e30 ... 1e-30).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/linear.h"
#include "kernels/linear_fp8.h"
#include "kernels/sm90a/linear_fp8_wgmma.h"

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

TEST(LinearFp8MmaCpu, ScaleExponentPutsAmaxInF16Range) {
  EXPECT_EQ(fp8_mma_scale_exp(0.f), 0);
  EXPECT_EQ(fp8_mma_scale_exp(1.f), 14);  // 1 * 2^14 = 16384 in [2^14, 2^15)
  for (int p = -100; p <= 100; ++p) {  // exact powers of two: amax * 2^e = 2^14 exactly
    EXPECT_EQ(fp8_mma_scale_exp(std::ldexp(1.f, p)), 14 - p) << p;
    EXPECT_EQ(fp8_mma_scale_exp(std::nextafter(std::ldexp(1.f, p), 0.f)), 15 - p) << p;  // just below: one more
  }
  EXPECT_EQ(fp8_mma_scale_exp(1e30f), 14 - 99);   // 1e30 = 2^99.66
  EXPECT_EQ(fp8_mma_scale_exp(1e-30f), 14 + 100);  // 1e-30 = 2^-99.66
  EXPECT_EQ(fp8_mma_scale_exp(1e-36f), 126);      // 2^-119.6: clamped, 2^126 is the largest normal power
  EXPECT_EQ(fp8_mma_scale_exp(1e-44f), 126);      // subnormal
  EXPECT_EQ(fp8_mma_scale_exp(3e38f), 14 - 127);
  EXPECT_EQ(fp8_mma_scale_exp(INFINITY), -114);
  EXPECT_EQ(fp8_mma_scale_exp(NAN), -114);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-120.f, 120.f);
  for (int i = 0; i < 10000; ++i) {
    const float amax = std::exp2(u(rng));
    const int e = fp8_mma_scale_exp(amax);
    const double scaled = double(amax) * std::ldexp(1.0, e);
    EXPECT_TRUE(std::isnormal(std::ldexp(1.f, e)) && std::isnormal(std::ldexp(1.f, -e))) << amax;
    if (amax >= 0x1p-112f) EXPECT_TRUE(scaled >= 16384.0 && scaled < 32768.0) << amax << " e " << e;
    else EXPECT_LT(scaled, 16384.0) << amax;
    EXPECT_EQ(double(amax * std::ldexp(1.f, e)), scaled) << "scaling must be exact";
  }
}

// Exact reference sum x w (double) and sum |x w| for row r, token i of a dense [n, K] weight.
void exact_row(const Fp8Weight& W, const float* x, int r, double& ref, double& mag) {
  ref = mag = 0;
  for (int c = 0; c < W.K; ++c) {
    ref += double(x[c]) * W.value(r, c);
    mag += std::fabs(double(x[c]) * W.value(r, c));
  }
}

TEST(LinearFp8MmaCpu, WithinF16BoundOfExactAcrossMagnitudes) {
  const int n = 200, K = 656, m = 5;  // K % 128 = 16: a short last block; n not a multiple of 128
  Fp8Weight W(n, K, 9);
  std::mt19937 rng(10);
  std::normal_distribution<float> nd(0.f, 1.f);
  const float mags[] = {1.f, 1e30f, 1e-30f, 3e4f, 1e-6f, 1.f};  // per 128-column block
  std::vector<float> x(size_t(m) * K), y(size_t(m) * n, 7.f);
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < K; ++c) x[size_t(i) * K + c] = nd(rng) * mags[(c / 128 + i) % 6];
  LinearParams p{x.data(), W.codes.data(), DType::F8_E4M3, y.data(), m, n, K, false, false};
  p.w_scale = W.scales.data();
  linear_fp8_mma_cpu(p);
  double worst = 0;
  for (int i = 0; i < m; ++i)
    for (int r = 0; r < n; ++r) {
      double ref, mag;
      exact_row(W, x.data() + size_t(i) * K, r, ref, mag);
      const double got = y[size_t(i) * n + r];
      ASSERT_TRUE(std::isfinite(got)) << i << " " << r;
      // 2^-11 per x element (f16 after exact pow2 scaling), + fp32 store; the subnormal term is
      // 2^-39 amax per element, below 2^-11 |x| except for elements 2^-28 under their block's amax.
      const double err = std::fabs(got - ref) / mag;
      worst = std::max(worst, err);
      EXPECT_LE(err, 0x1p-11 + 1e-7) << "token " << i << " row " << r;
    }
  EXPECT_GT(worst, 1e-9);  // x really was rounded (not an exact copy of linear_cpu)
}

TEST(LinearFp8MmaCpu, ExactWhenXIsF16AndMatchesShard) {
  const int n = 256, K = 512, c0 = 128, k = 384, m = 3;  // column shard [128, 512) with ldw and offset scales
  Fp8Weight W(n, K, 11);
  std::vector<float> x(size_t(m) * k), y(size_t(m) * n), y_ref(size_t(m) * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 201) - 100) * 0.125f;  // exact in f16 after 2^e
  LinearParams p{x.data(), W.codes.data() + c0, DType::F8_E4M3, y.data(), m, n, k, false, false};
  p.ldw = K;
  p.w_scale = W.scales.data() + c0 / 128;
  p.ld_scale = (K + 127) / 128;
  linear_fp8_mma_cpu(p);
  p.y = y_ref.data();
  linear_cpu(p);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], y_ref[i], 1e-6 * (1 + std::fabs(y_ref[i]))) << i;
  // accumulate adds to y
  std::vector<float> y_acc(y.size(), 2.f);
  p.y = y_acc.data();
  p.accumulate = true;
  linear_fp8_mma_cpu(p);
  for (size_t i = 0; i < y.size(); i += 17) EXPECT_NEAR(y_acc[i], 2.f + y[i], 1e-5 * (1 + std::fabs(y[i])));
  p.w_dtype = DType::BF16;
  EXPECT_THROW(linear_fp8_mma_cpu(p), Error);
}

// linear_fp8_wgmma_cpu (twin of the block-scaled FP8 tensor-core GEMM): x quantized per token and 128 columns.
// (1) Where every x block is +-a single power of two times one magnitude, x / scale is +-448 exactly (an e4m3 value),
// so the quantization is exact and the twin equals exact arithmetic to fp32 rounding. (2) On normal random x (fresh
// seed) it differs from exact arithmetic by e4m3's rounding of x: above 1e-4 (so it did quantize) and below 4e-2 of
// sum |x w|, also with y accumulated and a column shard (ldw > k, offset scales). (3) Parameter errors.
TEST(LinearFp8WgmmaCpu, QuantizesXPerTokenAndBlock) {
  std::random_device rd;
  const uint32_t seed = rd();
  Fp8Weight W(300, 1024, seed);
  const int n = 300, m = 5;
  auto exact_rel = [&](const std::vector<float>& x, int k, int c0, const std::vector<float>& y0, bool acc,
                       const std::vector<float>& y) {
    double worst = 0;
    for (int i = 0; i < m; ++i)
      for (int r = 0; r < n; ++r) {
        double ref = acc ? y0[size_t(i) * n + r] : 0.0, mag = std::fabs(ref);
        for (int c = 0; c < k; ++c) {
          ref += double(x[size_t(i) * k + c]) * W.value(r, c0 + c);
          mag += std::fabs(double(x[size_t(i) * k + c]) * W.value(r, c0 + c));
        }
        worst = std::max(worst, std::fabs(double(y[size_t(i) * n + r]) - ref) / mag);
      }
    return worst;
  };
  std::mt19937 rng(seed + 1);
  std::normal_distribution<float> nd(0.f, 1.f);
  {  // (1) exact quantization: |x| = 2^e per block, signs random
    const int k = 1024;
    std::vector<float> x(size_t(m) * k), y(size_t(m) * n), y0;
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(rng() % 2 ? 1.f : -1.f, int((i / 128) % 7) - 3);
    LinearParams p{x.data(), W.codes.data(), DType::F8_E4M3, y.data(), m, n, k, false, false};
    p.w_scale = W.scales.data();
    linear_fp8_wgmma_cpu(p);
    EXPECT_LT(exact_rel(x, k, 0, y0, false, y), 1e-6);
  }
  for (const bool acc : {false, true}) {  // (2) random x, the whole weight and a column shard
    for (const int c0 : {0, 512}) {
      const int k = 1024 - c0, lds = 8;
      std::vector<float> x(size_t(m) * k), y0(size_t(m) * n), y;
      for (auto& v : x) v = nd(rng);
      for (auto& v : y0) v = nd(rng);
      y = y0;
      LinearParams p{x.data(), W.codes.data() + c0, DType::F8_E4M3, y.data(), m, n, k, acc, false};
      p.ldw = 1024;
      p.w_scale = W.scales.data() + c0 / 128;
      p.ld_scale = lds;
      linear_fp8_wgmma_cpu(p);
      const double rel = exact_rel(x, k, c0, y0, acc, y);
      EXPECT_GT(rel, 1e-4) << "acc " << acc << " c0 " << c0 << " seed " << seed << ": x was not quantized";
      EXPECT_LT(rel, 4e-2) << "acc " << acc << " c0 " << c0 << " seed " << seed;
    }
  }
  std::vector<float> x(size_t(m) * 1000), y(size_t(m) * n);  // (3) k not a multiple of 128, BF16 weights
  LinearParams bad{x.data(), W.codes.data(), DType::F8_E4M3, y.data(), m, n, 1000, false, false};
  bad.w_scale = W.scales.data();
  EXPECT_THROW(linear_fp8_wgmma_cpu(bad), Error);
  bad.k = 1024;
  bad.w_dtype = DType::BF16;
  EXPECT_THROW(linear_fp8_wgmma_cpu(bad), Error);
}

// linear_fp8_wgmma_plan's cut of the units (tile x 128-column block) over the CTAs, as the kernel computes it
// (linear_fp8_wgmma_units): for GLM-5's projection shapes and batches 1 to 256 on 132 and 114 SMs, both cuts cover
// every unit exactly once in order with non-empty ranges, and the kernel's owner() of every unit is the CTA whose
// range holds it; the plan's grid, max_units, partial_moved and segments (the most CTAs
// touching one tile) are those of the ranges; stream-K runs only on one token tile and then on at most `sms` CTAs of
// at least 4 units each (its ranges differ by at most one unit) and tiles of 64 / 128 tokens; split-K's CTAs never
// cross a tile; o_proj at m 64 / 128 on 132 SMs takes stream-K, at m 32 and gate+up split-K (the cost model); the
// token tile
// is the smallest of 8 / 16 / 32 / 64 / 128 that holds m (max_n 64 caps it); partials exist iff segments > 1.
TEST(LinearFp8WgmmaPlan, CutsEveryUnitOnce) {
  const int shapes[][2] = {{6144, 16384}, {4096, 6144}, {576, 6144}, {2048, 6144}, {24576, 2048}, {300, 1024},
                           {9000, 512}};
  for (const int sms : {132, 114})
    for (const auto& nk : shapes)
      for (const int m : {1, 2, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256})
        for (const int max_n : {128, 64})
          for (const bool stream_k : {true, false}) {
            const int n = nk[0], k = nk[1], KB = k / 128;
            LinearParams p{nullptr, nullptr, DType::F8_E4M3, nullptr, m, n, k, false, false};
            const Fp8WgmmaPlan q = linear_fp8_wgmma_plan(p, sms, max_n, stream_k);
            const std::string at = "n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m) +
                                   " sms=" + std::to_string(sms) + " max_n=" + std::to_string(max_n) +
                                   (stream_k ? " stream-K" : " split-K");
            const int want_n = m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 || max_n == 64 ? 64 : 128;
            ASSERT_EQ(q.N, want_n) << at;
            ASSERT_EQ(q.token_tiles, (m + q.N - 1) / q.N) << at;
            ASSERT_EQ(q.row_blocks, (n + 127) / 128) << at;
            if (q.stream_k) {
              ASSERT_TRUE(stream_k && q.token_tiles == 1) << at;
            }
            const int tiles = q.row_blocks * q.token_tiles, U = tiles * KB;
            if (q.stream_k) {
              ASSERT_LE(q.grid, sms) << at;
              ASSERT_GE(U / q.grid, std::min(4, U)) << at;
            } else {
              ASSERT_EQ(q.grid, tiles * q.S) << at;
            }
            std::vector<int> owner(size_t(U), -1);
            int next = 0, max_units = 0, min_units = U;
            for (int c = 0; c < q.grid; ++c) {
              const Fp8WgmmaUnits r = linear_fp8_wgmma_units(q, k, c);
              ASSERT_EQ(r.first, next) << at << " cta " << c;
              ASSERT_GT(r.last, r.first) << at << " cta " << c;
              if (!q.stream_k) {
                ASSERT_EQ(r.first / KB, (r.last - 1) / KB) << at << " cta " << c;
              }
              for (int u = r.first; u < r.last; ++u) owner[size_t(u)] = c;
              max_units = std::max(max_units, r.last - r.first);
              min_units = std::min(min_units, r.last - r.first);
              next = r.last;
            }
            ASSERT_EQ(next, U) << at;
            ASSERT_EQ(q.max_units, max_units) << at;
            if (q.stream_k) {
              ASSERT_LE(max_units - min_units, 1) << at;
            }
            int segments = 0;
            size_t moved = 0;
            for (int t = 0; t < tiles; ++t) {
              const int nseg = owner[size_t(t) * KB + KB - 1] - owner[size_t(t) * KB] + 1;
              segments = std::max(segments, nseg);
              for (int u = t * KB; u < t * KB + KB; ++u)  // the kernel's owner() (a tile's segments) agrees
                ASSERT_EQ(linear_fp8_wgmma_owner(q, k, u), owner[size_t(u)]) << at << " unit " << u;
              const int tt = t % q.token_tiles, rb = t / q.token_tiles;
              if (nseg > 1) moved += size_t(nseg) * std::min(q.N, m - tt * q.N) * std::min(128, n - 128 * rb);
            }
            ASSERT_EQ(q.segments, segments) << at;
            ASSERT_EQ(q.partial_moved, moved) << at;
            ASSERT_EQ(q.partial_elems, segments > 1 ? size_t(segments) * m * n : 0) << at;
            ASSERT_EQ(q.counters, segments > 1 ? size_t(tiles) : 0) << at;
            if (q.stream_k) {
              ASSERT_GE(q.N, 64) << at;
            }
            if (sms == 132 && stream_k && max_n == 128 && (m == 64 || m == 128) && k == 16384) {
              EXPECT_TRUE(q.stream_k) << at;
            }
            if (sms == 132 && k == 16384 && m == 32) {
              EXPECT_FALSE(q.stream_k) << at;
            }
            if (sms == 132 && stream_k && (n == 4096 || n == 2048) && k == 6144) {
              EXPECT_FALSE(q.stream_k) << at;
            }
          }
}

}  // namespace
}  // namespace glm5
