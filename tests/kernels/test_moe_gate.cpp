// moe_gate_cpu: the three ops in order, and the chaining checks shared by both twins (each mismatch named).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/moe_gate.h"

namespace glm5 {
namespace {

struct Gate {
  static constexpr int B = 2, H = 64, E = 32, K = 4;
  std::vector<float> x = std::vector<float>(B * H), nw = std::vector<float>(H), xn = std::vector<float>(B * H),
                     logits = std::vector<float>(B * E), bias = std::vector<float>(E), w = std::vector<float>(K * B);
  std::vector<uint16_t> wr = std::vector<uint16_t>(E * H);
  std::vector<int32_t> ids = std::vector<int32_t>(K * B);
  explicit Gate(uint64_t seed) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 1, i);
    for (int i = 0; i < H; ++i) nw[i] = 1.f + 0.1f * rng_normal(seed, 2, i);
    for (size_t i = 0; i < wr.size(); ++i) wr[i] = float_to_bf16_bits(0.2f * rng_normal(seed, 3, i));
    for (int e = 0; e < E; ++e) bias[e] = 0.1f * rng_normal(seed, 4, e);
  }
  MoeGateParams params() {
    MoeGateParams p;
    p.norm = {x.data(), nw.data(), nullptr, xn.data(), B, H, H, H, 1e-6f};
    p.router = {xn.data(), wr.data(), DType::BF16, logits.data(), B, E, H, false, false};
    p.route = {logits.data(), bias.data(), ids.data(), w.data(), B, E, K, 4, 2, true, 2.5f};
    return p;
  }
};

TEST(MoeGateCpu, NormRouterRouteInOrder) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Gate g(seed);
  moe_gate_cpu(g.params());
  // Independent check of the chain's ends: the logits are the dot products of the normalized rows (double), and
  // each token's ids are K distinct experts with weights summing to the scaling factor (norm_topk_prob).
  for (int b = 0; b < Gate::B; ++b) {
    double ss = 0;
    for (int i = 0; i < Gate::H; ++i) ss += double(g.x[b * Gate::H + i]) * g.x[b * Gate::H + i];
    const double inv = 1.0 / std::sqrt(ss / Gate::H + 1e-6);
    for (int e = 0; e < Gate::E; ++e) {
      double dot = 0;
      for (int i = 0; i < Gate::H; ++i)
        dot += g.x[b * Gate::H + i] * inv * g.nw[i] * bf16_bits_to_float(g.wr[e * Gate::H + i]);
      EXPECT_NEAR(g.logits[b * Gate::E + e], dot, 1e-4 * (1 + std::abs(dot))) << "token " << b << " expert " << e;
    }
    double wsum = 0;
    for (int j = 0; j < Gate::K; ++j) {
      wsum += g.w[b * Gate::K + j];
      for (int i = 0; i < j; ++i) EXPECT_NE(g.ids[b * Gate::K + i], g.ids[b * Gate::K + j]);
    }
    EXPECT_NEAR(wsum, 2.5, 1e-5);
  }
}

TEST(MoeGateCpu, ChainMismatchesAreNamed) {
  Gate g(fresh_seed());
  auto expect_error = [](MoeGateParams p, const char* field) {
    try {
      moe_gate_cpu(p);
      ADD_FAILURE() << field << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  MoeGateParams p = g.params();
  p.router.x = g.x.data();
  expect_error(p, "router.x must be norm.y");
  p = g.params();
  p.route.logits = g.xn.data();
  expect_error(p, "route.logits must be router.y");
  p = g.params();
  p.route.B = 1;
  expect_error(p, "route.B = 1");
  p = g.params();
  p.router.k = Gate::H / 2;
  expect_error(p, "router.k = 32");
  p = g.params();
  p.norm.y_stride = Gate::H + 4;
  expect_error(p, "norm.y_stride = 68");
  p = g.params();
  p.route.E = Gate::E / 2;
  p.route.k = 2;
  p.route.n_group = 1;
  p.route.topk_group = 1;
  expect_error(p, "route.E = 16");
  p = g.params();
  p.router.accumulate = true;
  expect_error(p, "router.accumulate");
  p = g.params();
  p.norm.weight = nullptr;
  expect_error(p, "weight is null");
}

}  // namespace
}  // namespace glm5
