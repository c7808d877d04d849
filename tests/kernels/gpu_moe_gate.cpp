// The fused MoE gate (kernels/moe_gate.h) against the three launches it replaces (rmsnorm_cuda, the BF16 router
// GEMV through linear_bf16_gemv_cuda, moe_route_cuda): bitwise, on fresh random inputs, at GLM-5's shape (hidden
// 6144, 256 experts, one group) and DeepSeek-V3's (hidden 7168, 8 groups, top-4 groups), batch 1 to 4, twice in a
// row (the counter must return to zero). And against the CPU twin: xn and the logits within fp32 rounding of the
// double-accumulated reference, the routing equal to moe_route_cpu on the GPU's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/linear_bf16.h"
#include "kernels/moe_gate.h"

namespace glm5 {
namespace {

struct Shape {
  const char* name;
  int hidden, E, k, n_group, topk_group;
};

void check_gate(const Shape& sh, int B) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(sh.name) + " B " + std::to_string(B) + " seed " + std::to_string(seed));
  const int H = sh.hidden, E = sh.E;
  std::vector<float> x(size_t(B) * H), nw(H), bias(E);
  std::vector<uint16_t> wr(size_t(E) * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3.f * rng_normal(seed, 1, i);
  for (int i = 0; i < H; ++i) nw[i] = 1.f + 0.2f * rng_normal(seed, 2, i);
  for (size_t i = 0; i < wr.size(); ++i) wr[i] = float_to_bf16_bits(0.03f * rng_normal(seed, 3, i));
  for (int e = 0; e < E; ++e) bias[e] = 0.05f * rng_normal(seed, 4, e);
  // Router rows 40..47 repeat rows 8..15 and their bias: equal choice scores, ties to the lower expert.
  for (int e = 40; e < 48; ++e) {
    std::copy_n(wr.begin() + size_t(e - 32) * H, H, wr.begin() + size_t(e) * H);
    bias[e] = bias[e - 32];
  }
  const Buffer dx = to_device(x), dnw = to_device(nw), dw = to_device(wr), db = to_device(bias);
  auto params = [&](Buffer& xn, Buffer& logits, Buffer& ids, Buffer& wts, Buffer* counter) {
    MoeGateParams p;
    p.norm = {dx.as<float>(), dnw.as<float>(), nullptr, xn.as<float>(), B, H, H, H, 1e-5f};
    p.router = {xn.as<float>(), dw.data(), DType::BF16, logits.as<float>(), B, E, H, false, false};
    p.route = {logits.as<float>(), db.as<float>(), ids.as<int32_t>(), wts.as<float>(), B, E, sh.k, sh.n_group,
               sh.topk_group, true, 2.5f};
    p.counter = counter ? counter->as<int32_t>() : nullptr;
    return p;
  };
  auto make = [](size_t bytes, const char* label) { return Buffer(Where::Device, bytes, label); };
  // The three launches.
  Buffer sxn = make(x.size() * 4, "xn"), sl = make(size_t(B) * E * 4, "logits"), si = make(size_t(B) * sh.k * 4, "ids"),
         sw = make(size_t(B) * sh.k * 4, "weights");
  const MoeGateParams sp = params(sxn, sl, si, sw, nullptr);
  ASSERT_TRUE(linear_bf16_gemv_preferred(sp.router));
  rmsnorm_cuda(sp.norm, nullptr);
  linear_bf16_gemv_cuda(sp.router, nullptr);
  moe_route_cuda(sp.route, nullptr);
  // The fused launch, twice (a stale counter would leave the second launch without a router).
  Buffer fxn = make(x.size() * 4, "xn"), fl = make(size_t(B) * E * 4, "logits"), fi = make(size_t(B) * sh.k * 4, "ids"),
         fw = make(size_t(B) * sh.k * 4, "weights"), counter = to_device(std::vector<int32_t>{0});
  const MoeGateParams fp = params(fxn, fl, fi, fw, &counter);
  ASSERT_TRUE(moe_gate_fusable(fp));
  for (int run = 0; run < 2; ++run) {
    CUDA_CHECK(cudaMemset(fi.data(), 0xff, fi.bytes()));
    CUDA_CHECK(cudaMemset(fw.data(), 0xff, fw.bytes()));
    moe_gate_cuda(fp, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(to_host<int32_t>(counter)[0], 0) << "run " << run;
    const auto a_xn = to_host<float>(sxn), b_xn = to_host<float>(fxn), a_l = to_host<float>(sl), b_l = to_host<float>(fl);
    const auto a_i = to_host<int32_t>(si), b_i = to_host<int32_t>(fi);
    const auto a_w = to_host<float>(sw), b_w = to_host<float>(fw);
    EXPECT_EQ(std::memcmp(a_xn.data(), b_xn.data(), a_xn.size() * 4), 0) << "xn, run " << run;
    EXPECT_EQ(std::memcmp(a_l.data(), b_l.data(), a_l.size() * 4), 0) << "logits, run " << run;
    EXPECT_EQ(a_i, b_i) << "expert ids, run " << run;
    EXPECT_EQ(std::memcmp(a_w.data(), b_w.data(), a_w.size() * 4), 0) << "expert weights, run " << run;
  }
  // Against the CPU twin (double accumulators): xn and logits to fp32 rounding; the routing of the GPU's logits.
  std::vector<float> cxn(x.size()), cl(size_t(B) * E), cw(size_t(B) * sh.k), rw(cw.size());
  std::vector<int32_t> ci(cw.size()), ri(cw.size());
  MoeGateParams cp;
  cp.norm = {x.data(), nw.data(), nullptr, cxn.data(), B, H, H, H, 1e-5f};
  cp.router = {cxn.data(), wr.data(), DType::BF16, cl.data(), B, E, H, false, false};
  cp.route = {cl.data(), bias.data(), ci.data(), cw.data(), B, E, sh.k, sh.n_group, sh.topk_group, true, 2.5f};
  moe_gate_cpu(cp);
  const auto g_xn = to_host<float>(fxn), g_l = to_host<float>(fl), g_w = to_host<float>(fw);
  const auto g_i = to_host<int32_t>(fi);
  double xn_err = 0, l_err = 0, l_max = 0;
  for (size_t i = 0; i < cxn.size(); ++i) xn_err = std::max(xn_err, double(std::abs(cxn[i] - g_xn[i])) / (std::abs(cxn[i]) + 1e-3));
  for (size_t i = 0; i < cl.size(); ++i) {
    l_err = std::max(l_err, double(std::abs(cl[i] - g_l[i])));
    l_max = std::max(l_max, double(std::abs(cl[i])));
  }
  MoeRouteParams rp = cp.route;
  rp.logits = g_l.data();
  rp.topk_ids = ri.data();
  rp.topk_weights = rw.data();
  moe_route_cpu(rp);
  double w_err = 0;
  for (size_t i = 0; i < rw.size(); ++i) w_err = std::max(w_err, double(std::abs(rw[i] - g_w[i])));
  std::printf("moe_gate %s B=%d: fused = three launches bitwise; vs CPU: xn rel %s, logits abs %s of max %s, "
              "routing of the GPU logits: ids %s, weights abs %s\n",
              sh.name, B, sci(xn_err).c_str(), sci(l_err).c_str(), sci(l_max).c_str(), ri == g_i ? "equal" : "DIFFER",
              sci(w_err).c_str());
  EXPECT_LT(xn_err, 1e-5);
  EXPECT_LT(l_err, 1e-5 * std::max(1.0, l_max));
  EXPECT_GT(l_max, 0.1);  // the inputs are not degenerate
  EXPECT_EQ(ri, g_i);
  EXPECT_LT(w_err, 1e-5);
}

TEST(GpuMoeGate, FusedLaunchIsTheThreeLaunchesBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Shape glm5{"GLM-5", 6144, 256, 8, 1, 1}, dsv3{"DeepSeek-V3", 7168, 256, 8, 8, 4};
  for (const Shape& sh : {glm5, dsv3})
    for (int B : {1, 2, 3, 4}) check_gate(sh, B);
}

TEST(GpuMoeGate, RefusesWhatItCannotFuse) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  Buffer x(Where::Device, 5 * 6144 * 4, "x"), nw(Where::Device, 6144 * 4, "nw"), xn(Where::Device, 5 * 6144 * 4, "xn"),
      w(Where::Device, 256 * 6144 * 2, "w"), l(Where::Device, 5 * 256 * 4, "l"), bias(Where::Device, 256 * 4, "b"),
      ids(Where::Device, 5 * 8 * 4, "ids"), wts(Where::Device, 5 * 8 * 4, "wts"), counter(Where::Device, 4, "c");
  auto params = [&](int B) {
    MoeGateParams p;
    p.norm = {x.as<float>(), nw.as<float>(), nullptr, xn.as<float>(), B, 6144, 6144, 6144, 1e-5f};
    p.router = {xn.as<float>(), w.data(), DType::BF16, l.as<float>(), B, 256, 6144, false, false};
    p.route = {l.as<float>(), bias.as<float>(), ids.as<int32_t>(), wts.as<float>(), B, 256, 8, 1, 1, true, 2.5f};
    p.counter = counter.as<int32_t>();
    return p;
  };
  EXPECT_TRUE(moe_gate_fusable(params(4)));
  EXPECT_FALSE(moe_gate_fusable(params(5)));  // the GEMV's batch limit
  MoeGateParams p = params(1);
  p.counter = nullptr;
  EXPECT_FALSE(moe_gate_fusable(p));
  p = params(1);
  p.norm.y = x.as<float>();  // in place: CTA 0 would overwrite rows the others still read
  p.router.x = p.norm.y;
  EXPECT_FALSE(moe_gate_fusable(p));
  try {
    moe_gate_cuda(p, nullptr);
    ADD_FAILURE() << "an in-place gate was launched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not fusable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace glm5
