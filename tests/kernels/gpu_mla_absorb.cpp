// MLA absorb / unabsorb: CUDA kernels vs CPU twins on fresh random inputs. GLM-5's dims (nope 192,
// v 256, kv_lora 512, q head 256) for B in {1, 2, 3, 4, 5, 32, 128} x H in {64, 16, 8, 3} with a BF16 kv_b
// (F32 for H 16 and 3), then odd sizes on both the fast path and the simple fallback (unaligned L,
// unaligned kv_b, a W_UV tile too large for shared memory). Error bound: |gpu - cpu| <= 1e-5 *
// sum_k |x_k| |w_k| per output (fp32 FMA in a different order vs the twin's double sums), the scale
// computed by the CPU twin itself on |x| and |W|. Outputs start as NaN, with a NaN canary after the
// end: every value is written, nothing beyond.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/mla_absorb.h"

namespace glm5 {
namespace {

constexpr size_t kCanary = 64;

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) | rd();
}

struct Err {
  double max_rel = 0;  // max |gpu - cpu| / sum |x||w|
  int bad = 0;         // NaN or non-finite values
  void add(double ref, double scale, double got) {
    if (!std::isfinite(got)) {
      ++bad;
      return;
    }
    max_rel = std::max(max_rel, std::abs(ref - got) / std::max(scale, 1e-30));
  }
};

// Uploads `n` NaNs followed by the canary and returns the device buffer.
Buffer nan_buffer(size_t n, const char* label) {
  std::vector<float> init(n + kCanary, std::numeric_limits<float>::quiet_NaN());
  Buffer b(Where::Device, init.size() * 4, label);
  b.upload(init.data(), b.bytes());
  return b;
}

void check_canary(const std::vector<float>& got, size_t n, const char* what) {
  for (size_t i = n; i < n + kCanary; ++i) ASSERT_TRUE(std::isnan(got[i])) << what << " wrote past its end at " << i;
}

// kv_b_offset_bytes: the weights start that many bytes into their allocation (alignment tests).
// want_fast_*: the tiled kernels are eligible (the dispatch may still take the simple ones).
void check(int B, int H, int nope, int rope, int v, int L, DType dt, bool want_fast_absorb, bool want_fast_unabsorb,
           size_t kv_b_offset_bytes = 0) {
  const uint64_t seed = fresh_seed();
  const int qk = nope + rope;
  const size_t w_elems = size_t(H) * (nope + v) * L;
  std::vector<float> wf(w_elems), wf_abs(w_elems);
  std::vector<uint16_t> wb(w_elems), wb_abs(w_elems);
  for (size_t i = 0; i < w_elems; ++i) {
    wb[i] = float_to_bf16_bits(rng_normal(seed, 1, i) * 0.05f);
    wb_abs[i] = wb[i] & 0x7fffu;
    wf[i] = dt == DType::BF16 ? bf16_bits_to_float(wb[i]) : rng_normal(seed, 1, i) * 0.05f;
    wf_abs[i] = std::fabs(wf[i]);
  }
  std::vector<float> q(size_t(B) * H * qk), ol(size_t(B) * H * L);
  for (size_t i = 0; i < q.size(); ++i) q[i] = rng_normal(seed, 2, i);
  for (size_t i = 0; i < ol.size(); ++i) ol[i] = rng_normal(seed, 3, i);
  std::vector<float> q_abs(q), ol_abs(ol);
  for (auto& x : q_abs) x = std::fabs(x);
  for (auto& x : ol_abs) x = std::fabs(x);
  const bool bf = dt == DType::BF16;
  const void* hw = bf ? (const void*)wb.data() : (const void*)wf.data();
  const void* hw_abs = bf ? (const void*)wb_abs.data() : (const void*)wf_abs.data();
  const size_t w_bytes = w_elems * dtype_size(dt);

  Buffer dw(Where::Device, w_bytes + kv_b_offset_bytes, "kv_b"), dq(Where::Device, q.size() * 4, "q"),
      dol(Where::Device, ol.size() * 4, "o_latent");
  void* dkv = static_cast<char*>(dw.data()) + kv_b_offset_bytes;
  CUDA_CHECK(cudaMemcpy(dkv, hw, w_bytes, cudaMemcpyHostToDevice));
  dq.upload(q.data(), dq.bytes());
  dol.upload(ol.data(), dol.bytes());
  const size_t nql = size_t(B) * H * L, nout = size_t(B) * H * v;
  Buffer dql = nan_buffer(nql, "q_latent"), dout = nan_buffer(nout, "out");

  std::vector<float> ql(nql), ql_scale(nql), out(nout), out_scale(nout);
  mla_absorb_cpu({q.data(), hw, dt, ql.data(), B, H, nope, v, L, qk});
  mla_absorb_cpu({q_abs.data(), hw_abs, dt, ql_scale.data(), B, H, nope, v, L, qk});
  mla_unabsorb_cpu({ol.data(), hw, dt, out.data(), B, H, nope, v, L});
  mla_unabsorb_cpu({ol_abs.data(), hw_abs, dt, out_scale.data(), B, H, nope, v, L});
  const MlaAbsorbParams pa{dq.as<float>(), dkv, dt, dql.as<float>(), B, H, nope, v, L, qk};
  const MlaUnabsorbParams pu{dol.as<float>(), dkv, dt, dout.as<float>(), B, H, nope, v, L};
  const MlaAbsorbPlan plan_a = plan_mla_absorb(pa), plan_u = plan_mla_unabsorb(pu);
  EXPECT_EQ(plan_a.eligible, want_fast_absorb);
  EXPECT_EQ(plan_u.eligible, want_fast_unabsorb);
  // The GEMV kernels: B <= 4 with an aligned BF16 kv_b and L % 8 == 0 (device buffers are aligned);
  // where eligible the dispatch takes them.
  const bool want_gemv = B <= 4 && dt == DType::BF16 && kv_b_offset_bytes % 16 == 0 && L % 8 == 0;
  EXPECT_EQ(plan_a.gemv_eligible, want_gemv);
  EXPECT_EQ(plan_u.gemv_eligible, want_gemv);
  EXPECT_EQ(plan_a.gemv, want_gemv && B == 1 && H > 16);  // absorb: measured faster there only
  EXPECT_EQ(plan_u.gemv, want_gemv);
  // The tensor-core kernels: BF16 kv_b aligned, L % 8 == 0, K % 16 == 0 (absorb nope, unabsorb L), activation rows
  // 8-byte aligned (q_head_stride = nope + rope even), the W tile within shared memory; dispatched where measured faster
// (absorb from batch 2, unabsorb from batch 5 at H > 16, above 16 at H <= 16).
  const bool bf16_ok = dt == DType::BF16 && kv_b_offset_bytes % 16 == 0 && L % 8 == 0;
  const bool want_tc_a = bf16_ok && nope % 16 == 0 && qk % 2 == 0;
  const bool want_tc_u = bf16_ok && L % 16 == 0 && size_t(64) * (L + 8) * 2 <= kMlaAbsorbMaxSmem;
  EXPECT_EQ(plan_a.tc_eligible, want_tc_a);
  EXPECT_EQ(plan_u.tc_eligible, want_tc_u);
  EXPECT_EQ(plan_a.tc, want_tc_a && B >= 2 && !plan_a.gemv);
  EXPECT_EQ(plan_u.tc, want_tc_u && B >= kMlaAbsorbTcMinBatch && (H > 16 || B > 16) && !plan_u.gemv);
  EXPECT_EQ(plan_a.fast, want_fast_absorb && !plan_a.simple_faster && !plan_a.gemv && !plan_a.tc);  // eligible, and not measured slower
  EXPECT_EQ(plan_u.fast, want_fast_unabsorb && !plan_u.simple_faster && !want_gemv && !plan_u.tc);
  // Runs absorb / unabsorb through one pair of entry points (either may be skipped) into fresh NaN
  // buffers, checks the canaries, and returns the errors against the CPU twin.
  using AbsorbFn = void (*)(const MlaAbsorbParams&, cudaStream_t);
  using UnabsorbFn = void (*)(const MlaUnabsorbParams&, cudaStream_t);
  auto run = [&](const char* what, AbsorbFn fa, UnabsorbFn fu) {
    Buffer rql = nan_buffer(nql, "q_latent"), rout = nan_buffer(nout, "out");
    if (fa) fa({pa.q, pa.kv_b, dt, rql.as<float>(), B, H, nope, v, L, qk}, nullptr);
    if (fu) fu({pu.o_latent, pu.kv_b, dt, rout.as<float>(), B, H, nope, v, L}, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> g1(nql + kCanary), g2(nout + kCanary);
    rql.download(g1.data(), rql.bytes());
    rout.download(g2.data(), rout.bytes());
    std::pair<Err, Err> e;
    for (size_t i = 0; fa && i < nql; ++i) e.first.add(ql[i], ql_scale[i], g1[i]);
    for (size_t i = 0; fu && i < nout; ++i) e.second.add(out[i], out_scale[i], g2[i]);
    check_canary(g1, nql, what);
    check_canary(g2, nout, what);
    EXPECT_EQ(e.first.bad + e.second.bad, 0) << what << ": outputs not written or not finite";
    EXPECT_LT(e.first.max_rel, 1e-5) << what << ", seed " << seed;
    EXPECT_LT(e.second.max_rel, 1e-5) << what << ", seed " << seed;
    return e;
  };
  if (want_gemv) {  // the explicit entry points (the dispatch, checked below, runs them where plan.gemv)
    const auto [ga, gu] = run("gemv", mla_absorb_gemv_cuda, mla_unabsorb_gemv_cuda);
    std::printf("  gemv: absorb rel err %.3g, unabsorb rel err %.3g\n", ga.max_rel, gu.max_rel);
  } else {
    EXPECT_THROW(mla_absorb_gemv_cuda(pa, nullptr), Error);
    EXPECT_THROW(mla_unabsorb_gemv_cuda(pu, nullptr), Error);
  }
  want_fast_absorb = plan_a.fast;
  want_fast_unabsorb = plan_u.fast;
  // The tiled kernels wherever eligible, also where the dispatch takes the simple ones.
  if (plan_a.eligible || plan_u.eligible) {
    const auto [ta, tu] = run("tiled", plan_a.eligible ? mla_absorb_tiled_cuda : nullptr,
                              plan_u.eligible ? mla_unabsorb_tiled_cuda : nullptr);
    std::printf("  tiled: absorb rel err %.3g, unabsorb rel err %.3g\n", ta.max_rel, tu.max_rel);
  }
  if (!plan_a.eligible) {
    EXPECT_THROW(mla_absorb_tiled_cuda(pa, nullptr), Error);
  }
  // The tensor-core kernels wherever eligible, also below the batch the dispatch gives them.
  if (want_tc_a || want_tc_u) {
    // Every split of the 4 warps over a batch tile (1, 2 or 4 warps per 16 rows), then the kernel's own choice.
    const AbsorbFn tca[] = {[](const MlaAbsorbParams& q, cudaStream_t s) { mla_absorb_tc_cuda(q, s, 1); },
                            [](const MlaAbsorbParams& q, cudaStream_t s) { mla_absorb_tc_cuda(q, s, 2); },
                            [](const MlaAbsorbParams& q, cudaStream_t s) { mla_absorb_tc_cuda(q, s, 4); },
                            [](const MlaAbsorbParams& q, cudaStream_t s) { mla_absorb_tc_cuda(q, s); }};
    const UnabsorbFn tcu[] = {[](const MlaUnabsorbParams& q, cudaStream_t s) { mla_unabsorb_tc_cuda(q, s, 1); },
                              [](const MlaUnabsorbParams& q, cudaStream_t s) { mla_unabsorb_tc_cuda(q, s, 2); },
                              [](const MlaUnabsorbParams& q, cudaStream_t s) { mla_unabsorb_tc_cuda(q, s, 4); },
                              [](const MlaUnabsorbParams& q, cudaStream_t s) { mla_unabsorb_tc_cuda(q, s); }};
    for (int i = 0; i < 4; ++i) {
      const auto [ca, cu] = run("tc", want_tc_a ? tca[i] : nullptr, want_tc_u ? tcu[i] : nullptr);
      std::printf("  tc: absorb rel err %.3g, unabsorb rel err %.3g (warps per batch tile: %s)\n", ca.max_rel, cu.max_rel,
                  i < 3 ? std::to_string(1 << i).c_str() : "auto");
    }
    EXPECT_THROW(mla_absorb_tc_cuda(pa, nullptr, 3), Error);
  }
  if (!want_tc_a) {
    EXPECT_THROW(mla_absorb_tc_cuda(pa, nullptr), Error);
  }
  if (!want_tc_u) {
    EXPECT_THROW(mla_unabsorb_tc_cuda(pu, nullptr), Error);
  }
  if (!plan_u.eligible) {
    EXPECT_THROW(mla_unabsorb_tiled_cuda(pu, nullptr), Error);
  }
  const auto [ea, eu] = run("dispatch", mla_absorb_cuda, mla_unabsorb_cuda);
  std::printf("mla B=%d H=%d nope=%d v=%d L=%d %s%s: absorb (%s) rel err %.3g, unabsorb (%s) rel err %.3g  seed %llu\n",
              B, H, nope, v, L, dtype_name(dt).c_str(), kv_b_offset_bytes ? " unaligned" : "",
              plan_a.gemv ? "gemv" : plan_a.tc ? "tc" : want_fast_absorb ? "fast" : "simple", ea.max_rel,
              plan_u.gemv ? "gemv" : plan_u.tc ? "tc" : want_fast_unabsorb ? "fast" : "simple", eu.max_rel,
              (unsigned long long)seed);
}

TEST(GpuMlaAbsorb, Glm5ShapesMatchCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int H : {64, 16, 8, 3})
    for (int B : {1, 2, 3, 4, 5, 32, 128}) {
      check(B, H, 192, 64, 256, 512, DType::BF16, true, true);
      if (H == 16 || H == 3) check(B, H, 192, 64, 256, 512, DType::F32, true, true);
    }
}

TEST(GpuMlaAbsorb, OddShapesMatchCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check(3, 5, 24, 8, 16, 40, DType::BF16, true, true);        // L % 64 != 0: partial column tile
  check(5, 3, 7, 1, 9, 36, DType::F32, true, true);           // odd nope / v, F32 half chunks (L % 8 == 4)
  check(6, 3, 24, 3, 16, 40, DType::BF16, true, true);       // q_head_stride 27: q staged by scalar loads
  check(37, 3, 200, 0, 40, 72, DType::BF16, true, true);      // nope % 8 != 0, v % 32 != 0, q_head_stride == nope
  check(1, 4, 48, 32, 32, 64, DType::BF16, true, true);       // glm5-tiny
  check(2, 3, 7, 1, 9, 33, DType::F32, false, false);         // L % 4 != 0: simple kernels
  check(4, 2, 16, 0, 16, 36, DType::BF16, false, false);      // BF16 L % 8 != 0
  check(3, 2, 64, 0, 40, 2048, DType::BF16, true, false);     // W_UV tile 2048 x 32 fp32 > shared memory
  check(5, 4, 192, 64, 256, 512, DType::BF16, false, false, 2);  // kv_b not 16-byte aligned
  check(130, 2, 192, 64, 256, 512, DType::BF16, true, true);  // B past two passes, partial last pass
  check(2, 3, 200, 0, 40, 72, DType::BF16, true, true);       // gemv: a second round of rows, partial warps and lanes
  check(37, 3, 32, 0, 36, 48, DType::BF16, true, true);       // tc: partial m-tile, v % 8 != 0, one partial column tile
  check(6, 3, 208, 2, 36, 80, DType::BF16, true, true);       // tc: K % 64 != 0 (absorb 208, unabsorb 80)
}

TEST(GpuMlaAbsorb, BadParamsThrowBeforeLaunch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_THROW(mla_absorb_cuda({nullptr, nullptr, DType::BF16, nullptr, 1, 1, 1, 1, 1, 1}, nullptr), Error);
  EXPECT_THROW(mla_unabsorb_cuda({nullptr, nullptr, DType::BF16, nullptr, 1, 1, 1, 1, 1}, nullptr), Error);
}

}  // namespace
}  // namespace glm5
