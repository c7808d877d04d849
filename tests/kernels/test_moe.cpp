// MoE CPU twins: routing against hand-worked cases (group limiting, bias for choice only, masked
// groups scoring 0, ties) and a sort-based reference; experts against a double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/moe.h"
#include "kernels/norm.h"

namespace glm5 {
namespace {

struct RouteOut {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

RouteOut route(const std::vector<float>& logits, const std::vector<float>& bias, int B, int E, int k, int n_group,
               int topk_group, bool norm, float scale) {
  RouteOut r{std::vector<int32_t>(B * k, -1), std::vector<float>(B * k, -1.f)};
  MoeRouteParams p{logits.data(), bias.data(), r.ids.data(), r.weights.data(), B, E, k, n_group, topk_group, norm, scale};
  moe_route_cpu(p);
  return r;
}

TEST(MoeRoute, HandCheckedGroupLimitedAndBiasForChoiceOnly) {
  // s = sigmoid([ln 3, 0, 0, 0]) = [0.75, 0.5, 0.5, 0.5]; choice = s + bias = [0.85, 0.5, 0.8, 0.1].
  // Groups {0,1} score 1.35, {2,3} score 0.9: keep group 0, so top-2 = [0, 1] (not [0, 2]).
  // Weights use the un-biased s: [0.75, 0.5] / 1.25 * 2.5 = [1.5, 1.0].
  const std::vector<float> logits = {std::log(3.f), 0.f, 0.f, 0.f}, bias = {0.1f, 0.f, 0.3f, -0.4f};
  RouteOut r = route(logits, bias, 1, 4, 2, 2, 1, true, 2.5f);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.weights[0], 1.5f, 1e-6f);
  EXPECT_NEAR(r.weights[1], 1.0f, 1e-6f);
  // Without normalisation: s * 2.5.
  r = route(logits, bias, 1, 4, 2, 2, 1, false, 2.5f);
  EXPECT_NEAR(r.weights[0], 0.75f * 2.5f, 1e-6f);
  EXPECT_NEAR(r.weights[1], 0.5f * 2.5f, 1e-6f);
  // k = 3 with one group kept: the third pick comes from the dropped group at choice score -inf;
  // experts 2 and 3 tie at -inf, the lower index wins.
  r = route(logits, bias, 1, 4, 3, 2, 1, false, 1.f);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(r.weights[2], 0.5f, 1e-6f);
  // A kept expert with a negative biased choice still beats the dropped group (-inf, HF
  // masked_fill(~mask, -inf)): choice [0.55, -0.4, -4.5, -4.5], group 0 (0.15) beats group 1
  // (-9.0), top-2 = [0, 1]. (Masking with 0.0, as older DeepSeek-V3 ports do, would give [0, 2].)
  const std::vector<float> neg_bias = {-0.2f, -0.9f, -5.f, -5.f};  // choice [0.55, -0.4, -4.5, -4.5]
  r = route(logits, neg_bias, 1, 4, 2, 2, 1, false, 1.f);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
}

TEST(MoeRoute, TiesGoToTheLowerIndex) {
  const std::vector<float> logits(6, 0.f), bias(6, 0.f);
  RouteOut r = route(logits, bias, 1, 6, 3, 1, 1, true, 1.f);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 2}));
  for (float w : r.weights) EXPECT_NEAR(w, 1.f / 3.f, 1e-7f);
}

TEST(MoeRoute, NanChoiceScoresArePickedLast) {
  // Experts 0 and 2 have NaN logits: the finite ones come first, whatever their value; the NaNs (as -inf)
  // only once those run out, lower index first.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {nan, -3.f, nan, -2.f}, bias(4, 0.f), w(4);
  std::vector<int32_t> ids(4);
  moe_route_cpu({logits.data(), bias.data(), ids.data(), w.data(), 1, 4, 4, 1, 1, false, 1.f});
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 1, 0, 2}));
}

TEST(MoeRoute, RandomAgainstSortReference) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 2.f);
  const int B = 5, E = 256, k = 8, n_group = 8, topk_group = 4, gs = E / n_group;
  std::vector<float> logits(B * E), bias(E);
  for (auto& v : logits) v = nd(rng);
  for (auto& v : bias) v = 0.1f * nd(rng);
  RouteOut r = route(logits, bias, B, E, k, n_group, topk_group, true, 2.5f);
  for (int b = 0; b < B; ++b) {
    std::vector<float> s(E), c(E);
    for (int e = 0; e < E; ++e) {
      s[e] = 1.f / (1.f + std::exp(-logits[b * E + e]));
      c[e] = s[e] + bias[e];
    }
    std::vector<float> gscore(n_group);
    for (int g = 0; g < n_group; ++g) {
      std::vector<float> m(c.begin() + g * gs, c.begin() + (g + 1) * gs);
      std::sort(m.begin(), m.end(), std::greater<float>());
      gscore[g] = m[0] + m[1];
    }
    std::vector<int> order(n_group);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b2) { return gscore[a] > gscore[b2]; });
    std::vector<float> masked(E, -std::numeric_limits<float>::infinity());
    for (int i = 0; i < topk_group; ++i)
      for (int e = order[i] * gs; e < (order[i] + 1) * gs; ++e) masked[e] = c[e];
    std::vector<int> eorder(E);
    std::iota(eorder.begin(), eorder.end(), 0);
    std::stable_sort(eorder.begin(), eorder.end(), [&](int a, int b2) { return masked[a] > masked[b2]; });
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += s[eorder[j]];
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(r.ids[b * k + j], eorder[j]) << "b " << b << " j " << j;
      EXPECT_NEAR(r.weights[b * k + j], s[eorder[j]] / sum * 2.5, 1e-6);
    }
  }
}

TEST(MoeRoute, BadParamsThrow) {
  std::vector<float> logits(6), bias(6), w(2);
  std::vector<int32_t> ids(2);
  MoeRouteParams p{logits.data(), bias.data(), ids.data(), w.data(), 1, 6, 2, 4, 1, true, 1.f};
  EXPECT_THROW(moe_route_cpu(p), Error);  // 4 does not divide 6
  p.n_group = 3;
  p.topk_group = 4;
  EXPECT_THROW(moe_route_cpu(p), Error);
  p.topk_group = 1;
  p.k = 7;
  EXPECT_THROW(moe_route_cpu(p), Error);
}

TEST(MoeExperts, HandChecked) {
  // E=2, hidden=2, inter=1; token picks expert 1 with weight 0.5.
  // gate_1 = [1, 0], up_1 = [0, 1], x = [1, 2]: g = 1, u = 2, act = silu(1) * 2 = 1.4621172.
  // down_1 = [[1], [-2]]: out = 0.5 * [1.4621172, -2.9242344].
  std::vector<float> x = {1.f, 2.f}, wg = {9, 9, 1, 0}, wu = {9, 9, 0, 1}, wd = {9, 9, 1, -2};
  std::vector<int32_t> ids = {1};
  std::vector<float> tw = {0.5f}, act(1), out(2, 123.f);
  MoeExpertsParams p{x.data(), ids.data(), tw.data(), wg.data(), wu.data(), wd.data(), DType::F32, nullptr, nullptr, nullptr,
                     act.data(), out.data(), 1, 2, 1, 2, 1};
  moe_experts_cpu(p);
  EXPECT_NEAR(act[0], 1.4621172f, 1e-6f);
  EXPECT_NEAR(out[0], 0.7310586f, 1e-6f);
  EXPECT_NEAR(out[1], -1.4621172f, 1e-6f);
  ids[0] = 2;  // out of range
  EXPECT_THROW(moe_experts_cpu(p), Error);
  ids[0] = 1;
  // The next RMSNorm of the result rows: rmsnorm_cpu of out, bit for bit; weight and output only together.
  {
    std::vector<float> nw(size_t(p.hidden)), normed(size_t(p.B) * p.hidden), ref(normed.size());
    for (size_t i = 0; i < nw.size(); ++i) nw[i] = 0.75f + 0.01f * float(i);
    MoeExpertsParams q = p;
    q.next_norm_weight = nw.data();
    q.next_norm_out = normed.data();
    q.next_norm_eps = 1e-5f;
    std::vector<float> out_plain(size_t(p.B) * p.hidden), out_fused(out_plain.size());
    q.out = out_plain.data();
    q.next_norm_weight = nullptr;
    q.next_norm_out = nullptr;
    moe_experts_cpu(q);
    q.out = out_fused.data();
    q.next_norm_weight = nw.data();
    q.next_norm_out = normed.data();
    moe_experts_cpu(q);
    EXPECT_EQ(out_plain, out_fused);
    NormParams np{out_plain.data(), nw.data(), nullptr, ref.data(), p.B, p.hidden, p.hidden, p.hidden, 1e-5f};
    rmsnorm_cpu(np);
    EXPECT_EQ(normed, ref);
    EXPECT_GT(std::fabs(normed[0]), 0.f);
    q.next_norm_out = nullptr;
    try {
      moe_experts_cpu(q);
      ADD_FAILURE() << "next_norm_weight without next_norm_out accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("next_norm_out"), std::string::npos) << e.what();
    }
  }
  p.down_early_loads = 0;  // the down kernel's loads before the PDL wait: on (default) / off, nothing else
  EXPECT_NO_THROW(moe_experts_cpu(p));
  p.down_early_loads = 1;
  EXPECT_NO_THROW(moe_experts_cpu(p));
  for (int bad : {2, -1}) {
    p.down_early_loads = bad;
    try {
      moe_experts_cpu(p);
      ADD_FAILURE() << "down_early_loads = " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("down_early_loads = " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  p.down_early_loads = 1;
  p.shared_late_trigger = 0;  // the shared stage's down kernel admitted early / late: nothing else changes
  EXPECT_NO_THROW(moe_experts_cpu(p));
  for (int bad : {2, -1}) {
    p.shared_late_trigger = bad;
    try {
      moe_experts_cpu(p);
      ADD_FAILURE() << "shared_late_trigger = " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("shared_late_trigger = " + std::to_string(bad)), std::string::npos)
          << e.what();
    }
  }
}

TEST(MoeExperts, RandomBf16AgainstDouble) {
  std::mt19937 rng(10);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int B = 3, E = 6, k = 3, hidden = 67, inter = 33;
  std::vector<uint16_t> wg(E * inter * hidden), wu(E * inter * hidden), wd(E * hidden * inter);
  for (auto* w : {&wg, &wu, &wd})
    for (auto& v : *w) v = float_to_bf16_bits(0.2f * nd(rng));
  std::vector<float> x(B * hidden), tw(B * k), act(B * k * inter), out(B * hidden);
  for (auto& v : x) v = nd(rng);
  for (auto& v : tw) v = std::abs(nd(rng));
  std::vector<int32_t> ids = {5, 0, 2, 1, 1, 3, 4, 0, 5};  // a repeated expert is allowed
  MoeExpertsParams p{x.data(), ids.data(), tw.data(), wg.data(), wu.data(), wd.data(), DType::BF16, nullptr, nullptr, nullptr,
                     act.data(), out.data(), B, E, k, hidden, inter};
  moe_experts_cpu(p);
  auto f = [](uint16_t b) { return double(bf16_bits_to_float(b)); };
  double max_err = 0;
  for (int b = 0; b < B; ++b) {
    std::vector<double> ref(hidden, 0.0);
    for (int j = 0; j < k; ++j) {
      const int e = ids[b * k + j];
      for (int i = 0; i < inter; ++i) {
        double g = 0, u = 0;
        for (int d = 0; d < hidden; ++d) {
          g += x[b * hidden + d] * f(wg[(size_t(e) * inter + i) * hidden + d]);
          u += x[b * hidden + d] * f(wu[(size_t(e) * inter + i) * hidden + d]);
        }
        const double a = g / (1 + std::exp(-g)) * u;
        for (int d = 0; d < hidden; ++d) ref[d] += tw[b * k + j] * a * f(wd[(size_t(e) * hidden + d) * inter + i]);
      }
    }
    for (int d = 0; d < hidden; ++d)
      max_err = std::max(max_err, std::abs(ref[d] - out[b * hidden + d]) / (1 + std::abs(ref[d])));
  }
  std::printf("moe_experts_cpu max rel err vs double: %.3g\n", max_err);
  EXPECT_LT(max_err, 1e-5);
  // accumulate: out = residual + the result above, bit for bit (the residual add fused in).
  std::vector<float> resid(out.size()), acc_out(out.size());
  for (auto& v : resid) v = nd(rng);
  acc_out = resid;
  MoeExpertsParams pa = p;
  pa.out = acc_out.data();
  pa.accumulate = true;
  moe_experts_cpu(pa);
  for (size_t i = 0; i < out.size(); ++i) {
    const float want = resid[i] + out[i];
    ASSERT_EQ(std::memcmp(&acc_out[i], &want, 4), 0) << "i " << i << ": " << acc_out[i] << " vs " << want;
  }
}

}  // namespace
}  // namespace glm5
