// Expert-grouped MoE (MoeExpertsParams.group / pair_out, batch >= 4) against the per-(token, slot)
// kernels (same per-token accumulation order: agreement to 1e-6 relative, bitwise expected) and the CPU
// twin, for BF16 and FP8 block-scaled experts of GLM-5's row lengths (hidden 6144, inter 2048), with
// repeated experts in a batch, a token choosing the same expert twice and expert parallelism
// (expert_begin: slots routed to another rank's experts contribute nothing). The fp32 grouped kernels
// (fp8_mma = false) are held to the per-token path as above; the tensor-core grouped kernels (fp8_mma =
// true, the default; FP8: x and act rounded to f16, BF16: split into bf16 hi + lo) are checked output by
// output against exact (double) arithmetic within the bound derived in mma_bound below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/moe.h"
#include "kernels/sm90a/moe_fp8_wgmma.h"

namespace glm5 {
namespace {

struct Experts {
  DType dt;
  std::vector<uint8_t> g, u, d;  // raw bytes
  std::vector<float> sg, su, sd;
  Buffer dg, du, dd, dsg, dsu, dsd;
};

Experts make_experts(DType dt, int E, int hidden, int inter, uint64_t seed) {
  Experts x;
  x.dt = dt;
  const size_t n = size_t(E) * inter * hidden, es = dtype_size(dt);
  auto fill = [&](std::vector<uint8_t>& v, uint64_t s) {
    v.resize(n * es);
    for (size_t i = 0; i < n; ++i) {
      const float val = rng_normal(seed, s, i) / std::sqrt(float(hidden));
      if (dt == DType::BF16) {
        const uint16_t b = float_to_bf16_bits(val);
        std::memcpy(v.data() + 2 * i, &b, 2);
      } else {
        v[i] = float_to_e4m3_bits(val * 448.f / 4.f * std::sqrt(float(hidden)));
      }
    }
  };
  fill(x.g, 1);
  fill(x.u, 2);
  fill(x.d, 3);
  auto scales = [&](std::vector<float>& s, int rows, int cols, uint64_t st) {
    s.resize(size_t(E) * ((rows + 127) / 128) * ((cols + 127) / 128));
    for (size_t i = 0; i < s.size(); ++i) s[i] = (0.5f + rng_uniform(seed, st, i)) * 4.f / 448.f / std::sqrt(float(cols));
  };
  scales(x.sg, inter, hidden, 4);
  scales(x.su, inter, hidden, 5);
  scales(x.sd, hidden, inter, 6);
  auto up = [](const void* src, size_t bytes, const char* label) {
    Buffer b(Where::Device, bytes, label);
    b.upload(src, bytes);
    return b;
  };
  x.dg = up(x.g.data(), x.g.size(), "g");
  x.du = up(x.u.data(), x.u.size(), "u");
  x.dd = up(x.d.data(), x.d.size(), "d");
  x.dsg = up(x.sg.data(), x.sg.size() * 4, "sg");
  x.dsu = up(x.su.data(), x.su.size() * 4, "su");
  x.dsd = up(x.sd.data(), x.sd.size() * 4, "sd");
  return x;
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(double(a[i]) - b[i]));
    r = std::max(r, std::fabs(double(b[i])));
  }
  return m / std::max(r, 1e-30);
}

// Exact (double) MoE output of token b and the bound on |tensor-core grouped result - exact| for each
// d. FP8 (kernels/linear_fp8.h): every dot product of f16-rounded activations with exact e4m3 x scale
// weights, summed in fp32, is within eps * sum |a w| of the exact one, eps = 2^-11 (f16 rounding after an
// exact power-of-two scale) + 1e-5 (fp32 summation order). BF16 (kernels/linear_bf16_mma.cuh): activations
// as bf16 hi + lo, exact bf16 weights, eps = 2^-16 + 1e-5. With G = sum |x w_g|,
// U = sum |x w_u| per inter row i and |silu'| <= 1.1:
//   |d act_i| <= 1.1 eps G (|u| + eps U) + |silu(g)| eps U,
//   |d o_d|   <= sum_i |w_d[d, i]| (|d act_i| + eps (|act_i| + |d act_i|)),   |d out_d| <= sum_j tw_j |d o_d|.
// Weight i of one of X's matrices `w`, decoded exactly: e4m3 code x its block scale s[c / 128] (s: the row's scale
// row, c: the column), or the bf16 value.
double decoded_weight(const Experts& X, const std::vector<uint8_t>& w, size_t i, const float* s, int c) {
  if (X.dt == DType::F8_E4M3) return double(e4m3_bits_to_float(w[i])) * s[c / 128];
  uint16_t bits;
  std::memcpy(&bits, w.data() + 2 * i, 2);
  return double(bf16_bits_to_float(bits));
}

void mma_bound(const Experts& X, const std::vector<float>& x, const std::vector<int32_t>& ids,
                   const std::vector<float>& tw, int b, int k, int hidden, int inter, int expert_begin, int E_local,
                   std::vector<double>& exact, std::vector<double>& bound, double eps_activations = 0) {
  const bool fp8 = X.dt == DType::F8_E4M3;
  const double eps = eps_activations > 0 ? eps_activations : (fp8 ? 0x1p-11 : 0x1p-16) + 1e-5;
  const int sch = (hidden + 127) / 128, sci = (inter + 127) / 128;
  exact.assign(size_t(hidden), 0.0);
  bound.assign(size_t(hidden), 0.0);
  std::vector<double> a(static_cast<size_t>(inter)), da(static_cast<size_t>(inter));
  for (int j = 0; j < k; ++j) {
    const int e = ids[size_t(b) * k + j] - expert_begin;
    if (e < 0 || e >= E_local) continue;
    for (int i = 0; i < inter; ++i) {
      double g = 0, u = 0, G = 0, U = 0;
      const size_t row = (size_t(e) * inter + i) * hidden;
      const float* sg = X.sg.data() + (size_t(e) * sci + i / 128) * sch;
      const float* su = X.su.data() + (size_t(e) * sci + i / 128) * sch;
      for (int c = 0; c < hidden; ++c) {
        const double xv = x[size_t(b) * hidden + c];
        const double wg = decoded_weight(X, X.g, row + c, sg, c), wu = decoded_weight(X, X.u, row + c, su, c);
        g += xv * wg;
        u += xv * wu;
        G += std::fabs(xv * wg);
        U += std::fabs(xv * wu);
      }
      const double silu = g / (1.0 + std::exp(-g));
      a[size_t(i)] = silu * u;
      da[size_t(i)] = 1.1 * eps * G * (std::fabs(u) + eps * U) + std::fabs(silu) * eps * U;
    }
    for (int d = 0; d < hidden; ++d) {
      const size_t row = (size_t(e) * hidden + d) * inter;
      const float* sd = X.sd.data() + (size_t(e) * sch + d / 128) * sci;
      double o = 0, dob = 0;
      for (int i = 0; i < inter; ++i) {
        const double wd = decoded_weight(X, X.d, row + i, sd, i);
        o += wd * a[size_t(i)];
        dob += std::fabs(wd) * (da[size_t(i)] + eps * (std::fabs(a[size_t(i)]) + da[size_t(i)]));
      }
      exact[size_t(d)] += double(tw[size_t(b) * k + j]) * o;
      bound[size_t(d)] += double(tw[size_t(b) * k + j]) * dob;
    }
  }
}

// p with the host copies of its inputs and weights (for moe_experts_cpu), act / out host buffers.
MoeExpertsParams host_params(const MoeExpertsParams& p, const Experts& X, const std::vector<float>& x,
                             const std::vector<int32_t>& ids, const std::vector<float>& tw, std::vector<float>& act,
                             std::vector<float>& out) {
  const bool fp8 = X.dt == DType::F8_E4M3;
  MoeExpertsParams h = p;
  h.x = x.data();
  h.topk_ids = ids.data();
  h.topk_weights = tw.data();
  h.w_gate = X.g.data();
  h.w_up = X.u.data();
  h.w_down = X.d.data();
  h.s_gate = fp8 ? X.sg.data() : nullptr;
  h.s_up = fp8 ? X.su.data() : nullptr;
  h.s_down = fp8 ? X.sd.data() : nullptr;
  h.act = act.data();
  h.out = out.data();
  h.group = nullptr;
  h.pair_out = nullptr;
  return h;
}

void check(const Experts& X, int B, int E_total, int expert_begin, int E_local, bool with_cpu) {
  const int k = 8, hidden = 6144, inter = 2048;
  std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k);
  std::vector<int32_t> ids(size_t(B) * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(40, B, i);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(splitmix64(i * 7 + B) % E_total);
  ids[1] = ids[0];  // token 0 picks one expert twice
  for (size_t i = 0; i < tw.size(); ++i) tw[i] = rng_uniform(41, B, i);
  Buffer dx(Where::Device, x.size() * 4, "x"), dids(Where::Device, ids.size() * 4, "ids"), dtw(Where::Device, tw.size() * 4, "tw");
  dx.upload(x.data(), dx.bytes());
  dids.upload(ids.data(), dids.bytes());
  dtw.upload(tw.data(), dtw.bytes());
  const bool fp8 = X.dt == DType::F8_E4M3;
  Buffer dact(Where::Device, size_t(B) * k * inter * 4, "act"), dout(Where::Device, size_t(B) * hidden * 4, "out");
  Buffer dgroup(Where::Device, (E_local + 1 + size_t(B) * k) * 4, "group"), dpair(Where::Device, size_t(B) * k * hidden * 4, "pair");
  MoeExpertsParams p{dx.as<float>(), dids.as<int32_t>(), dtw.as<float>(), X.dg.data(), X.du.data(), X.dd.data(), X.dt,
                     fp8 ? X.dsg.as<float>() : nullptr, fp8 ? X.dsu.as<float>() : nullptr, fp8 ? X.dsd.as<float>() : nullptr,
                     dact.as<float>(), dout.as<float>(), B, E_local, k, hidden, inter, expert_begin, E_total};
  moe_experts_cuda(p, nullptr);  // per (token, slot)
  std::vector<float> per_token(size_t(B) * hidden), grouped(per_token.size());
  dout.download(per_token.data(), dout.bytes());
  p.group = dgroup.as<int32_t>();
  p.pair_out = dpair.as<float>();
  p.fp8_mma = false;
  moe_experts_cuda(p, nullptr);  // grouped by expert, fp32 kernels
  dout.download(grouped.data(), dout.bytes());
  const double e_pt = rel(grouped, per_token);
  {  // grouped by expert on the tensor cores: within the derived bound of exact, per output
    p.fp8_mma = true;
    moe_experts_cuda(p, nullptr);  // the default weight prefetch (BF16 on, FP8 off)
    std::vector<float> mma(per_token.size()), mma_off(per_token.size()), mma_on(per_token.size());
    dout.download(mma.data(), dout.bytes());
    for (int pf : {0, 1}) {  // both settings explicitly: the prefetch reorders loads only, so the same bits
      p.mma_prefetch = pf;
      moe_experts_cuda(p, nullptr);
      dout.download((pf ? mma_on : mma_off).data(), dout.bytes());
    }
    p.mma_prefetch = -1;
    EXPECT_EQ(std::memcmp(mma_off.data(), mma_on.data(), mma.size() * 4), 0) << "mma_prefetch changed the result; B=" << B;
    EXPECT_EQ(std::memcmp(mma.data(), mma_on.data(), mma.size() * 4), 0) << "default prefetch setting; B=" << B;
    std::vector<int> tokens = {0, 1, B / 2, B - 1};
    if (with_cpu) {
      tokens.clear();
      for (int b = 0; b < B; ++b) tokens.push_back(b);
    }
    double worst = 0, worst_rel = 0;  // largest |err| / bound, largest |err| / max |exact|
    size_t over = 0;
    for (int b : tokens) {
      std::vector<double> exact, bound;
      mma_bound(X, x, ids, tw, b, k, hidden, inter, expert_begin, E_local, exact, bound);
      double mx = 0;
      for (double v : exact) mx = std::max(mx, std::fabs(v));
      for (int d = 0; d < hidden; ++d) {
        const double err = std::fabs(double(mma[size_t(b) * hidden + d]) - exact[size_t(d)]);
        over += !(err <= bound[size_t(d)]);
        worst = std::max(worst, err / std::max(bound[size_t(d)], 1e-300));
        worst_rel = std::max(worst_rel, err / std::max(mx, 1e-30));
      }
    }
    std::printf("moe grouped mma %s B=%d experts [%d, %d) of %d, %zu tokens: max err / bound %.3g, max err / max|out| %.3g\n",
                dtype_name(X.dt).c_str(), B, expert_begin, expert_begin + E_local, E_total, tokens.size(), worst, worst_rel);
    EXPECT_EQ(over, 0u) << "outputs beyond the " << (fp8 ? "f16" : "bf16 hi + lo") << " bound; B=" << B;
    EXPECT_GT(worst, 0.0) << "the tensor-core result equals exact arithmetic to the bit: the check cannot fail";
    // The bound above is loose (measured: <= 1.8e-4 of it for BF16), loose enough that a BF16 tile dropping or
    // misplacing its lo term (bf16-rounded activations, ~2^-9 relative per product) would pass it. Measured
    // with hi + lo: max err / max |out| 4.3-4.9e-6 (S9d); a single bf16 rounding gives ~1e-3. So for BF16 also:
    if (!fp8) {
      EXPECT_LT(worst_rel, 5e-5) << "BF16 tile error as if its activations were rounded once; B=" << B;
    }
    p.fp8_mma = false;
  }
  double e_cpu = -1;
  if (with_cpu) {
    std::vector<float> act(size_t(B) * k * inter), out(size_t(B) * hidden);
    moe_experts_cpu(host_params(p, X, x, ids, tw, act, out));
    e_cpu = rel(grouped, out);
    EXPECT_LT(e_cpu, 1e-4);
  }
  std::printf("moe grouped %s B=%d experts [%d, %d) of %d: vs per-token %.3g, vs CPU %.3g\n", dtype_name(X.dt).c_str(), B,
              expert_begin, expert_begin + E_local, E_total, e_pt, e_cpu);
  EXPECT_LT(e_pt, 1e-6);
}

TEST(GpuMoeGrouped, MatchesPerTokenAndCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dt : {DType::BF16, DType::F8_E4M3}) {
    Experts X = make_experts(dt, 24, 6144, 2048, dt == DType::BF16 ? 7 : 8);
    check(X, 4, 24, 0, 24, true);
    check(X, 33, 24, 0, 24, false);
    // expert parallel: this rank holds experts [8, 16) of 24 (weights offset by the caller)
    Experts local = make_experts(dt, 8, 6144, 2048, 9);
    check(local, 8, 24, 8, 8, true);
  }
}

// Small batches with pair_out only (FP8): the per-(token, slot) down projection into pair_out plus the
// slot-order combine must give exactly the per-token kernel's bits (same per-row arithmetic, same sum
// order), and the CPU twin's values; B = 1..3, a token picking one expert twice, expert parallelism.
TEST(GpuMoeGrouped, PairDownMatchesPerTokenBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const int k = 8, hidden = 6144, inter = 2048;
  for (auto [E_total, begin, E_local] : {std::tuple{24, 0, 24}, std::tuple{24, 8, 8}}) {
    const Experts X = make_experts(DType::F8_E4M3, E_local, hidden, inter, 10 + begin);
    for (int B : {1, 2, 3}) {
      const uint64_t seed = fresh_seed();
      std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k);
      std::vector<int32_t> ids(size_t(B) * k);
      for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 50, i);
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(splitmix64(seed + i) % E_total);
      ids[1] = ids[0];
      for (size_t i = 0; i < tw.size(); ++i) tw[i] = rng_uniform(seed, 51, i);
      Buffer dx(Where::Device, x.size() * 4, "x"), dids(Where::Device, ids.size() * 4, "ids"),
          dtw(Where::Device, tw.size() * 4, "tw"), dact(Where::Device, size_t(B) * k * inter * 4, "act"),
          dout(Where::Device, size_t(B) * hidden * 4, "out"), dpair(Where::Device, size_t(B) * k * hidden * 4, "pair");
      dx.upload(x.data(), dx.bytes());
      dids.upload(ids.data(), dids.bytes());
      dtw.upload(tw.data(), dtw.bytes());
      MoeExpertsParams p{dx.as<float>(), dids.as<int32_t>(), dtw.as<float>(), X.dg.data(), X.du.data(), X.dd.data(),
                         X.dt, X.dsg.as<float>(), X.dsu.as<float>(), X.dsd.as<float>(), dact.as<float>(),
                         dout.as<float>(), B, E_local, k, hidden, inter, begin, E_total};
      moe_experts_cuda(p, nullptr);  // one warp per row d over all slots
      std::vector<float> per_token(size_t(B) * hidden), pair(per_token.size());
      dout.download(per_token.data(), dout.bytes());
      p.pair_out = dpair.as<float>();
      moe_experts_cuda(p, nullptr);  // per (token, slot) into pair_out, then the combine
      dout.download(pair.data(), dout.bytes());
      size_t differ = 0;
      for (size_t i = 0; i < pair.size(); ++i) differ += std::memcmp(&pair[i], &per_token[i], 4) != 0;
      EXPECT_EQ(differ, 0u) << "B=" << B << " experts [" << begin << ", " << begin + E_local << "), seed " << seed;
      std::vector<float> act(size_t(B) * k * inter), out(size_t(B) * hidden);
      const MoeExpertsParams h = host_params(p, X, x, ids, tw, act, out);
      moe_experts_cpu(h);
      const double e_cpu = rel(pair, out);
      std::printf("moe pair-down fp8 B=%d experts [%d, %d) of %d: %zu values differ from per-token, vs CPU %.3g\n", B,
                  begin, begin + E_local, E_total, differ, e_cpu);
      EXPECT_LT(e_cpu, 1e-4);
      // The shared expert fused into the same launches (one more pair per token) vs the CPU twin.
      const Experts S = make_experts(DType::F8_E4M3, 1, hidden, inter, seed % 1000 + 20);
      std::vector<uint8_t> gu(S.g);
      gu.insert(gu.end(), S.u.begin(), S.u.end());
      std::vector<float> sgu(S.sg);
      sgu.insert(sgu.end(), S.su.begin(), S.su.end());
      Buffer dgu = to_device(gu, "shared gate_up"), dsgu = to_device(sgu, "shared gate_up scales"),
             dact2(Where::Device, size_t(B) * (k + 1) * inter * 4, "act + shared"),
             dpair2(Where::Device, size_t(B) * (k + 1) * hidden * 4, "pair + shared");
      MoeExpertsParams q = p;
      q.act = dact2.as<float>();
      q.pair_out = dpair2.as<float>();
      q.shared_gate_up = dgu.data();
      q.s_shared_gate_up = dsgu.as<float>();
      q.shared_down = S.dd.data();
      q.s_shared_down = S.dsd.as<float>();
      moe_experts_cuda(q, nullptr);
      std::vector<float> fused(size_t(B) * hidden), act2(size_t(B) * (k + 1) * inter), out2(size_t(B) * hidden);
      dout.download(fused.data(), dout.bytes());
      MoeExpertsParams hq = h;
      hq.act = act2.data();
      hq.out = out2.data();
      hq.shared_gate_up = gu.data();
      hq.s_shared_gate_up = sgu.data();
      hq.shared_down = S.d.data();
      hq.s_shared_down = S.sd.data();
      moe_experts_cpu(hq);
      const double e_shared = rel(fused, out2);
      double shared_part = 0;  // the shared expert must change the output (else the test proves nothing)
      for (size_t i = 0; i < out2.size(); ++i) shared_part = std::max(shared_part, std::fabs(double(out2[i]) - out[i]));
      std::printf("moe fused shared expert fp8 B=%d: vs CPU %.3g (shared part max %.3g)\n", B, e_shared, shared_part);
      EXPECT_LT(e_shared, 1e-4);
      EXPECT_GT(shared_part, 0.0);
      // The residual add fused into the combine (accumulate): residual + the bits above, exactly.
      MoeExpertsParams f = q;
      std::vector<float> resid(fused.size()), got(fused.size());
      for (size_t i = 0; i < resid.size(); ++i) resid[i] = rng_normal(seed, 52, i);
      dout.upload(resid.data(), dout.bytes());
      f.accumulate = true;
      moe_experts_cuda(f, nullptr);
      dout.download(got.data(), dout.bytes());
      size_t diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const float want = resid[i] + fused[i];
        diff += std::memcmp(&got[i], &want, 4) != 0;
      }
      EXPECT_EQ(diff, 0u) << "fused combine + residual add, B=" << B << ", seed " << seed;
      // The same on the per-token down kernel (no pair_out): residual + per_token, exactly.
      MoeExpertsParams pa = p;
      pa.pair_out = nullptr;
      pa.accumulate = true;
      dout.upload(resid.data(), dout.bytes());
      moe_experts_cuda(pa, nullptr);
      dout.download(got.data(), dout.bytes());
      diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const float want = resid[i] + per_token[i];
        diff += std::memcmp(&got[i], &want, 4) != 0;
      }
      EXPECT_EQ(diff, 0u) << "per-token down + residual add, B=" << B << ", seed " << seed;
      // The CPU twin's accumulate: residual + its own result, within the same tolerance.
      std::vector<float> out3(resid);
      hq.out = out3.data();
      hq.accumulate = true;
      moe_experts_cpu(hq);
      std::vector<float> fused_resid(fused.size());
      for (size_t i = 0; i < fused.size(); ++i) fused_resid[i] = resid[i] + fused[i];
      EXPECT_LT(rel(fused_resid, out3), 1e-4);
    }
  }
}

}  // namespace
}  // namespace glm5

namespace glm5 {
namespace {

// moe_group_kernel's slot-row schedule for the last moe_experts_cuda call with p (MoeSlotSchedule, kernels/moe.h),
// against the buckets it wrote and the counts of `ids`: R[e] the prefix sums of the counts rounded up to 4, U[e] of
// ceil(count / N), slot row R[e] + i the bucket's i-th pair, the bucket's pad rows -1. rows: the plan's slot rows.
void check_slot_schedule(const MoeExpertsParams& p, int rows, const std::vector<int32_t>& ids, const Buffer& dgroup,
                         const Buffer& scratch) {
  const MoeSlotSchedule s = moe_fp8_wgmma_slot_schedule(p);
  const int E = p.E;
  const std::vector<int32_t> group = to_host<int32_t>(dgroup);
  const size_t at = size_t(reinterpret_cast<const uint8_t*>(s.out) - p.wgmma_scratch);  // the schedule's region only
  const std::vector<int32_t> region = to_host<int32_t>(scratch, moe_slot_schedule_bytes(E, rows) / 4, at);
  const int32_t* sched = region.data();
  std::vector<int> count(size_t(E), 0);
  for (int32_t id : ids)
    if (id >= p.expert_begin && id < p.expert_begin + E) ++count[size_t(id - p.expert_begin)];
  int r = 0, u = 0, bad = 0;
  for (int e = 0; e <= E; ++e) {
    bad += sched[e] != r || sched[E + 1 + e] != u;
    if (e == E) break;
    const int c = count[size_t(e)];
    bad += group[size_t(e) + 1] - group[size_t(e)] != c;
    for (int i = 0; i < ((c + 3) & ~3); ++i)
      bad += sched[moe_slot_schedule_src(E) + r + i] != (i < c ? group[size_t(E + 1 + group[size_t(e)] + i)] : -1);
    r += (c + 3) & ~3;
    u += (c + s.tile_n - 1) / s.tile_n;
  }
  EXPECT_EQ(bad, 0) << "slot-row schedule: " << bad << " entries differ (E " << E << ", N " << s.tile_n << ")";
  EXPECT_GT(r, 0);
}

// The FP8 experts on the FP8 tensor cores fed by TMA (MoeExpertsParams::fp8_wgmma, kernels/sm90a/moe_fp8_wgmma.h), on
// fresh random inputs, gate_up's k unsplit and split in two (MoeExpertsParams::wgmma_ksplit): against the CPU twin (the same e4m3 x and act) within 5e-3 of M[b, d] = sum_j tw_j sum_i
// |w_d[d, i]| |act_i| per output (the differences: the FP8 tensor core's accumulation of each 128-column block, and
// the act codes that flip with g and u's last bits, each by 1/16 to 1/8 of the element; S25b measured 3.4e-4 to
// 1.6e-3 of M, a misplaced row or scale gives O(1)), and against exact arithmetic within mma_bound's bound with eps = 2^-4 (x and act rounded to e4m3, 3
// mantissa bits) + 1e-4 (e4m3 subnormals, fp32 order).
// BF16 experts (dt BF16): the same checks with bf16 x and act (eps 2^-8 + 1e-4); the k split is never taken.
void check_wgmma(int B, int E_total, int begin, int E_local, int hidden, int inter, bool skew,
                 DType dt = DType::F8_E4M3) {
  const int k = 8;
  const uint64_t seed = fresh_seed();
  const bool fp8 = dt == DType::F8_E4M3;
  const Experts X = make_experts(dt, E_local, hidden, inter, seed);
  std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k);
  std::vector<int32_t> ids(size_t(B) * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 60, i);
  for (size_t i = 0; i < ids.size(); ++i)  // skew: every token picks experts begin .. begin + 7 (many pairs each)
    ids[i] = skew ? int32_t(begin + int(i % k) % E_local) : int32_t(splitmix64(seed + i) % E_total);
  ids[1] = ids[0];  // token 0 picks one expert twice
  for (size_t i = 0; i < tw.size(); ++i) tw[i] = 0.1f + rng_uniform(seed, 61, i);
  const MoeFp8WgmmaPlan q = moe_fp8_wgmma_plan(B, k, E_local, E_total, hidden, inter, 2, dt);  // the larger scratch
  Buffer dx = to_device(x, "x"), dids = to_device(ids, "ids"), dtw = to_device(tw, "tw");
  Buffer dact(Where::Device, size_t(B) * k * inter * 4, "act"), dout(Where::Device, size_t(B) * hidden * 4, "out");
  Buffer dgroup(Where::Device, (E_local + 1 + size_t(B) * k) * 4, "group"),
      dpair(Where::Device, size_t(B) * k * hidden * 4, "pair"), scratch(Where::Device, q.scratch_bytes, "wgmma scratch");
  MoeExpertsParams p{dx.as<float>(), dids.as<int32_t>(), dtw.as<float>(), X.dg.data(), X.du.data(), X.dd.data(), X.dt,
                     X.dsg.as<float>(), X.dsu.as<float>(), X.dsd.as<float>(), dact.as<float>(), dout.as<float>(), B,
                     E_local, k, hidden, inter, begin, E_total};
  if (!fp8) p.s_gate = p.s_up = p.s_down = nullptr;
  p.group = dgroup.as<int32_t>();
  p.pair_out = dpair.as<float>();
  p.wgmma_scratch = scratch.as<uint8_t>();
  p.wgmma_scratch_bytes = scratch.bytes();
  moe_fp8_wgmma_scratch_init(scratch.as<uint8_t>(), scratch.bytes());
  ASSERT_EQ(moe_fp8_wgmma_unsupported(p), "") << "the wgmma experts must run here";
  ASSERT_EQ(q.ksplit, fp8 ? 2 : 1);
  std::vector<std::vector<float>> gpu;  // gate_up's k unsplit, split in two (twice: the same bits, sums left zero)
  for (int ks : {1, 2, 2}) {
    p.wgmma_ksplit = ks;
    if (gpu.size() == 2) {  // the schedule region poisoned (0x7f7f7f7f: no count, row or pair, and not -1), so the check
      // below sees what this last call wrote, not what an earlier one left
      const MoeSlotSchedule sc = moe_fp8_wgmma_slot_schedule(p);
      CUDA_CHECK(cudaMemset(sc.out, 0x7f, moe_slot_schedule_bytes(p.E, q.rows)));
    }
    moe_experts_cuda(p, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    gpu.push_back(to_host<float>(dout));
  }
  check_slot_schedule(p, q.rows, ids, dgroup, scratch);
  EXPECT_EQ(std::memcmp(gpu[1].data(), gpu[2].data(), gpu[1].size() * 4), 0) << "k split: not deterministic, or its "
                                                                                  "sums were not left zero; seed " << seed;
  std::vector<float> act(size_t(B) * k * inter), twin(size_t(B) * hidden);
  moe_experts_fp8_wgmma_cpu(host_params(p, X, x, ids, tw, act, twin));
  const int sch = hidden / 128, sci = inter / 128;
  double worst_twin[2] = {0, 0}, worst_exact[2] = {0, 0}, worst_rel = 0;
  size_t over_twin = 0, over_exact = 0;
  for (int b = 0; b < B; ++b) {
    std::vector<double> mag(size_t(hidden), 0.0), exact, bound;
    for (int j = 0; j < k; ++j) {
      const int e = ids[size_t(b) * k + j] - begin;
      if (e < 0 || e >= E_local) continue;
      const float* a = act.data() + (size_t(b) * k + j) * inter;
      for (int d = 0; d < hidden; ++d) {
        const size_t row = (size_t(e) * hidden + d) * inter;
        const float* sd = fp8 ? X.sd.data() + (size_t(e) * sch + d / 128) * sci : nullptr;
        double m = 0;
        for (int i = 0; i < inter; ++i) m += std::fabs(decoded_weight(X, X.d, row + i, sd, i) * a[i]);
        mag[size_t(d)] += tw[size_t(b) * k + j] * m;
      }
    }
    mma_bound(X, x, ids, tw, b, k, hidden, inter, begin, E_local, exact, bound, (fp8 ? 0x1p-4 : 0x1p-8) + 1e-4);
    double mx = 0;
    for (double v : exact) mx = std::max(mx, std::fabs(v));
    for (int v = 0; v < 2; ++v)
      for (int d = 0; d < hidden; ++d) {
        const double g = gpu[size_t(v)][size_t(b) * hidden + d];
        const double et = std::fabs(g - twin[size_t(b) * hidden + d]), ee = std::fabs(g - exact[size_t(d)]);
        over_twin += !(et <= 5e-3 * mag[size_t(d)]);
        over_exact += !(ee <= bound[size_t(d)]);
        worst_twin[v] = std::max(worst_twin[v], et / std::max(mag[size_t(d)], 1e-300));
        worst_exact[v] = std::max(worst_exact[v], ee / std::max(bound[size_t(d)], 1e-300));
        worst_rel = std::max(worst_rel, ee / std::max(mx, 1e-30));
      }
  }
  std::printf("moe %s wgmma N=%d B=%d experts [%d, %d) of %d, hidden %d inter %d%s: vs twin max err / M %.3g (k split "
              "%.3g), vs exact max err / bound %.3g (k split %.3g), max err / max|out| %.3g\n",
              fp8 ? "fp8" : "bf16", q.N, B, begin, begin + E_local, E_total, hidden, inter, skew ? " skewed" : "", worst_twin[0], worst_twin[1],
              worst_exact[0], worst_exact[1], worst_rel);
  EXPECT_EQ(over_twin, 0u) << "B=" << B << " seed " << seed;
  EXPECT_EQ(over_exact, 0u) << "B=" << B << " seed " << seed;
  EXPECT_GT(worst_exact[0], 0.0) << "equal to exact arithmetic to the bit: the check cannot fail";
}

TEST(GpuMoeGrouped, Fp8WgmmaMatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_wgmma(5, 32, 0, 32, 1024, 512, false);    // N 8
  check_wgmma(12, 32, 0, 32, 1024, 512, false);   // N 16
  check_wgmma(30, 32, 0, 32, 1024, 512, false);   // N 32
  check_wgmma(100, 32, 0, 32, 1024, 512, false);  // N 64
  check_wgmma(70, 32, 0, 32, 1024, 512, true);    // N 64, 70 pairs per expert: two token tiles
  check_wgmma(9, 32, 0, 32, 256, 128, true);      // k = 2 column blocks (fewer than the ring's stages)
  check_wgmma(20, 64, 16, 16, 1024, 512, false);  // expert parallel: experts [16, 32) of 64
  check_wgmma(4, 8, 0, 8, 6144, 2048, false);     // GLM-5's row lengths
}

// 300 local experts: ~10 per lane of the bucket and schedule scans, the last lanes none (the cases above have <= 32).
// inter 512 as above (S27g ran inter 128: 4 outputs at 5.3e-3 of M against the twin's 5e-3, the kernel within 0.37% of
// its exact-arithmetic bound: with 128 act elements one e4m3 flip weighs more than the tolerance was set for).
TEST(GpuMoeGrouped, Fp8WgmmaManyLocalExperts) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_wgmma(64, 300, 0, 300, 256, 512, false);
}

TEST(GpuMoeGrouped, Bf16WgmmaMatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_wgmma(5, 32, 0, 32, 1024, 512, false, DType::BF16);    // N 8
  check_wgmma(30, 32, 0, 32, 1024, 512, false, DType::BF16);   // N 32
  check_wgmma(100, 32, 0, 32, 1024, 512, false, DType::BF16);  // N 64
  check_wgmma(70, 32, 0, 32, 1024, 512, true, DType::BF16);    // two token tiles per expert
  check_wgmma(9, 32, 0, 32, 256, 128, true, DType::BF16);      // k = 4 / 2 units (fewer than the ring's stages)
  check_wgmma(20, 64, 16, 16, 1024, 512, false, DType::BF16);  // expert parallel
  check_wgmma(12, 8, 0, 8, 6144, 2048, false, DType::BF16);    // GLM-5's row lengths, N 64
}

}  // namespace
}  // namespace glm5
