// MoE: CUDA routing and grouped experts vs CPU twins. Routing at GLM-5's 256 experts, 8 groups,
// top-4 groups, top-8, x2.5, and glm5-tiny's 8 experts top-2. Experts at GLM-5's hidden 6144 /
// inter 2048 with 256 BF16 experts on the device (19 GB: the offsets of expert 255 pass 2^31),
// batch 1, 3, 32; the CPU twin sees only the experts actually used (compacted, ids remapped).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/moe.h"

namespace glm5 {
namespace {

void check_route(int B, int E, int k, int n_group, int topk_group, bool norm) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> logits(size_t(B) * E), bias(E);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 2.f * rng_normal(seed, B * 1000 + E, i);
  for (int e = 0; e < E; ++e) bias[e] = 0.1f * rng_normal(seed + 1, E, e);
  if (E >= 64)  // experts 32..47 repeat 0..15 exactly: equal choice scores, the lower index must win
    for (int b = 0; b < B; ++b)
      for (int e = 32; e < 48; ++e) {
        logits[size_t(b) * E + e] = logits[size_t(b) * E + e - 32];
        bias[e] = bias[e - 32];
      }
  std::vector<int32_t> ids(size_t(B) * k);
  std::vector<float> w(size_t(B) * k);
  moe_route_cpu({logits.data(), bias.data(), ids.data(), w.data(), B, E, k, n_group, topk_group, norm, 2.5f});
  Buffer dl(Where::Device, logits.size() * 4, "logits"), db(Where::Device, E * 4, "bias"),
      di(Where::Device, ids.size() * 4, "ids"), dw(Where::Device, w.size() * 4, "weights");
  dl.upload(logits.data(), dl.bytes());
  db.upload(bias.data(), db.bytes());
  moe_route_cuda({dl.as<float>(), db.as<float>(), di.as<int32_t>(), dw.as<float>(), B, E, k, n_group, topk_group,
                  norm, 2.5f},
                 nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> gids(ids.size());
  std::vector<float> gw(w.size());
  di.download(gids.data(), di.bytes());
  dw.download(gw.data(), dw.bytes());
  double max_abs = 0;
  for (size_t i = 0; i < w.size(); ++i) max_abs = std::max(max_abs, double(std::abs(w[i] - gw[i])));
  std::printf("moe_route B=%d E=%d k=%d groups %d/%d: ids %s, weights max abs %.3g\n", B, E, k, topk_group, n_group,
              gids == ids ? "equal" : "DIFFER", max_abs);
  EXPECT_EQ(gids, ids);
  EXPECT_LT(max_abs, 1e-5);
  // MoeRouteParams::rank_form (E % 32 == 0: the block rank kernel; else the same kernels as above): the same ids and
  // the same weight bits as the default form.
  MoeRouteParams rp{dl.as<float>(), db.as<float>(), di.as<int32_t>(), dw.as<float>(), B, E, k, n_group, topk_group,
                    norm, 2.5f};
  rp.rank_form = true;
  CUDA_CHECK(cudaMemset(di.as<int32_t>(), 0xff, di.bytes()));
  CUDA_CHECK(cudaMemset(dw.as<float>(), 0xff, dw.bytes()));
  moe_route_cuda(rp, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> rids(ids.size());
  std::vector<float> rw(w.size());
  di.download(rids.data(), di.bytes());
  dw.download(rw.data(), dw.bytes());
  EXPECT_EQ(rids, gids) << "rank form ids";
  EXPECT_EQ(std::memcmp(rw.data(), gw.data(), rw.size() * 4), 0) << "rank form weights";
}

TEST(GpuMoe, RouteMatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int B : {1, 3, 32}) {
    check_route(B, 256, 8, 8, 4, true);  // DeepSeek-V3 (one warp per token, 8 experts per lane)
    check_route(B, 256, 8, 1, 1, true);  // GLM-5 (one warp per token, no groups)
    check_route(B, 8, 2, 1, 1, true);    // the block kernel (8 experts: not a multiple of 32)
  }
  check_route(4, 64, 6, 8, 3, true);   // warp kernel, 2 experts per lane, groups of 4 lanes
  check_route(4, 32, 5, 4, 2, false);  // warp kernel, 1 expert per lane, groups of 8 lanes
  check_route(2, 96, 4, 1, 1, true);   // 3 per lane: the block kernel
  check_route(2, 64, 32, 8, 1, true);  // warp kernel, k = 32 > the kept group's 8 experts: dropped ones at -inf
  check_route(1, 32, 32, 1, 1, true);  // warp kernel, every expert picked
  check_route(5, 60, 7, 6, 2, false);
  check_route(2, 40, 32, 4, 1, true);  // k > experts in the kept group: dropped experts at -inf
}

void check_experts(int B, int E, int k, int hidden, int inter, int used_experts) {
  // Pick `used_experts` distinct experts (always 0 and E-1), route each token to k of them.
  std::vector<int32_t> used;
  for (int u = 0; u < used_experts; ++u) used.push_back(int32_t((int64_t(u) * (E - 1)) / std::max(1, used_experts - 1)));
  std::vector<int32_t> ids(size_t(B) * k), compact_ids(ids.size());
  std::vector<float> tw(ids.size());
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < k; ++j) {
      const int u = int((splitmix64(b * 131 + j) >> 20) % used_experts);
      compact_ids[b * k + j] = u;
      ids[b * k + j] = used[u];
      tw[b * k + j] = 0.1f + rng_uniform(3, b, j);
    }
  const size_t up_elems = size_t(inter) * hidden, down_elems = size_t(hidden) * inter;
  std::vector<uint16_t> wg(used_experts * up_elems), wu(wg.size()), wd(used_experts * down_elems);
  const float sg = 1.f / std::sqrt(float(hidden)), sd = 1.f / std::sqrt(float(inter));
  auto fill = [](std::vector<uint16_t>& v, uint64_t seed, float scale) {
    for (size_t i = 0; i < v.size(); i += 4) {
      const uint64_t h = splitmix64(seed * 0x1000003 + i);
      for (size_t q = 0; q < 4 && i + q < v.size(); ++q)
        v[i + q] = float_to_bf16_bits((float((h >> (16 * q)) & 0xffffu) / 32768.f - 1.f) * scale);
    }
  };
  fill(wg, 1, 2 * sg);
  fill(wu, 2, 2 * sg);
  fill(wd, 3, 2 * sd);
  std::vector<float> x(size_t(B) * hidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(4, B, i);

  Buffer dg(Where::Device, E * up_elems * 2, "w_gate"), du(Where::Device, E * up_elems * 2, "w_up"),
      dd(Where::Device, E * down_elems * 2, "w_down");
  for (int u = 0; u < used_experts; ++u) {
    dg.upload(wg.data() + u * up_elems, up_elems * 2, size_t(used[u]) * up_elems * 2);
    du.upload(wu.data() + u * up_elems, up_elems * 2, size_t(used[u]) * up_elems * 2);
    dd.upload(wd.data() + u * down_elems, down_elems * 2, size_t(used[u]) * down_elems * 2);
  }
  Buffer dx(Where::Device, x.size() * 4, "x"), di(Where::Device, ids.size() * 4, "ids"),
      dtw(Where::Device, tw.size() * 4, "weights"), dact(Where::Device, size_t(B) * k * inter * 4, "act"),
      dout(Where::Device, size_t(B) * hidden * 4, "out");
  dx.upload(x.data(), dx.bytes());
  di.upload(ids.data(), di.bytes());
  dtw.upload(tw.data(), dtw.bytes());
  moe_experts_cuda({dx.as<float>(), di.as<int32_t>(), dtw.as<float>(), dg.data(), du.data(), dd.data(), DType::BF16,
                    nullptr, nullptr, nullptr, dact.as<float>(), dout.as<float>(), B, E, k, hidden, inter},
                   nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> act(size_t(B) * k * inter), out(size_t(B) * hidden);
  moe_experts_cpu({x.data(), compact_ids.data(), tw.data(), wg.data(), wu.data(), wd.data(), DType::BF16, nullptr, nullptr, nullptr, act.data(),
                   out.data(), B, used_experts, k, hidden, inter});
  std::vector<float> gact(act.size()), gout(out.size());
  dact.download(gact.data(), dact.bytes());
  dout.download(gout.data(), dout.bytes());
  double act_abs = 0, act_ref = 0, out_abs = 0, out_ref = 0;
  for (size_t i = 0; i < act.size(); ++i) {
    act_abs = std::max(act_abs, double(std::abs(act[i] - gact[i])));
    act_ref = std::max(act_ref, double(std::abs(act[i])));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out_abs = std::max(out_abs, double(std::abs(out[i] - gout[i])));
    out_ref = std::max(out_ref, double(std::abs(out[i])));
  }
  std::printf("moe_experts B=%d E=%d k=%d hidden=%d inter=%d: act max abs %.3g (rel %.3g), out max abs %.3g (rel %.3g)\n",
              B, E, k, hidden, inter, act_abs, act_abs / act_ref, out_abs, out_abs / out_ref);
  EXPECT_LT(act_abs / act_ref, 5e-5);  // fp32 sums of 6144 / 2048 terms vs double
  EXPECT_LT(out_abs / out_ref, 5e-5);
}

TEST(GpuMoe, ExpertsMatchCpuTwinAtGlm5Size) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int B : {1, 3, 32}) check_experts(B, 256, 8, 6144, 2048, 12);
}

TEST(GpuMoe, ExpertsOddSizes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_experts(3, 6, 3, 67, 33, 4);     // scalar path (not a multiple of 8)
  check_experts(2, 8, 2, 256, 128, 8);   // glm5-tiny
  check_experts(5, 7, 1, 72, 40, 3);     // vector path, rows not a multiple of the block's rows
}

TEST(GpuMoe, BadParamsThrowBeforeLaunch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_THROW(moe_route_cuda({nullptr, nullptr, nullptr, nullptr, 1, 8, 2, 1, 1, true, 1.f}, nullptr), Error);
  MoeExpertsParams p{};
  EXPECT_THROW(moe_experts_cuda(p, nullptr), Error);
}

}  // namespace
}  // namespace glm5
