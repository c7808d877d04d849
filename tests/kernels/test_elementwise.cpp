// Elementwise CPU twins: embedding (F32 and BF16 tables), residual add, SwiGLU, argmax (ties, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/elementwise.h"

namespace glm5 {
namespace {

TEST(Embedding, F32AndBf16Tables) {
  const int vocab = 5, dim = 3;
  std::vector<float> table(vocab * dim);
  for (int i = 0; i < vocab * dim; ++i) table[i] = 0.5f * i - 2.f;  // exact in bf16
  std::vector<uint16_t> table_bf16(vocab * dim);
  for (int i = 0; i < vocab * dim; ++i) table_bf16[i] = float_to_bf16_bits(table[i]);
  std::vector<int32_t> tokens = {4, 0, 4, 2};
  std::vector<float> out(tokens.size() * dim);
  EmbeddingParams p{tokens.data(), table.data(), DType::F32, out.data(), int(tokens.size()), dim};
  embedding_cpu(p);
  for (size_t r = 0; r < tokens.size(); ++r)
    for (int i = 0; i < dim; ++i) EXPECT_EQ(out[r * dim + i], table[tokens[r] * dim + i]);
  std::fill(out.begin(), out.end(), 99.f);
  p.table = table_bf16.data();
  p.table_dtype = DType::BF16;
  embedding_cpu(p);
  EXPECT_EQ(out[0], 0.5f * 12 - 2.f);  // token 4, element 0
  EXPECT_EQ(out[dim + 2], 0.5f * 2 - 2.f);
  p.table_dtype = DType::F8_E4M3;
  EXPECT_THROW(embedding_cpu(p), Error);
}

TEST(AddInplace, Adds) {
  std::vector<float> y = {1.f, 2.f, 3.f}, x = {0.5f, -2.f, 10.f};
  add_inplace_cpu({y.data(), x.data(), 3});
  EXPECT_EQ(y, (std::vector<float>{1.5f, 0.f, 13.f}));
  EXPECT_THROW(add_inplace_cpu({y.data(), nullptr, 3}), Error);
}

TEST(SiluMul, HandCheckedAndRandom) {
  // silu(0) = 0, silu(1) = 1/(1+e^-1) = 0.7310586, silu(-1) = -0.2689414.
  std::vector<float> gu = {0.f, 1.f, -1.f, /*up*/ 5.f, 2.f, 3.f};
  std::vector<float> out(3);
  silu_mul_cpu({gu.data(), out.data(), 1, 3});
  EXPECT_NEAR(out[0], 0.f, 1e-7f);
  EXPECT_NEAR(out[1], 2.f * 0.7310586f, 1e-6f);
  EXPECT_NEAR(out[2], 3.f * -0.2689414f, 1e-6f);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 4.f);
  const int rows = 3, inter = 77;
  std::vector<float> g(rows * 2 * inter), o(rows * inter);
  for (auto& v : g) v = nd(rng);
  silu_mul_cpu({g.data(), o.data(), rows, inter});
  double max_err = 0;
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < inter; ++i) {
      const double gv = g[r * 2 * inter + i], uv = g[r * 2 * inter + inter + i];
      const double ref = gv / (1 + std::exp(-gv)) * uv;
      max_err = std::max(max_err, std::abs(ref - o[r * inter + i]) / (1 + std::abs(ref)));
    }
  std::printf("silu_mul max rel err vs double: %.3g\n", max_err);
  EXPECT_LT(max_err, 1e-6);
}

TEST(Argmax, TiesNaNAndRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = {
      1.f, 3.f, 3.f, 2.f,    // tie: first index 1
      nan, -5.f, nan, -6.f,  // NaN ignored: 1
      nan, nan, nan, nan,    // all NaN: 0
      -inf, -inf, inf, inf,  // +inf tie: 2
  };
  std::vector<int32_t> out(4, -1);
  argmax_cpu({logits.data(), out.data(), 4, 4});
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, 0, 2}));
  EXPECT_THROW(argmax_cpu({logits.data(), out.data(), 4, 0}), Error);
}

}  // namespace
}  // namespace glm5
