// CPU side of the FP8 tensor-core MoE experts (kernels/sm90a/moe_fp8_wgmma.h): the plan (token tile, slot rows,
// scratch layout) and the CPU twin (e4m3 activations) against exact arithmetic and against its own expert-parallel
// split. The GPU kernels are checked against this twin in gpu_moe_grouped (GpuMoeGrouped.Fp8WgmmaMatchesCpuTwin).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/dtype.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/moe.h"
#include "kernels/sm90a/moe_fp8_wgmma.h"

namespace glm5 {
namespace {

TEST(MoeFp8WgmmaPlan, TokenTileRowsAndScratchLayout) {
  // GLM-5: 256 experts, top-8, hidden 6144, inter 2048. Mean pairs per expert B * 8 / 256; N >= 4 x the mean.
  const int E = 256, k = 8, hidden = 6144, inter = 2048;
  // gate_up's k split: only when forced (the plan's own choice is 1 at every batch: measured slower on the H200).
  struct Want { int B, N, ksplit; };
  const std::vector<Want> want{{4, 8, 1}, {8, 8, 1}, {32, 8, 1}, {64, 8, 1}, {96, 16, 1}, {128, 16, 1}, {256, 32, 1},
                               {512, 64, 1}, {4096, 64, 1}};
  for (auto [B, N, ksplit] : want) {
    const MoeFp8WgmmaPlan q = moe_fp8_wgmma_plan(B, k, E, E, hidden, inter);
    EXPECT_EQ(q.N, N) << "B=" << B;
    EXPECT_EQ(q.ksplit, ksplit) << "B=" << B;
    EXPECT_EQ(moe_fp8_wgmma_plan(B, k, E, E, hidden, inter, 1).ksplit, 1);
    EXPECT_EQ(moe_fp8_wgmma_plan(B, k, E, E, hidden, inter, 2).ksplit, 2);
    EXPECT_EQ(moe_fp8_wgmma_plan(B, k, E, E, 128 * 3, inter, 2).ksplit, 1) << "k / 128 odd: no split";
    EXPECT_EQ(q.rows % 4, 0);
    EXPECT_GE(q.rows, B * k + 3 * E) << "every bucket padded to 4 rows must fit";
    EXPECT_LT(q.rows, B * k + 3 * E + 4);
    EXPECT_EQ(q.scale_ld, q.rows);
    // regions in order, 128-byte aligned, each large enough (codes: rows x k; scales: k / 128 rows + N floats of slack)
    const size_t offs[4] = {q.x_codes, q.x_scales, q.act_codes, q.act_scales};
    const size_t need[4] = {size_t(q.rows) * hidden, (size_t(hidden / 128) * q.scale_ld + q.N) * 4,
                            size_t(q.rows) * inter, (size_t(inter / 128) * q.scale_ld + q.N) * 4};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(offs[i] % 128, 0u);
      EXPECT_LE(offs[i] + need[i], i < 3 ? offs[i + 1] : q.sched) << "region " << i << " B=" << B;
    }
    // the k split's g and u sums: B k pairs x 2 x inter floats, only when split
    EXPECT_EQ(q.gu % 128, 0u);
    EXPECT_EQ(q.scratch_bytes - q.gu >= size_t(B) * k * 2 * inter * 4, q.ksplit == 2) << "B=" << B;
    // moe_group_kernel's slot-row schedule (MoeSlotSchedule): R[E + 1], U[E + 1], a source per slot row, before the
    // sums and at the same offset with and without the k split (S27a: a ksplit-1 call wrote it over the split's sums)
    EXPECT_EQ(q.sched % 128, 0u);
    EXPECT_GE(q.gu, q.sched + moe_slot_schedule_bytes(E, q.rows)) << "B=" << B;
    EXPECT_EQ(moe_fp8_wgmma_plan(B, k, E, E, hidden, inter, 2).sched, q.sched) << "B=" << B;
  }
  // Expert parallel: the mean is over all experts, the rows over the local ones.
  const MoeFp8WgmmaPlan ep = moe_fp8_wgmma_plan(128, k, 32, 256, hidden, inter);
  EXPECT_EQ(ep.N, 16);
  EXPECT_EQ(ep.rows, 128 * 8 + 3 * 32);
}

struct Fp8Experts {
  std::vector<uint8_t> g, u, d;
  std::vector<float> sg, su, sd;
};

Fp8Experts random_experts(int E, int hidden, int inter, uint64_t seed) {
  Fp8Experts w;
  auto codes = [&](std::vector<uint8_t>& v, uint64_t s) {
    v.resize(size_t(E) * hidden * inter);
    for (size_t i = 0; i < v.size(); ++i) {
      uint8_t c = float_to_e4m3_bits(rng_normal(seed, s, i) * 64.f);
      if ((c & 0x7f) == 0x7f) c = 0x3f;  // no NaN codes
      v[i] = c;
    }
  };
  auto scales = [&](std::vector<float>& v, int rows, int cols, uint64_t s) {
    v.resize(size_t(E) * (rows / 128) * (cols / 128));
    for (size_t i = 0; i < v.size(); ++i) v[i] = (0.5f + rng_uniform(seed, s, i)) / 64.f / std::sqrt(float(cols));
  };
  codes(w.g, 1);
  codes(w.u, 2);
  codes(w.d, 3);
  scales(w.sg, inter, hidden, 4);
  scales(w.su, inter, hidden, 5);
  scales(w.sd, hidden, inter, 6);
  return w;
}

MoeExpertsParams params(const Fp8Experts& w, const std::vector<float>& x, const std::vector<int32_t>& ids,
                        const std::vector<float>& tw, std::vector<float>& act, std::vector<float>& out, int B, int E,
                        int k, int hidden, int inter, int begin, int total) {
  MoeExpertsParams p{x.data(), ids.data(), tw.data(), w.g.data(), w.u.data(), w.d.data(), DType::F8_E4M3,
                     w.sg.data(), w.su.data(), w.sd.data(), act.data(), out.data(), B, E, k, hidden, inter, begin, total};
  return p;
}

TEST(MoeFp8WgmmaTwin, AgreesWithExactWithinE4m3AndActIsQuantized) {
  const uint64_t seed = fresh_seed();
  const int B = 3, E = 6, k = 3, hidden = 256, inter = 256;
  const Fp8Experts w = random_experts(E, hidden, inter, seed);
  std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k);
  std::vector<int32_t> ids(size_t(B) * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 7, i);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(splitmix64(seed + i) % E);
  for (size_t i = 0; i < tw.size(); ++i) tw[i] = 0.1f + rng_uniform(seed, 8, i);
  std::vector<float> act(size_t(B) * k * inter), out(size_t(B) * hidden), act_x(act.size()), exact(out.size());
  moe_experts_fp8_wgmma_cpu(params(w, x, ids, tw, act, out, B, E, k, hidden, inter, 0, E));
  moe_experts_cpu(params(w, x, ids, tw, act_x, exact, B, E, k, hidden, inter, 0, E));
  double err = 0, mx = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err = std::max(err, std::fabs(double(out[i]) - exact[i]));
    mx = std::max(mx, std::fabs(double(exact[i])));
  }
  std::printf("moe fp8 wgmma twin vs exact: max err / max |out| %.3g (seed %llu)\n", err / mx, (unsigned long long)seed);
  // e4m3 x and act: each element within 2^-4 relative (~3.6% rms), which reaches g, u, act and the outputs with random
  // signs: 0.035-0.061 of max |out| over 16 seeds here (hidden, inter 256). A wrong scale or row gives O(1). And not zero
  // (the twin really quantizes: exact arithmetic would agree to ~1e-6). GpuMoeGrouped.Fp8WgmmaMatchesCpuTwin holds the
  // GPU to a per-output bound derived from the same 2^-4.
  EXPECT_LT(err, 0.2 * mx);
  EXPECT_GT(err, 1e-4 * mx);
  // act: in every 128-element block, value / (amax / 448) is an e4m3 value (the codes the down projection used).
  for (size_t r = 0; r < size_t(B) * k; ++r)
    for (int b = 0; b < inter / 128; ++b) {
      const float* a = act.data() + r * inter + 128 * b;
      float amax = 0.f;
      for (int c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(a[c]));
      ASSERT_GT(amax, 0.f);
      const float s = amax / 448.f;
      for (int c = 0; c < 128; c += 17) {
        const float v = a[c] / s;
        EXPECT_NEAR(v, e4m3_bits_to_float(float_to_e4m3_bits(v)), 1e-3f * std::fabs(v) + 1e-6f) << "row " << r;
      }
    }
}

TEST(MoeFp8WgmmaPlan, Bf16SlotRowsAreTwoBytesAndNeverSplit) {
  const int E = 256, k = 8, hidden = 6144, inter = 2048;
  for (int B : {4, 32, 128}) {
    const MoeFp8WgmmaPlan f = moe_fp8_wgmma_plan(B, k, E, E, hidden, inter, 2, DType::F8_E4M3);
    const MoeFp8WgmmaPlan h = moe_fp8_wgmma_plan(B, k, E, E, hidden, inter, 2, DType::BF16);
    EXPECT_EQ(f.ksplit, 2);
    EXPECT_EQ(h.ksplit, 1) << "BF16 accumulates the whole k in the tile: no split";
    EXPECT_EQ(h.N, f.N);
    EXPECT_EQ(h.rows, f.rows);
    EXPECT_GE(h.x_scales - h.x_codes, size_t(h.rows) * hidden * 2) << "B=" << B;
    EXPECT_GE(h.act_scales - h.act_codes, size_t(h.rows) * inter * 2) << "B=" << B;
    EXPECT_LT(h.x_scales - h.x_codes, size_t(h.rows) * hidden * 2 + 128);
    EXPECT_EQ(h.x_codes % 128, 0u);
    EXPECT_EQ(h.act_codes % 128, 0u);
    EXPECT_EQ(h.scratch_bytes, h.gu) << "no k-split sums";
  }
}

// BF16 experts: the twin rounds x and act to bf16 (8 significant bits), so against exact arithmetic (fp32 x, the
// same bf16 weights: moe_experts_cpu) it stays within a few 2^-9 of max |out| and is not exact; act is bf16 values.
TEST(MoeFp8WgmmaTwin, Bf16AgreesWithExactWithinBf16Rounding) {
  const uint64_t seed = fresh_seed();
  const int B = 3, E = 5, k = 3, hidden = 256, inter = 384;
  auto bf16_rows = [&](uint64_t s) {
    std::vector<uint16_t> v(size_t(E) * hidden * inter);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float_to_bf16_bits(rng_normal(seed, s, i) / std::sqrt(float(hidden)));
    return v;
  };
  const std::vector<uint16_t> g = bf16_rows(11), u = bf16_rows(12), d = bf16_rows(13);
  std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k);
  std::vector<int32_t> ids(size_t(B) * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 14, i);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(splitmix64(seed + 3 * i) % E);
  for (size_t i = 0; i < tw.size(); ++i) tw[i] = 0.1f + rng_uniform(seed, 15, i);
  std::vector<float> act(size_t(B) * k * inter), out(size_t(B) * hidden), act_x(act.size()), exact(out.size());
  auto run = [&](std::vector<float>& a, std::vector<float>& o, bool twin) {
    MoeExpertsParams p{x.data(), ids.data(), tw.data(), g.data(), u.data(), d.data(), DType::BF16, nullptr, nullptr,
                       nullptr, a.data(), o.data(), B, E, k, hidden, inter, 0, E};
    twin ? moe_experts_fp8_wgmma_cpu(p) : moe_experts_cpu(p);
  };
  run(act, out, true);
  run(act_x, exact, false);
  double err = 0, mx = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err = std::max(err, std::fabs(double(out[i]) - exact[i]));
    mx = std::max(mx, std::fabs(double(exact[i])));
  }
  std::printf("moe bf16 wgmma twin vs exact: max err / max |out| %.3g (seed %llu)\n", err / mx, (unsigned long long)seed);
  EXPECT_LT(err, 2e-2 * mx);   // bf16 x and act: 2^-9 relative per element, random signs
  EXPECT_GT(err, 1e-7 * mx);   // and really rounded (fp32 x gives the exact path's ~1e-7)
  for (float a : act) EXPECT_EQ(a, round_bf16(a));
}

TEST(MoeFp8WgmmaTwin, ExpertParallelShardsSumToTheWhole) {
  const uint64_t seed = fresh_seed();
  const int B = 4, E = 8, k = 4, hidden = 128, inter = 256;
  const Fp8Experts w = random_experts(E, hidden, inter, seed);
  std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k);
  std::vector<int32_t> ids(size_t(B) * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 9, i);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(splitmix64(seed ^ (i * 31)) % E);
  for (size_t i = 0; i < tw.size(); ++i) tw[i] = 0.1f + rng_uniform(seed, 10, i);
  std::vector<float> act(size_t(B) * k * inter), whole(size_t(B) * hidden), shards(whole.size(), 0.f);
  moe_experts_fp8_wgmma_cpu(params(w, x, ids, tw, act, whole, B, E, k, hidden, inter, 0, E));
  for (int half = 0; half < 2; ++half) {  // rank `half` holds experts [4 half, 4 half + 4): its weights start there
    Fp8Experts local;
    const size_t per = size_t(hidden) * inter, spg = size_t(inter / 128) * (hidden / 128);
    auto slice = [&](const auto& v, size_t n) { return std::vector(v.begin() + half * 4 * n, v.begin() + (half * 4 + 4) * n); };
    local.g = slice(w.g, per), local.u = slice(w.u, per), local.d = slice(w.d, per);
    local.sg = slice(w.sg, spg), local.su = slice(w.su, spg), local.sd = slice(w.sd, spg);
    MoeExpertsParams p = params(local, x, ids, tw, act, shards, B, 4, k, hidden, inter, 4 * half, E);
    p.accumulate = true;
    moe_experts_fp8_wgmma_cpu(p);
  }
  double err = 0, mx = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    err = std::max(err, std::fabs(double(whole[i]) - shards[i]));
    mx = std::max(mx, std::fabs(double(whole[i])));
  }
  EXPECT_GT(mx, 0.0);
  EXPECT_LT(err, 1e-5 * mx) << "the two shards' slots (other ranks' ids skipped) must sum to the whole";
}

}  // namespace
}  // namespace glm5
