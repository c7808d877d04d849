// MLA absorb / unabsorb CPU twins: a hand-checked tiny case, and the identity that absorption must
// preserve: q_nope . k_nope == q_latent . c, and o_latent -> W_UV equals (p-weighted) values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "kernels/mla_absorb.h"

namespace glm5 {
namespace {

TEST(MlaAbsorb, HandChecked) {
  // H=1, nope=2, v=1, L=2. kv_b rows: W_UK = [[1,2],[3,4]], W_UV = [[5,6]].
  std::vector<float> kv_b = {1, 2, 3, 4, 5, 6};
  std::vector<float> q = {1.f, -1.f, 9.f};  // qk_head_dim 3: nope [1,-1], rope [9] ignored
  std::vector<float> ql(2);
  MlaAbsorbParams a{q.data(), kv_b.data(), DType::F32, ql.data(), 1, 1, 2, 1, 2, 3};
  mla_absorb_cpu(a);
  EXPECT_EQ(ql, (std::vector<float>{1 - 3.f, 2 - 4.f}));
  std::vector<float> ol = {2.f, 0.5f}, out(1);
  MlaUnabsorbParams u{ol.data(), kv_b.data(), DType::F32, out.data(), 1, 1, 2, 1, 2};
  mla_unabsorb_cpu(u);
  EXPECT_EQ(out[0], 2 * 5 + 0.5f * 6);
}

TEST(MlaAbsorb, RandomPreservesScoresBf16) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int B = 3, H = 5, nope = 24, rope = 8, v = 16, L = 40, qk = nope + rope;
  std::vector<uint16_t> kv_b(size_t(H) * (nope + v) * L);
  for (auto& b : kv_b) b = float_to_bf16_bits(nd(rng) * 0.2f);
  auto W = [&](int row, int c) { return double(bf16_bits_to_float(kv_b[size_t(row) * L + c])); };
  std::vector<float> q(B * H * qk), c(L), ql(B * H * L);
  for (auto& x : q) x = nd(rng);
  for (auto& x : c) x = nd(rng);
  MlaAbsorbParams a{q.data(), kv_b.data(), DType::BF16, ql.data(), B, H, nope, v, L, qk};
  mla_absorb_cpu(a);
  double max_err = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      // score via the un-absorbed path: k_nope = W_UK c, then q_nope . k_nope
      double ref = 0, got = 0;
      for (int d = 0; d < nope; ++d) {
        double k = 0;
        for (int cc = 0; cc < L; ++cc) k += W(h * (nope + v) + d, cc) * c[cc];
        ref += q[(b * H + h) * qk + d] * k;
      }
      for (int cc = 0; cc < L; ++cc) got += double(ql[(b * H + h) * L + cc]) * c[cc];
      max_err = std::max(max_err, std::abs(ref - got) / (1 + std::abs(ref)));
    }
  std::printf("mla_absorb score identity max rel err: %.3g\n", max_err);
  EXPECT_LT(max_err, 1e-5);

  std::vector<float> ol(B * H * L), out(B * H * v);
  for (auto& x : ol) x = nd(rng);
  MlaUnabsorbParams u{ol.data(), kv_b.data(), DType::BF16, out.data(), B, H, nope, v, L};
  mla_unabsorb_cpu(u);
  max_err = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < v; ++j) {
        double ref = 0;
        for (int cc = 0; cc < L; ++cc) ref += ol[(b * H + h) * L + cc] * W(h * (nope + v) + nope + j, cc);
        max_err = std::max(max_err, std::abs(ref - out[b * H * v + h * v + j]) / (1 + std::abs(ref)));
      }
  std::printf("mla_unabsorb max rel err: %.3g\n", max_err);
  EXPECT_LT(max_err, 1e-6);
}

TEST(MlaAbsorb, BadParamsThrow) {
  std::vector<float> q(4), kv(4), ql(4);
  MlaAbsorbParams a{q.data(), kv.data(), DType::F32, ql.data(), 1, 1, 2, 1, 2, 1};
  EXPECT_THROW(mla_absorb_cpu(a), Error);  // q_head_stride < nope
  MlaUnabsorbParams u{q.data(), kv.data(), DType::F8_E4M3, ql.data(), 1, 1, 2, 1, 2};
  EXPECT_THROW(mla_unabsorb_cpu(u), Error);
}

// The CUDA launch plan is host code: GLM-5's shapes take the fast path with the tile / pass sizes
// the kernel was written for, and what the fast path cannot load falls back to the simple kernels.
TEST(MlaAbsorb, LaunchPlan) {
  alignas(16) static float kv[8], q[8], ql[8];  // only the pointers' alignment is looked at
  MlaAbsorbParams a{q, kv, DType::BF16, ql, 1, 64, 192, 256, 512, 256};
  MlaUnabsorbParams u{q, kv, DType::BF16, ql, 1, 64, 192, 256, 512};
  struct Want {
    int B, groups, passes;
  };
  // A plan's shape: tile, CTAs, batch passes, shared memory (two CTAs per SM; three at batch <= 4).
  auto check_plan = [](const MlaAbsorbPlan& pl, const Want& w, int tile) {
    EXPECT_TRUE(pl.eligible) << w.B;
    EXPECT_EQ(pl.gemv_eligible, w.B <= 4) << w.B;  // aligned BF16 kv_b, L % 8 == 0
    EXPECT_EQ(pl.gemv, tile == 64 ? w.B == 1 : w.B <= 4) << w.B;  // absorb (tile 64): B 1 at H 64 only
    EXPECT_TRUE(pl.tc_eligible) << w.B;  // BF16, aligned, K % 16 == 0, the W tile fits
    EXPECT_EQ(pl.tc, tile == 64 ? w.B >= 2 : w.B >= kMlaAbsorbTcMinBatch) << w.B;  // measured (H 64)
    EXPECT_EQ(pl.tc_smem_bytes, tile == 64 ? size_t(192) * 72 * 2 : size_t(64) * 520 * 2);
    EXPECT_EQ(pl.fast, !pl.simple_faster && !pl.gemv && !pl.tc) << w.B;
    EXPECT_EQ(pl.tile, tile);
    EXPECT_EQ(pl.ctas, 64 * 8);
    EXPECT_EQ(pl.batch_groups, w.groups) << w.B;
    EXPECT_EQ(pl.passes, w.passes) << w.B;
    EXPECT_LE(pl.smem_bytes, size_t(110 * 1024));
    if (w.B <= 4) {
      EXPECT_LE(pl.smem_bytes, size_t(72 * 1024));
    }
  };
  for (Want w : {Want{1, 1, 1}, Want{2, 1, 1}, Want{5, 2, 1}, Want{32, 8, 1}, Want{128, 16, 2}}) {
    a.B = w.B;
    check_plan(plan_mla_absorb(a), w, 64);
  }
  for (Want w : {Want{1, 1, 1}, Want{5, 2, 1}, Want{32, 4, 2}, Want{128, 4, 8}}) {
    u.B = w.B;
    check_plan(plan_mla_unabsorb(u), w, 32);
  }
  a.B = u.B = 1;
  // Measured dispatch (H200 round H2): unabsorb at B <= 4 takes the simple kernel, absorb at H 64 never;
  // absorb at H <= 16 above B 16, unabsorb from B 8 the tiled one.
  a.B = u.B = 1;
  EXPECT_FALSE(plan_mla_absorb(a).simple_faster);
  EXPECT_TRUE(plan_mla_unabsorb(u).simple_faster);
  a.B = u.B = 32;
  EXPECT_FALSE(plan_mla_absorb(a).simple_faster);
  EXPECT_FALSE(plan_mla_unabsorb(u).simple_faster);
  a.H = 16;
  EXPECT_TRUE(plan_mla_absorb(a).simple_faster);
  a.H = 64;
  a.B = u.B = 1;
  a.L = u.L = 36;  // BF16 rows not 16-byte aligned
  EXPECT_FALSE(plan_mla_absorb(a).fast);
  EXPECT_FALSE(plan_mla_unabsorb(u).fast);
  a.kv_b_dtype = u.kv_b_dtype = DType::F32;  // F32 rows are
  EXPECT_EQ(plan_mla_absorb(a).fast, !plan_mla_absorb(a).simple_faster);
  EXPECT_EQ(plan_mla_unabsorb(u).fast, !plan_mla_unabsorb(u).simple_faster);
  a.kv_b = u.kv_b = kv + 1;  // unaligned base
  EXPECT_FALSE(plan_mla_absorb(a).fast);
  EXPECT_FALSE(plan_mla_unabsorb(u).fast);
  a.kv_b = u.kv_b = kv;
  a.kv_b_dtype = u.kv_b_dtype = DType::BF16;
  u.L = 4096;  // a W_UV tile of 4096 x 32 fp32 exceeds shared memory
  EXPECT_FALSE(plan_mla_unabsorb(u).fast);
  EXPECT_TRUE(plan_mla_unabsorb(u).gemv);  // the GEMV kernels stage nothing
  a.L = u.L = 512;
  u.o_latent = q + 1;  // the GEMV unabsorb reads o_latent with 16-byte loads
  EXPECT_FALSE(plan_mla_unabsorb(u).gemv_eligible);
  EXPECT_TRUE(plan_mla_absorb(a).gemv);
  a.H = 16;  // absorb: the tiled kernel measured faster at H 16
  EXPECT_TRUE(plan_mla_absorb(a).gemv_eligible);
  EXPECT_FALSE(plan_mla_absorb(a).gemv);
  a.H = 64;
  a.kv_b_dtype = DType::F32;  // the GEMV kernels are BF16 only
  EXPECT_FALSE(plan_mla_absorb(a).gemv_eligible);
  a.kv_b_dtype = DType::BF16;
  // The tensor-core kernels: BF16 only, K % 16 == 0, float2 activation loads, the W tile within kMlaAbsorbMaxSmem.
  a.B = u.B = 32;
  u.o_latent = q;
  EXPECT_TRUE(plan_mla_absorb(a).tc);
  EXPECT_TRUE(plan_mla_unabsorb(u).tc);
  a.kv_b_dtype = u.kv_b_dtype = DType::F32;
  EXPECT_FALSE(plan_mla_absorb(a).tc_eligible);
  EXPECT_FALSE(plan_mla_unabsorb(u).tc_eligible);
  EXPECT_TRUE(plan_mla_absorb(a).fast);  // the tiled kernels take F32
  a.kv_b_dtype = u.kv_b_dtype = DType::BF16;
  a.nope = 200;  // nope % 16 != 0
  EXPECT_FALSE(plan_mla_absorb(a).tc_eligible);
  a.nope = 192;
  a.q_head_stride = 257;  // odd: rows not 8-byte aligned
  EXPECT_FALSE(plan_mla_absorb(a).tc_eligible);
  a.q_head_stride = 256;
  u.o_latent = q + 1;
  EXPECT_FALSE(plan_mla_unabsorb(u).tc_eligible);
  u.o_latent = q;
  u.L = 2048;  // W_UV tile 64 x 2056 BF16 = 257 KB
  EXPECT_FALSE(plan_mla_unabsorb(u).tc_eligible);
  EXPECT_FALSE(plan_mla_unabsorb(u).tc);
  u.L = 1536;  // 64 x 1544 BF16 = 193 KB
  EXPECT_TRUE(plan_mla_unabsorb(u).tc);
  u.L = 512;
  u.H = 16;  // unabsorb at H <= 16: the tiled kernel measured faster up to batch 16
  u.B = 8;
  EXPECT_TRUE(plan_mla_unabsorb(u).tc_eligible);
  EXPECT_FALSE(plan_mla_unabsorb(u).tc);
  u.B = 32;
  EXPECT_TRUE(plan_mla_unabsorb(u).tc);
  u.tensor_cores = false;  // EngineOptions::absorb_tc off
  EXPECT_FALSE(plan_mla_unabsorb(u).tc);
  EXPECT_TRUE(plan_mla_unabsorb(u).fast);
  a.nope = 0;
  EXPECT_THROW(plan_mla_absorb(a), Error);
}

}  // namespace
}  // namespace glm5
