// FP8 block-scaled weights on the GPU (linear_fp8.cu through linear_cuda, and the MoE experts kernel)
// against their CPU twins, at GLM-5's projection shapes: q_a 6144->2048, kv_a 6144->576, q_b
// 2048->16384, o_proj 16384->6144 (and its --tp 2 column shard), shared-expert gate_up 6144->4096;
// m = 1, 2, 3, 8, 16 (GEMV kernel) and 32 (dequantize + cuBLASLt BF16), with accumulate. Weights are
// random e4m3 codes with random block scales (so a wrong block index shows), x fresh N(0, 1).
// Tolerance: GEMV sums in fp32 with exact weights (rel 1e-5 of sum |x w|); the large-m path rounds
// W and x to bf16 (rel 2e-2 of sum |x w|, bf16's 2^-8 over random-sign sums). These tests pin the
// GEMV / dequant paths (LinearContext::fp8_mma_max_m = 0); the tensor-core path (default for
// 2 <= m <= 64) is tested against its own twin linear_fp8_mma_cpu in the GpuLinearFp8Mma tests below:
// same f16 rounding of x, so only fp32 summation order differs (rel 1e-5 of sum |x w|), and against
// exact arithmetic within the f16 bound 2^-11 (+ 1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernel_test_util.h"
#include "kernels/linear.h"
#include "kernels/linear_fp8.h"
#include "kernels/linear_fp8_tma.h"
#include "kernels/sm90a/linear_fp8_wgmma.h"
#include "kernels/moe.h"
#include "kernels/norm.h"
#include "kernels/rope.h"

namespace glm5 {
namespace {

struct Fp8Weight {
  int n, K;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Buffer dcodes, dscales;
  Fp8Weight(int n_, int K_, uint64_t seed) : n(n_), K(K_), codes(size_t(n_) * K_), scales(size_t((n_ + 127) / 128) * ((K_ + 127) / 128)) {
    for (size_t i = 0; i < codes.size(); i += 8) {
      const uint64_t h = splitmix64(seed * 0x9e3779b9ull + i);
      for (size_t q = 0; q < 8 && i + q < codes.size(); ++q) {
        uint8_t c = uint8_t(h >> (8 * q));
        if ((c & 0x7f) == 0x7f) c = 0x3f;  // no NaN codes
        codes[i + q] = c;
      }
    }
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = (0.5f + rng_uniform(seed, 77, i)) / 448.f / std::sqrt(float(K));
    dcodes = Buffer(Where::Device, codes.size(), "codes");
    dcodes.upload(codes.data(), codes.size());
    dscales = Buffer(Where::Device, scales.size() * 4, "scales");
    dscales.upload(scales.data(), scales.size() * 4);
  }
};

// Max over output rows (all, or 512 spread over n) of |got - exact| / sum |x w| for y = [y0 +] x W[:, c0:c0+k]^T.
double max_rel_err(const Fp8Weight& W, const std::vector<float>& x, int m, int k, int c0, const std::vector<float>* y0,
                   const std::vector<float>& got) {
  const int n = W.n, lds = (W.K + 127) / 128;
  const int step = n > 2048 ? n / 512 : 1;
  double max_rel = 0;
  for (int r = 0; r < n; r += step) {
    for (int i = 0; i < m; ++i) {
      double want = y0 ? (*y0)[size_t(i) * n + r] : 0.0, mag = std::fabs(want);
      const float* srow = W.scales.data() + size_t(r / 128) * lds;
      for (int c = 0; c < k; ++c) {
        const double wv = double(e4m3_bits_to_float(W.codes[size_t(r) * W.K + c0 + c])) * srow[(c0 + c) / 128];
        want += double(x[size_t(i) * k + c]) * wv;
        mag += std::fabs(double(x[size_t(i) * k + c]) * wv);
      }
      max_rel = std::max(max_rel, std::fabs(double(got[size_t(i) * n + r]) - want) / mag);
    }
  }
  return max_rel;
}

// Compares linear_cuda to linear_cpu on columns [c0, c0 + k) of W (k = K - c0 when 0).
void check(LinearContext& ctx, const Fp8Weight& W, int m, bool accumulate, int c0 = 0, int k = 0) {
  if (k == 0) k = W.K - c0;
  const int n = W.n, lds = (W.K + 127) / 128;
  std::vector<float> x(size_t(m) * k), y0(size_t(m) * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(21, m * 7 + k, i);
  for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(22, m * 5 + n, i);
  Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, y0.size() * 4, "y");
  dx.upload(x.data(), dx.bytes());
  dy.upload(y0.data(), dy.bytes());
  LinearParams dp{dx.as<float>(), W.dcodes.as<uint8_t>() + c0, DType::F8_E4M3, dy.as<float>(), m, n, k, accumulate, false};
  dp.ldw = W.K;
  dp.w_scale = W.dscales.as<float>() + c0 / 128;
  dp.ld_scale = lds;
  linear_cuda(dp, ctx, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got(y0.size());
  dy.download(got.data(), dy.bytes());
  const double max_rel = max_rel_err(W, x, m, k, c0, accumulate ? &y0 : nullptr, got);
  const bool gemv = m <= ctx.fp8_gemv_max_m;
  std::printf("fp8 linear n=%d k=%d (c0=%d) m=%d acc=%d %s: max rel err %.3g\n", n, k, c0, m, int(accumulate),
              gemv ? "gemv" : "dequant+cuBLASLt", max_rel);
  EXPECT_LT(max_rel, gemv ? 1e-5 : 2e-2) << "n=" << n << " k=" << k << " m=" << m;
}

// The large-m path's weight dequantization (fp8_block_dequant_bf16_cuda): every BF16 value is bf16_rn(e4m3 * scale),
// bit for bit, in the 16-code vector form (k % 16 == 0, aligned rows; also a column slice of a wider weight, as
// --tp's row-parallel shards pass it) and the scalar form (k = 40).
TEST(GpuLinearFp8, BlockDequantIsExactBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    int n, K, k, c0;
  };
  for (const Case cs : {Case{300, 512, 512, 0}, Case{256, 1024, 256, 256}, Case{130, 40, 40, 0}}) {
    Fp8Weight W(cs.n, cs.K, 31 + cs.k);
    LinearParams p{nullptr, W.dcodes.as<uint8_t>() + cs.c0, DType::F8_E4M3, nullptr, 1, cs.n, cs.k, false, false};
    p.w_scale = W.dscales.as<float>() + cs.c0 / 128;
    p.ldw = cs.K;
    p.ld_scale = (cs.K + 127) / 128;
    Buffer out(Where::Device, size_t(cs.n) * cs.k * 2, "bf16");
    CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));
    fp8_block_dequant_bf16_cuda(p, out.as<uint16_t>(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> got(size_t(cs.n) * cs.k);
    out.download(got.data(), out.bytes());
    int bad = 0;
    for (int r = 0; r < cs.n; ++r)
      for (int c = 0; c < cs.k; ++c) {
        const int col = cs.c0 + c;
        const float want = e4m3_bits_to_float(W.codes[size_t(r) * cs.K + col]) *
                           W.scales[size_t(r / 128) * p.ld_scale + col / 128];
        bad += got[size_t(r) * cs.k + c] != float_to_bf16_bits(want);
      }
    EXPECT_EQ(bad, 0) << "n " << cs.n << " k " << cs.k << " slice at " << cs.c0;
  }
}

TEST(GpuLinearFp8, Glm5ShapesMatchCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;
  ctx.fp8_mma_max_m = 0;  // GEMV / dequant paths
  Fp8Weight q_a(2048, 6144, 1), kv_a(576, 6144, 2), q_b(16384, 2048, 3), o_proj(6144, 16384, 4), gate_up(4096, 6144, 5);
  for (int m : {1, 2, 3, 8, 16, 32}) {
    check(ctx, q_a, m, false);
    check(ctx, kv_a, m, false);
    check(ctx, o_proj, m, true);
  }
  check(ctx, q_b, 1, false);
  check(ctx, gate_up, 5, false);
  check(ctx, o_proj, 3, true, 8192, 8192);  // --tp 2 rank 1 column shard
}

// Projections of one x in one launch (linear_group_cuda): GLM-5's q_a, kv_a and indexer wk (2048 + 576
// + 128 rows of 6144) and q_b + indexer wq_b (16384 + 4096 rows of 2048); every row within the GEMV's
// bound. Fused where the GEMV would run each alone (m = 1 by default; up to 16 with the tensor-core
// path off), per projection otherwise.
TEST(GpuLinearFp8, GroupOfProjectionsMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  Fp8Weight q_a(2048, 6144, 31), kv_a(576, 6144, 32), wk(128, 6144, 33), q_b(16384, 2048, 34), wq_b(4096, 2048, 35);
  const std::vector<std::vector<const Fp8Weight*>> groups = {{&q_a, &kv_a, &wk}, {&q_b, &wq_b}, {&kv_a, &wk}};
  for (int mma_max : {64, 0})
    for (int m : {1, 2, 5}) {
      LinearContext ctx;
      ctx.fp8_mma_max_m = mma_max;
      for (const auto& ws : groups) {
        const int k = ws[0]->K;
        std::vector<float> x(size_t(m) * k);
        for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(41, m * 3 + k, i);
        Buffer dx(Where::Device, x.size() * 4, "x");
        dx.upload(x.data(), dx.bytes());
        LinearGroupParams g;
        g.count = int(ws.size());
        std::vector<Buffer> ys;
        for (int s = 0; s < g.count; ++s) {
          ys.emplace_back(Where::Device, size_t(m) * ws[s]->n * 4, "y");
          CUDA_CHECK(cudaMemset(ys.back().data(), 0xff, ys.back().bytes()));  // NaN: unwritten rows fail
          g.p[s] = LinearParams{dx.as<float>(), ws[s]->dcodes.data(), DType::F8_E4M3, ys.back().as<float>(), m, ws[s]->n, k,
                                false, false};
          g.p[s].w_scale = ws[s]->dscales.as<float>();
        }
        const bool fused = linear_group_fused(g, ctx);
        EXPECT_EQ(fused, m == 1 || mma_max == 0) << "m=" << m;
        linear_group_cuda(g, ctx, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        for (int s = 0; s < g.count; ++s) {
          std::vector<float> got(size_t(m) * ws[s]->n);
          ys[s].download(got.data(), ys[s].bytes());
          const double e = max_rel_err(*ws[s], x, m, k, 0, nullptr, got);
          std::printf("fp8 group of %d (%s) m=%d projection %d n=%d k=%d: max rel err %.3g\n", g.count,
                      fused ? "one launch" : "per projection", m, s, ws[s]->n, k, e);
          EXPECT_LT(e, fused || mma_max == 0 ? 1e-5 : 2e-3) << "m=" << m << " projection " << s;
        }
      }
    }
  // Not groupable: different x.
  LinearGroupParams bad;
  bad.count = 2;
  Buffer x1(Where::Device, 6144 * 4, "x1"), x2(Where::Device, 6144 * 4, "x2"), y(Where::Device, 2048 * 4, "y");
  bad.p[0] = LinearParams{x1.as<float>(), q_a.dcodes.data(), DType::F8_E4M3, y.as<float>(), 1, 2048, 6144, false, false};
  bad.p[0].w_scale = q_a.dscales.as<float>();
  bad.p[1] = bad.p[0];
  bad.p[1].x = x2.as<float>();
  EXPECT_FALSE(linear_fp8_gemv_group_supported(bad));
  EXPECT_THROW(linear_fp8_gemv_group_cuda(bad, nullptr, 0, nullptr), Error);
}

// LinearContext::fp8_gemv_l2_lookahead on single projections (GLM-5's attn.o_proj 6144 x 16384, split over k, and
// a k-slice of a wider weight, 1002 rows (n % 4 = 2: a warp's last rows past n) by 5632 columns from column 512,
// splits of 1.5 steps: prefetches of a 512-column tail): bitwise the GEMV without it, m = 1 and 2; a lookahead
// outside 0..8 is refused. A prefetch is a hint: an address outside the weights would not change a bit, so the
// addresses are checked by review and by running this test under compute-sanitizer (tools/device_sanitize.sh).
TEST(GpuLinearFp8, GemvL2LookaheadChangesNoBit) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = fresh_seed();
  Fp8Weight o_proj(6144, 16384, seed), slice(1002, 8192, seed + 1);
  for (const Fp8Weight* W : {&o_proj, &slice})
    for (int m : {1, 2}) {
      const int c0 = W == &slice ? 512 : 0, k = W == &slice ? 5632 : W->K, n = W->n;
      std::vector<float> x(size_t(m) * k);
      for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 81, i);
      Buffer dx = to_device(x, "x"), dy(Where::Device, size_t(m) * n * 4, "y");
      LinearParams dp{dx.as<float>(), W->dcodes.as<uint8_t>() + c0, DType::F8_E4M3, dy.as<float>(), m, n, k, false, false};
      dp.ldw = W->K;
      dp.w_scale = W->dscales.as<float>() + c0 / 128;
      dp.ld_scale = (W->K + 127) / 128;
      std::vector<float> base;
      for (int la : {0, 1, 3, 8}) {
        LinearContext ctx;
        ctx.fp8_mma_max_m = 0;  // m = 2 on the GEMV too
        ctx.fp8_gemv_l2_lookahead = la;
        CUDA_CHECK(cudaMemset(dy.data(), 0xff, dy.bytes()));
        linear_cuda(dp, ctx, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got = to_host<float>(dy, size_t(m) * n);
        if (la == 0) {
          base = got;
          const double e = max_rel_err(*W, x, m, k, c0, nullptr, got);
          EXPECT_LT(e, 1e-5) << "n=" << n << " m=" << m;
        } else {
          EXPECT_EQ(std::memcmp(got.data(), base.data(), got.size() * 4), 0) << "n=" << n << " m=" << m << " la=" << la;
        }
      }
      EXPECT_THROW(linear_fp8_gemv_cuda(dp, nullptr, 0, nullptr, nullptr, 0, 9), Error);
    }
}

// LinearGroupParams::norm on the FP8 GEMV (linear_group_norm_fused): the RMSNorm of x folded into the projections,
// against RMSNorm then the product in double (rel 1e-5 of sum |xn w|, the GEMV's bound) and against the separate
// rmsnorm_cuda + the group without the norm (the same within fp32 order). Groups that split k (q_a + kv_a + wk, and kv_a
// alone at k 6144: the last CTA of each tile applies inv_rms from the splits' sums of squares) and that do not (q_b +
// wq_b at k 2048); m = 1, 2 (MT 1 / 2 instances; tensor-core path off for m > 1), tokens of different scales,
// run twice (the tile counters are reset: the second call's bits equal the first's). A group the GEMV does not run
// (the tensor-core range, a misaligned norm weight) is not fusable and linear_group_cuda throws for it.
TEST(GpuLinearFp8, GroupWithInputNormMatchesNormThenProduct) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  Fp8Weight q_a(2048, 6144, 51), kv_a(576, 6144, 52), wk(128, 6144, 53), q_b(16384, 2048, 54), wq_b(4096, 2048, 55);
  const std::vector<std::vector<const Fp8Weight*>> groups = {{&q_a, &kv_a, &wk}, {&q_b, &wq_b}, {&kv_a}};
  const uint64_t seed = fresh_seed();
  for (int m : {1, 2}) {
    LinearContext ctx;
    ctx.fp8_mma_max_m = m == 1 ? 64 : 0;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const auto& ws = groups[gi];
      const int k = ws[0]->K;
      std::vector<float> x(size_t(m) * k), nw(k), xn(size_t(m) * k);
      for (int t = 0; t < m; ++t)
        for (int c = 0; c < k; ++c) x[size_t(t) * k + c] = rng_normal(seed, 61 + t, c) * float(1 + 2 * t);
      for (int c = 0; c < k; ++c) nw[c] = 0.5f + rng_uniform(seed, 62, c);
      const float eps = 1e-6f;
      for (int t = 0; t < m; ++t) {
        double ss = 0;
        for (int c = 0; c < k; ++c) ss += double(x[size_t(t) * k + c]) * x[size_t(t) * k + c];
        const double inv = 1.0 / std::sqrt(ss / k + eps);
        for (int c = 0; c < k; ++c) xn[size_t(t) * k + c] = float(double(nw[c]) * x[size_t(t) * k + c] * inv);
      }
      Buffer dx(Where::Device, x.size() * 4, "x"), dnw(Where::Device, nw.size() * 4, "norm weight"),
          dxn(Where::Device, x.size() * 4, "xn");
      dx.upload(x.data(), dx.bytes());
      dnw.upload(nw.data(), dnw.bytes());
      LinearGroupParams g;
      g.count = int(ws.size());
      std::vector<Buffer> ys, refs;
      for (int s = 0; s < g.count; ++s) {
        ys.emplace_back(Where::Device, size_t(m) * ws[s]->n * 4, "y");
        refs.emplace_back(Where::Device, size_t(m) * ws[s]->n * 4, "y ref");
        CUDA_CHECK(cudaMemset(ys.back().data(), 0xff, ys.back().bytes()));  // NaN: unwritten rows fail
        g.p[s] = LinearParams{dx.as<float>(), ws[s]->dcodes.data(), DType::F8_E4M3, ys.back().as<float>(), m, ws[s]->n, k,
                              false, false};
        g.p[s].w_scale = ws[s]->dscales.as<float>();
      }
      g.norm = {dnw.as<float>(), eps};
      ASSERT_TRUE(linear_group_norm_fused(g, ctx)) << "m=" << m << " group " << gi;
      linear_group_cuda(g, ctx, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<std::vector<float>> first;
      for (int s = 0; s < g.count; ++s) {
        first.emplace_back(size_t(m) * ws[s]->n);
        ys[s].download(first.back().data(), ys[s].bytes());
      }
      linear_group_cuda(g, ctx, nullptr);  // again: same bits (counters back at zero, deterministic split order)
      // LinearContext::fp8_gemv_l2_lookahead (L2 prefetch requests ahead of the loads): the same bits.
      for (int la : {1, 8}) {
        ctx.fp8_gemv_l2_lookahead = la;
        linear_group_cuda(g, ctx, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        for (int s = 0; s < g.count; ++s) {
          std::vector<float> got(size_t(m) * ws[s]->n);
          ys[s].download(got.data(), ys[s].bytes());
          EXPECT_EQ(std::memcmp(got.data(), first[s].data(), got.size() * 4), 0)
              << "l2_lookahead " << la << " m=" << m << " group " << gi << " projection " << s;
        }
      }
      ctx.fp8_gemv_l2_lookahead = 0;
      // The unfused form: rmsnorm_cuda into xn, then the group on xn.
      rmsnorm_cuda(NormParams{dx.as<float>(), dnw.as<float>(), nullptr, dxn.as<float>(), m, k, k, k, eps}, nullptr);
      LinearGroupParams u = g;
      u.norm = {};
      for (int s = 0; s < g.count; ++s) u.p[s].x = dxn.as<float>(), u.p[s].y = refs[s].as<float>();
      linear_group_cuda(u, ctx, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      for (int s = 0; s < g.count; ++s) {
        std::vector<float> got(size_t(m) * ws[s]->n), ref(got.size());
        ys[s].download(got.data(), ys[s].bytes());
        refs[s].download(ref.data(), refs[s].bytes());
        EXPECT_EQ(std::memcmp(got.data(), first[s].data(), got.size() * 4), 0) << "m=" << m << " group " << gi;
        const double e = max_rel_err(*ws[s], xn, m, k, 0, nullptr, got);
        const double e_ref = max_rel_err(*ws[s], xn, m, k, 0, nullptr, ref);
        double max_diff = 0, max_ref = 0;
        for (size_t i = 0; i < got.size(); ++i)
          max_diff = std::max(max_diff, double(std::fabs(got[i] - ref[i]))), max_ref = std::max(max_ref, double(std::fabs(ref[i])));
        std::printf("fp8 group + input norm m=%d group %zu projection %d n=%d k=%d: max rel err %.3g (separate norm %.3g), "
                    "max |fused - separate| %.3g of max |y| %.3g\n", m, gi, s, ws[s]->n, k, e, e_ref, max_diff, max_ref);
        EXPECT_LT(e, 1e-5) << "m=" << m << " group " << gi << " projection " << s;
        EXPECT_LT(max_diff, 1e-4 * max_ref) << "m=" << m << " group " << gi << " projection " << s;
        EXPECT_GT(max_ref, 0.0);
      }
      if (gi == 0 && m == 1) {  // GLM-5's qkv_a group at batch 1 splits k: the norm's split path ran
        EXPECT_GT(linear_fp8_gemv_group_partial(g), size_t(m) * (2048 + 576 + 128));
      }
      // Not fusable: a misaligned norm weight; the tensor-core range (m >= 2 with it on).
      LinearGroupParams bad = g;
      bad.norm.weight = dnw.as<float>() + 1;
      EXPECT_FALSE(linear_group_norm_fused(bad, ctx));
      EXPECT_THROW(linear_group_cuda(bad, ctx, nullptr), Error);
      if (m > 1) {
        LinearContext mma_ctx;
        EXPECT_FALSE(linear_group_norm_fused(g, mma_ctx));
        EXPECT_THROW(linear_group_cuda(g, mma_ctx, nullptr), Error);
      }
      // m = 8 (the MT 8 instance) would stage 8 x k floats: beyond 48 KiB at k 2048 and 6144, so not fusable.
      LinearGroupParams wide = g;
      for (int s = 0; s < wide.count; ++s) wide.p[s].m = 8;
      EXPECT_FALSE(linear_group_norm_fused(wide, ctx));
    }
  }
}

// LinearGroupParams::rope on the FP8 GEMV (GLM-5's attn.q_up_proj at batch 1: q_b's 64 heads of 256 with the rope
// in columns 192..255, the indexer's wq_b 32 heads of 128 with it in columns 0..63, interleaved), with and without
// the folded input norm, m = 1 and 2 (two tokens at different positions, up to 2^17): bitwise the same group without
// the rope followed by rope_cuda on each output. A rope that cannot fold (not interleaved, an odd offset, y not its
// x) is rejected naming the field.
TEST(GpuLinearFp8, GroupWithOutputRopeIsGemvThenRopeBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  Fp8Weight q_b(16384, 2048, 71), wq_b(4096, 2048, 72);
  const uint64_t seed = fresh_seed();
  const int k = 2048, R = 64;
  std::vector<float> inv_freq(R / 2), nw(k);
  for (int i = 0; i < R / 2; ++i) inv_freq[i] = float(std::pow(1e6, -2.0 * i / R));
  for (int c = 0; c < k; ++c) nw[c] = 0.5f + rng_uniform(seed, 73, c);
  Buffer dfreq(Where::Device, inv_freq.size() * 4, "inv_freq"), dnw(Where::Device, nw.size() * 4, "norm weight");
  dfreq.upload(inv_freq.data(), dfreq.bytes());
  dnw.upload(nw.data(), dnw.bytes());
  for (int m : {1, 2})
    for (bool norm : {false, true}) {
      LinearContext ctx;
      ctx.fp8_mma_max_m = m == 1 ? 64 : 0;
      std::vector<float> x(size_t(m) * k);
      for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 74 + m, i);
      std::vector<int32_t> pos(m);
      for (int t = 0; t < m; ++t) pos[t] = int32_t(splitmix64(seed + t) % 131072);
      Buffer dx(Where::Device, x.size() * 4, "x"), dpos(Where::Device, pos.size() * 4, "positions");
      dx.upload(x.data(), dx.bytes());
      dpos.upload(pos.data(), dpos.bytes());
      const Fp8Weight* ws[2] = {&q_b, &wq_b};
      const int heads[2] = {64, 32}, head_dim[2] = {256, 128}, offset[2] = {192, 0};
      LinearGroupParams g;
      g.count = 2;
      std::vector<Buffer> ys, refs;
      for (int s = 0; s < 2; ++s) {
        ys.emplace_back(Where::Device, size_t(m) * ws[s]->n * 4, "y");
        refs.emplace_back(Where::Device, size_t(m) * ws[s]->n * 4, "y ref");
        g.p[s] = LinearParams{dx.as<float>(), ws[s]->dcodes.data(), DType::F8_E4M3, ys[s].as<float>(), m, ws[s]->n, k,
                              false, false};
        g.p[s].w_scale = ws[s]->dscales.as<float>();
        g.rope[s] = RopeParams{ys[s].as<float>(), dpos.as<int32_t>(), dfreq.as<float>(), m, heads[s],
                               heads[s] * head_dim[s], head_dim[s], offset[s], R, true, 1.f};
      }
      if (norm) g.norm = {dnw.as<float>(), 1e-6f};
      ASSERT_TRUE(linear_group_gemv(g, ctx)) << "m=" << m;
      linear_group_cuda(g, ctx, nullptr);
      LinearGroupParams u = g;  // the reference: the same GEMV without the rope, then the rope kernel
      for (int s = 0; s < 2; ++s) {
        u.p[s].y = refs[s].as<float>();
        u.rope[s] = {};
      }
      linear_group_cuda(u, ctx, nullptr);
      for (int s = 0; s < 2; ++s) {
        RopeParams r = g.rope[s];
        r.x = refs[s].as<float>();
        rope_cuda(r, nullptr);
      }
      CUDA_CHECK(cudaDeviceSynchronize());
      for (int s = 0; s < 2; ++s) {
        std::vector<float> got(size_t(m) * ws[s]->n), ref(got.size());
        ys[s].download(got.data(), ys[s].bytes());
        refs[s].download(ref.data(), refs[s].bytes());
        size_t differ = 0, rotated = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &ref[i], 4) != 0;
        for (int t = 0; t < m; ++t)  // the rope columns moved (a rope that did nothing would pass the bitwise check)
          for (int h = 0; h < heads[s]; ++h)
            for (int d = offset[s]; d < offset[s] + R; ++d) rotated += got[size_t(t) * ws[s]->n + h * head_dim[s] + d] != 0.f;
        std::printf("fp8 group + output rope m=%d norm=%d projection %d: %zu of %zu outputs differ from GEMV then rope_cuda\n",
                    m, int(norm), s, differ, got.size());
        EXPECT_EQ(differ, 0u) << "m=" << m << " norm=" << norm << " projection " << s;
        EXPECT_GT(rotated, size_t(m) * heads[s] * R / 2);
      }
      // Not foldable: a rope that is not interleaved, an odd offset, x not the projection's output.
      for (int bad = 0; bad < 3; ++bad) {
        LinearGroupParams b = g;
        if (bad == 0) b.rope[0].interleave = false;
        if (bad == 1) b.rope[0].offset = 191;
        if (bad == 2) b.rope[1].x = refs[1].as<float>();
        EXPECT_THROW(linear_group_cuda(b, ctx, nullptr), Error) << "case " << bad;
      }
    }
}

// cuBLASLt's block-scaled FP8 GEMM (opt-in: LinearContext::Fp8LargeM::BlockScaled) for m > 16: x is
// quantized to e4m3 per token and 128 columns, so the bound is FP8's (rel 4e-2 of sum |x w|). Both orders
// of x's VEC128 scales are tried; the one cuBLASLt means matches, the other does not (printed: the
// default is set from this run).
TEST(GpuLinearFp8, BlockScaledCublasLtMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  Fp8Weight q_a(2048, 6144, 21), o_proj(6144, 16384, 22);
  for (const Fp8Weight* W : {&q_a, &o_proj}) {
    for (int m : {32, 64}) {
      double best = 1e30;
      for (bool tokens_fastest : {true, false}) {
        LinearContext ctx;
        ctx.fp8_mma_max_m = 0;
        ctx.fp8_large_m = LinearContext::Fp8LargeM::BlockScaled;
        ctx.act_scale_tokens_fastest = tokens_fastest;
        const int n = W->n, k = W->K;
        std::vector<float> x(size_t(m) * k), got(size_t(m) * n);
        for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(23, m + k, i);
        Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, got.size() * 4, "y");
        dx.upload(x.data(), dx.bytes());
        LinearParams dp{dx.as<float>(), W->dcodes.data(), DType::F8_E4M3, dy.as<float>(), m, n, k, false, false};
        dp.w_scale = W->dscales.as<float>();
        linear_cuda(dp, ctx, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        dy.download(got.data(), dy.bytes());
        double max_rel = 0;
        const int lds = (k + 127) / 128;
        for (int r = 0; r < n; r += n / 256) {
          for (int i = 0; i < m; i += 7) {
            double want = 0, mag = 0;
            for (int c = 0; c < k; ++c) {
              const double wv = double(e4m3_bits_to_float(W->codes[size_t(r) * k + c])) * W->scales[size_t(r / 128) * lds + c / 128];
              want += double(x[size_t(i) * k + c]) * wv;
              mag += std::fabs(double(x[size_t(i) * k + c]) * wv);
            }
            max_rel = std::max(max_rel, std::fabs(double(got[size_t(i) * n + r]) - want) / mag);
          }
        }
        std::printf("fp8 block-scaled cuBLASLt n=%d k=%d m=%d scales %s: %s, max rel err %.3g\n", n, k, m,
                    tokens_fastest ? "[k/128][m]" : "[m][k/128]",
                    ctx.fp8_block_scaled_calls ? "cuBLASLt block-scaled" : "NO ALGORITHM (dequant fallback)", max_rel);
        best = std::min(best, max_rel);
      }
      EXPECT_LT(best, 4e-2) << "n=" << W->n << " m=" << m;
    }
  }
}

// The block-scaled FP8 tensor-core GEMM (LinearContext::Fp8LargeM::Wgmma, kernels/sm90a/linear_fp8_wgmma.h) through
// linear_cuda, against its CPU twin (the same quantized x: bound 5e-4 of sum |x_q w s|, the tensor core's per-block
// accumulation and the fp32 promotion order) and against exact arithmetic on the unquantized x (x's e4m3 rounding:
// 4e-2 of sum |x w|, the BlockScaled bound). Token tiles of 8 / 16 / 32 / 64 / 128 and past 128, stream-K and
// split-K, n not a multiple of 128, y accumulated, a column shard (ldw > k), GLM-5's o_proj at batch 128 (the twin
// on two row blocks), and the default run twice: the counters reset, so the second run is bitwise the first. Each
// case also runs split-K where the default is stream-K, and past 64 tokens tiles of 64 (fp8_wgmma_max_n). The cases
// must reach (on this GPU's SM count) several segments per tile and one, in both cuts, the partial sum's scalar form
// (n % 4 != 0; also at N = 8, its passes of 4) and a ring of stages that wraps at N = 32.
TEST(GpuLinearFp8, WgmmaMatchesCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  {
    Fp8Weight probe_w(128, 128, 1);
    LinearParams probe{nullptr, probe_w.dcodes.data(), DType::F8_E4M3, nullptr, 1, 128, 128, false, false};
    probe.w_scale = probe_w.dscales.as<float>();
    const std::string why = linear_fp8_wgmma_unsupported(probe);
    if (!why.empty()) GTEST_SKIP() << "the FP8 tensor-core GEMM needs " << why;
  }
  const uint64_t seed = fresh_seed();
  struct Case {
    int n, K, k, c0, m;
    bool accumulate;
  };
  const Case cases[] = {{300, 1024, 1024, 0, 1, false},   {300, 1024, 1024, 0, 7, true},
                        {300, 1024, 1024, 0, 33, false},  {576, 6144, 6144, 0, 64, true},
                        {576, 6144, 6144, 0, 65, false},  {2048, 2048, 2048, 0, 128, false},
                        {256, 2048, 1024, 1024, 130, true}, {6144, 16384, 16384, 0, 128, true},
                        {302, 1024, 1024, 0, 33, true},   {9000, 512, 512, 0, 128, false},
                        {6144, 6144, 6144, 0, 20, false}, {2048, 2048, 2048, 0, 12, true},
                        {6144, 16384, 16384, 0, 8, false}, {302, 2048, 2048, 0, 16, false},
                        {302, 2048, 2048, 0, 5, true}};
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  bool seen_split = false, seen_single = false, seen_n_odd_split = false, seen_ring_wrap_32 = false;
  bool seen_stream_k_segments = false, seen_split_k_segments = false, seen_n8 = false, seen_n16 = false;
  bool seen_n8_odd_split = false;
  for (const Case& cs : cases) {
    Fp8Weight W(cs.n, cs.K, seed % 100000 + cs.n + cs.m);
    const int n = cs.n, k = cs.k, m = cs.m, lds = (cs.K + 127) / 128;
    std::vector<float> x(size_t(m) * k), y0(size_t(m) * n);
    for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 3 + m, i) * (1.f + 3.f * float((i / 128) % 3));
    for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(seed, 5 + n, i);
    Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, y0.size() * 4, "y");
    dx.upload(x.data(), dx.bytes());
    LinearParams dp{dx.as<float>(), W.dcodes.as<uint8_t>() + cs.c0, DType::F8_E4M3, dy.as<float>(), m, n, k,
                    cs.accumulate, false};
    dp.ldw = cs.K;
    dp.w_scale = W.dscales.as<float>() + cs.c0 / 128;
    dp.ld_scale = lds;
    LinearContext ctx;
    ctx.fp8_mma_max_m = 0;
    ctx.fp8_gemv_max_m = 0;
    ctx.fp8_large_m = LinearContext::Fp8LargeM::Wgmma;
    // Runs: the default twice (bitwise), split-K where the default is stream-K, tiles of 64 past 64 tokens.
    struct Run {
      bool stream_k;
      int max_n;
    };
    std::vector<Run> runs = {{true, 128}, {true, 128}};
    const Fp8WgmmaPlan q = linear_fp8_wgmma_plan(dp, sms);
    if (q.stream_k) runs.push_back({false, 128});
    if (m > 64) runs.push_back({true, 64});
    for (const Run& r : runs) {  // which of the kernel's paths this case takes (the plan depends on the SM count)
      const Fp8WgmmaPlan qr = linear_fp8_wgmma_plan(dp, sms, r.max_n, r.stream_k);
      seen_split |= qr.segments > 1;
      seen_single |= qr.segments == 1;
      seen_n_odd_split |= qr.segments > 1 && n % 4 != 0;
      seen_n8_odd_split |= qr.segments > 1 && n % 4 != 0 && qr.N == 8;
      seen_ring_wrap_32 |= qr.N == 32 && qr.max_units > 8;
      seen_stream_k_segments |= qr.stream_k && qr.segments > 1;
      seen_split_k_segments |= !qr.stream_k && qr.segments > 1;
      seen_n8 |= qr.N == 8;
      seen_n16 |= qr.N == 16;
    }
    std::vector<std::vector<float>> got(runs.size());
    for (size_t run = 0; run < runs.size(); ++run) {
      ctx.fp8_wgmma_stream_k = runs[run].stream_k;
      ctx.fp8_wgmma_max_n = runs[run].max_n;
      dy.upload(y0.data(), dy.bytes());
      linear_cuda(dp, ctx, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      got[run].resize(y0.size());
      dy.download(got[run].data(), dy.bytes());
    }
    ASSERT_EQ(ctx.fp8_wgmma_calls, long(runs.size())) << "n=" << n << " m=" << m << ": the Wgmma path did not run";
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4), 0) << "n=" << n << " m=" << m;
    // The twin on all rows, or on the first and last 128-row blocks of a large weight.
    const int blocks = (n + 127) / 128;
    double max_twin = 0;
    for (int rb = 0; rb < blocks; ++rb) {
      if (n > 2048 && rb != 0 && rb != blocks - 1) continue;
      const int r0 = 128 * rb, rows = std::min(128, n - r0);
      std::vector<float> ref(size_t(m) * rows);
      for (int t = 0; t < m; ++t)
        for (int r = 0; r < rows; ++r) ref[size_t(t) * rows + r] = y0[size_t(t) * n + r0 + r];
      LinearParams hp{x.data(), W.codes.data() + size_t(r0) * cs.K + cs.c0, DType::F8_E4M3, ref.data(), m, rows, k,
                      cs.accumulate, false};
      hp.ldw = cs.K;
      hp.w_scale = W.scales.data() + size_t(rb) * lds + cs.c0 / 128;
      hp.ld_scale = lds;
      linear_fp8_wgmma_cpu(hp);
      for (int t = 0; t < m; ++t)
        for (int r = 0; r < rows; ++r) {
          double mag = cs.accumulate ? std::fabs(double(y0[size_t(t) * n + r0 + r])) : 0.0;
          const float* srow = W.scales.data() + size_t(rb) * lds;
          for (int c = 0; c < k; ++c)
            mag += std::fabs(double(x[size_t(t) * k + c]) *
                             double(e4m3_bits_to_float(W.codes[size_t(r0 + r) * cs.K + cs.c0 + c])) * srow[(cs.c0 + c) / 128]);
          for (const std::vector<float>& g : got)  // every run: the default, split-K, tiles of 64
            max_twin = std::max(max_twin, std::fabs(double(g[size_t(t) * n + r0 + r]) - ref[size_t(t) * rows + r]) /
                                              std::max(mag, 1e-30));
        }
    }
    const double max_exact = max_rel_err(W, x, m, k, cs.c0, cs.accumulate ? &y0 : nullptr, got[0]);
    std::printf("fp8 wgmma n=%d k=%d (c0=%d) m=%d acc=%d: vs twin %.3g, vs exact %.3g (seed %llu)\n", n, k, cs.c0, m,
                int(cs.accumulate), max_twin, max_exact, (unsigned long long)seed);
    EXPECT_LT(max_twin, 5e-4) << "n=" << n << " k=" << k << " m=" << m << " seed " << seed;
    EXPECT_LT(max_exact, 4e-2) << "n=" << n << " k=" << k << " m=" << m << " seed " << seed;
  }
  // The cases reach several segments per tile (stream-K and split-K) and one, the partial sum's scalar form
  // (n % 4 != 0), a ring that wraps at N = 32, and token tiles of 8 and 16.
  EXPECT_TRUE(seen_split && seen_single && seen_n_odd_split && seen_ring_wrap_32 && seen_stream_k_segments &&
              seen_split_k_segments && seen_n8 && seen_n16 && seen_n8_odd_split)
      << "split " << seen_split << " single " << seen_single << " n % 4 split " << seen_n_odd_split << " N 32 wrap "
      << seen_ring_wrap_32 << " stream-K segments " << seen_stream_k_segments << " split-K segments "
      << seen_split_k_segments << " N 8 " << seen_n8 << " N 16 " << seen_n16 << " N 8 n % 4 split "
      << seen_n8_odd_split << " on " << sms << " SMs";
}

TEST(GpuLinearFp8, OddShapesUseScalarPathAndAgree) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;
  ctx.fp8_mma_max_m = 0;
  Fp8Weight w(300, 520, 6), v(130, 72, 7);
  for (int m : {1, 4, 17}) {
    check(ctx, w, m, m == 4);
    check(ctx, v, m, false);
  }
}

TEST(GpuLinearFp8, CpuTwinAgreesWithGpuOnLoadedLayout) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  // linear_cpu's FP8 branch on the same params equals the GPU (the engine's CPU/GPU parity relies on it).
  LinearContext ctx;
  ctx.fp8_mma_max_m = 0;  // the GEMV; the tensor-core path's twin is linear_fp8_mma_cpu (tests below)
  Fp8Weight w(256, 384, 8);
  const int m = 2, n = 256, k = 384;
  std::vector<float> x(size_t(m) * k), y(size_t(m) * n), got(y.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(5, 5, i);
  LinearParams hp{x.data(), w.codes.data(), DType::F8_E4M3, y.data(), m, n, k, false, false};
  hp.w_scale = w.scales.data();
  linear_cpu(hp);
  Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, y.size() * 4, "y");
  dx.upload(x.data(), dx.bytes());
  LinearParams dp = hp;
  dp.x = dx.as<float>();
  dp.w = w.dcodes.data();
  dp.w_scale = w.dscales.as<float>();
  dp.y = dy.as<float>();
  linear_cuda(dp, ctx, nullptr);
  dy.download(got.data(), dy.bytes());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(got[i], y[i], 1e-4 * (1 + std::fabs(y[i])));
}

// ---- Tensor-core path: linear_fp8_mma_cuda against linear_fp8_mma_cpu ----
// Sampled rows (all when n <= 256) are recomputed by the twin one row at a time (n = 1 with the row's
// codes and its block-scale row), so a 16384-column o_proj costs O(rows * m * k) on the CPU.
// err_twin: |gpu - twin| / sum |x w| (fp32 summation order only: < 1e-5); err_exact: against the double
// dequantized product (f16 rounding of x: <= 2^-11 + 1e-5).
struct MmaErr {
  double twin = 0, exact = 0;
};

MmaErr check_mma(const Fp8Weight& W, int m, bool accumulate, int mt, bool direct, LinearContext* ctx, int c0 = 0,
                 int k = 0, float x_mag_spread = 0.f, bool pf = false) {
  if (k == 0) k = W.K - c0;
  const int n = W.n, lds = (W.K + 127) / 128;
  std::vector<float> x(size_t(m) * k), y0(size_t(m) * n);
  const uint64_t salt = fresh_seed();  // fresh inputs every run (printed on failure)
  for (size_t i = 0; i < x.size(); ++i) {
    // Optional per-(token, 128-block) magnitudes 2^[-s, s]: exercises the per-block power-of-two scales.
    const size_t tok = i / size_t(k), blk = (i % size_t(k)) / 128;
    const float mag = x_mag_spread > 0 ? std::exp2((rng_uniform(salt, 3, tok * 4096 + blk) * 2.f - 1.f) * x_mag_spread) : 1.f;
    x[i] = rng_normal(salt, 1, i) * mag;
  }
  for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(salt, 2, i);
  Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, y0.size() * 4, "y");
  dx.upload(x.data(), dx.bytes());
  dy.upload(y0.data(), dy.bytes());
  LinearParams dp{dx.as<float>(), W.dcodes.as<uint8_t>() + c0, DType::F8_E4M3, dy.as<float>(), m, n, k, accumulate, false};
  dp.ldw = W.K;
  dp.w_scale = W.dscales.as<float>() + c0 / 128;
  dp.ld_scale = lds;
  if (direct) {
    const size_t elems = size_t(linear_fp8_mma_splits(dp, mt, pf)) * m * n;
    Buffer part(Where::Device, elems * 4, "partial");
    linear_fp8_mma_cuda(dp, part.as<float>(), elems, nullptr, mt, pf);
    CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    linear_cuda(dp, *ctx, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<float> got(y0.size());
  dy.download(got.data(), dy.bytes());
  const int step = n > 256 ? n / 128 : 1;  // ~128 rows (jittered below) keep the CPU side to seconds
  MmaErr e;
  std::vector<float> twin(static_cast<size_t>(m));
  for (int r = 0; r < n; r += step) {
    const int rr = std::min(n - 1, r + (r / step) % step);  // jitter inside the stride: all row residues
    for (int i = 0; i < m; ++i) twin[size_t(i)] = y0[size_t(i) * n + rr];
    LinearParams hp{x.data(), W.codes.data() + size_t(rr) * W.K + c0, DType::F8_E4M3, nullptr, m, 1, k, accumulate, false};
    hp.ldw = W.K;
    hp.w_scale = W.scales.data() + size_t(rr / 128) * lds + c0 / 128;
    hp.ld_scale = lds;
    // twin output for one row: y is [m, 1]
    hp.y = twin.data();
    linear_fp8_mma_cpu(hp);
    const float* srow = W.scales.data() + size_t(rr / 128) * lds;
    for (int i = 0; i < m; ++i) {
      double want = accumulate ? y0[size_t(i) * n + rr] : 0.0, mag = std::fabs(want);
      for (int c = 0; c < k; ++c) {
        const double wv = double(e4m3_bits_to_float(W.codes[size_t(rr) * W.K + c0 + c])) * srow[(c0 + c) / 128];
        want += double(x[size_t(i) * k + c]) * wv;
        mag += std::fabs(double(x[size_t(i) * k + c]) * wv);
      }
      const double g = got[size_t(i) * n + rr];
      e.twin = std::max(e.twin, std::fabs(g - twin[size_t(i)]) / mag);
      e.exact = std::max(e.exact, std::fabs(g - want) / mag);
      if (!std::isfinite(g)) e.twin = e.exact = INFINITY;
    }
  }
  std::printf("fp8 mma n=%d k=%d (c0=%d) m=%d acc=%d mt=%d%s %s: rel err vs twin %.3g, vs exact %.3g\n", n, k, c0, m,
              int(accumulate), mt, pf ? " prefetch" : "", direct ? "direct" : "linear_cuda", e.twin, e.exact);
  EXPECT_LT(e.twin, 1e-5) << "n=" << n << " k=" << k << " m=" << m << " mt=" << mt << " x seed " << salt;
  EXPECT_LT(e.exact, 0x1p-11 + 1e-5) << "n=" << n << " k=" << k << " m=" << m << " mt=" << mt << " x seed " << salt;
  return e;
}

TEST(GpuLinearFp8Mma, Glm5ShapesMatchTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;  // default: tensor-core path for 2 <= m <= 64
  const uint64_t s = fresh_seed();
  Fp8Weight o_proj(6144, 16384, s + 41), q_a(2048, 6144, s + 42), q_b(16384, 2048, s + 43), kv_a(576, 6144, s + 44);
  for (int m : {2, 3, 7, 8, 9, 16, 33, 64}) {
    check_mma(o_proj, m, true, 0, false, &ctx);
    check_mma(q_a, m, false, 0, false, &ctx);
    check_mma(kv_a, m, false, 0, false, &ctx);
  }
  for (int m : {2, 16, 64}) check_mma(q_b, m, false, 0, false, &ctx);
  check_mma(o_proj, 5, true, 0, false, &ctx, 8192, 8192);  // --tp 2 rank 1 column shard
  // Past one 64-token tile (EngineOptions::fp8_mma_max_m above 64: batch 128): CTAs along the token axis.
  LinearContext wide;
  wide.fp8_mma_max_m = 256;
  for (int m : {65, 128}) {
    check_mma(o_proj, m, true, 0, false, &wide);
    check_mma(q_b, m, false, 0, false, &wide);
  }
}

TEST(GpuLinearFp8Mma, TileWidthsPrefetchAndNoSplitAgree) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  Fp8Weight w(2048, 6144, fresh_seed());
  for (int m : {2, 8, 9, 16, 31, 33}) {
    check_mma(w, m, false, 2, true, nullptr);
    check_mma(w, m, true, 4, true, nullptr);
    check_mma(w, m, m % 2 == 0, 2, true, nullptr, 0, 0, 0.f, true);  // register prefetch (m <= 16; else ignored)
  }
  Fp8Weight odd(300, 528, fresh_seed());  // prefetch with a partial last block and n % 16 != 0
  for (int m : {3, 16}) check_mma(odd, m, false, 2, true, nullptr, 0, 0, 0.f, true);
  // no partial buffer: S = 1 (one CTA column per row block), same result
  std::vector<float> x(size_t(8) * 6144);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(46, 1, i);
  Buffer dx(Where::Device, x.size() * 4, "x"), dy1(Where::Device, size_t(8) * 2048 * 4, "y1"),
      dy2(Where::Device, size_t(8) * 2048 * 4, "y2");
  dx.upload(x.data(), dx.bytes());
  LinearParams dp{dx.as<float>(), w.dcodes.data(), DType::F8_E4M3, dy1.as<float>(), 8, 2048, 6144, false, false};
  dp.w_scale = w.dscales.as<float>();
  linear_fp8_mma_cuda(dp, nullptr, 0, nullptr);
  const size_t elems = size_t(linear_fp8_mma_splits(dp)) * 8 * 2048;
  Buffer part(Where::Device, elems * 4, "partial");
  dp.y = dy2.as<float>();
  linear_fp8_mma_cuda(dp, part.as<float>(), elems, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> a(size_t(8) * 2048), b(a.size());
  dy1.download(a.data(), dy1.bytes());
  dy2.download(b.data(), dy2.bytes());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])) / (1 + std::fabs(b[i])));
  std::printf("fp8 mma S=1 vs S=%d: max diff %.3g\n", linear_fp8_mma_splits(dp), worst);
  EXPECT_LT(worst, 1e-4);
}

TEST(GpuLinearFp8Mma, OddShapesAndWideMagnitudes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LinearContext ctx;
  // n not a multiple of 16 or 128; k a multiple of 16 but not of 64 / 128 (partial chunks and blocks).
  const uint64_t s = fresh_seed();
  Fp8Weight a(300, 528, s + 47), b(130, 80, s + 48), c(1000, 1040, s + 49);
  for (int m : {2, 3, 9, 17, 40, 64}) {
    check_mma(a, m, m == 3, 0, false, &ctx);
    check_mma(b, m, false, 0, false, &ctx);
    check_mma(c, m, false, 0, false, &ctx, 0, 0, 60.f);  // per-block magnitudes 2^-60 .. 2^60
  }
  // m > 64 through the kernel directly (more CTAs along the token axis)
  check_mma(c, 100, true, 0, true, nullptr);
  // unsupported: k % 16 != 0 -> clear error from the direct call; linear_cuda falls back to the GEMV
  Fp8Weight d(64, 72, 50);
  std::vector<float> x(size_t(4) * 72, 1.f);
  Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, size_t(4) * 64 * 4, "y");
  dx.upload(x.data(), dx.bytes());
  LinearParams dp{dx.as<float>(), d.dcodes.data(), DType::F8_E4M3, dy.as<float>(), 4, 64, 72, false, false};
  dp.w_scale = d.dscales.as<float>();
  EXPECT_FALSE(linear_fp8_mma_supported(dp));
  EXPECT_THROW(linear_fp8_mma_cuda(dp, nullptr, 0, nullptr), Error);
  EXPECT_THROW(linear_fp8_mma_cuda(dp, nullptr, 0, nullptr, 3), Error);
  linear_cuda(dp, ctx, nullptr);  // GEMV scalar path
  CUDA_CHECK(cudaDeviceSynchronize());
}

// The TMA-fed GEMV (linear_fp8_tma.h, m = 1) against exact arithmetic: fp32 sums of exact e4m3 x scale
// products, rel 1e-5 of sum |x w| as the GEMV. GLM-5's m = 1 shapes, the --tp 2 column shard (row
// stride 16384, w offset 8192), and odd shapes (n % 256 != 0, k % 128 != 0: the TMA zero-fills the box
// past the edges); every split count path (default, 1, 7) and ring depth; fresh random data per run.
// Rows are pre-filled with NaN (unless accumulating), so a row never written fails.
TEST(GpuLinearFp8Tma, MatchesExactArithmetic) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t s = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(s));
  struct Case {
    int n, K, c0, k;
    bool acc;
  };
  const Case cases[] = {{6144, 16384, 0, 16384, true}, {2048, 6144, 0, 6144, false}, {576, 6144, 0, 6144, false},
                        {16384, 2048, 0, 2048, false}, {6144, 16384, 8192, 8192, true}, {300, 784, 0, 784, false},
                        {257, 144, 0, 144, true}};
  Buffer part(Where::Device, size_t(64) * 16384 * 4, "partial"), counters(Where::Device, 4096 * 4, "counters");
  CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
  int idx = 0;
  for (const Case& c : cases) {
    Fp8Weight W(c.n, c.K, s + 101 * ++idx);
    std::vector<float> x(c.k), y0(c.n);
    for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(s, 500 + idx, i);
    for (size_t i = 0; i < y0.size(); ++i) y0[i] = rng_normal(s, 600 + idx, i);
    Buffer dx(Where::Device, x.size() * 4, "x"), dy(Where::Device, y0.size() * 4, "y");
    dx.upload(x.data(), dx.bytes());
    LinearParams p{dx.as<float>(), W.dcodes.as<uint8_t>() + c.c0, DType::F8_E4M3, dy.as<float>(), 1, c.n, c.k, c.acc, false};
    p.ldw = c.K;
    p.w_scale = W.dscales.as<float>() + c.c0 / 128;
    p.ld_scale = (c.K + 127) / 128;
    ASSERT_TRUE(linear_fp8_tma_supported(p));
    struct Config {
      int splits, stages, box_rows;
    };
    const Config configs[] = {{0, 3, 256}, {1, 3, 256}, {7, 3, 256}, {0, 2, 256}, {0, 4, 256},
                              {0, 3, 128}, {0, 3, 64},  {5, 4, 64},  {1, 2, 128}};
    for (const auto [splits, stages, box_rows] : configs) {
        SCOPED_TRACE("n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " splits " + std::to_string(splits) +
                     " stages " + std::to_string(stages) + " box_rows " + std::to_string(box_rows));
        if (c.acc) dy.upload(y0.data(), dy.bytes());
        else CUDA_CHECK(cudaMemset(dy.data(), 0xff, dy.bytes()));
        linear_fp8_tma_cuda(p, part.as<float>(), part.bytes() / 4, counters.as<int>(), counters.bytes() / 4, nullptr,
                            splits, stages, box_rows);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got(c.n);
        dy.download(got.data(), dy.bytes());
        const double err = max_rel_err(W, x, 1, c.k, c.c0, c.acc ? &y0 : nullptr, got);
        EXPECT_LT(err, 1e-5);
        if (splits == 0 && stages == 3)
          std::printf("tma gemv n=%d k=%d c0=%d acc=%d box_rows %d splits %d: max rel err %.3g\n", c.n, c.k, c.c0,
                      int(c.acc), box_rows, linear_fp8_tma_splits(p, box_rows, stages), err);
      }
  }
  std::vector<int> left(counters.bytes() / 4);
  counters.download(left.data(), counters.bytes());
  for (int v : left) ASSERT_EQ(v, 0) << "a split-K counter was not reset";
  // Bad input: one clear error, nothing launched.
  Fp8Weight W(256, 256, s);
  Buffer dx(Where::Device, 2 * 256 * 4, "x"), dy(Where::Device, 2 * 256 * 4, "y");
  LinearParams p{dx.as<float>(), W.dcodes.data(), DType::F8_E4M3, dy.as<float>(), 2, 256, 256, false, false};
  p.w_scale = W.dscales.as<float>();
  EXPECT_FALSE(linear_fp8_tma_supported(p));
  EXPECT_THROW(linear_fp8_tma_cuda(p, nullptr, 0, nullptr, 0, nullptr), Error);
  p.m = 1;
  EXPECT_THROW(linear_fp8_tma_cuda(p, nullptr, 0, nullptr, 0, nullptr, 0, 5), Error);
  EXPECT_THROW(linear_fp8_tma_cuda(p, nullptr, 0, nullptr, 0, nullptr, 2, 3), Error);  // split without buffers
  EXPECT_THROW(linear_fp8_tma_cuda(p, nullptr, 0, nullptr, 0, nullptr, 1, 3, 32), Error);  // box_rows
}

TEST(GpuMoeFp8, ExpertsMatchCpuTwin) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  // GLM-5-sized experts would take minutes on the CPU twin; 16 experts of the real row lengths.
  const int E = 16, k = 8, hidden = 6144, inter = 2048;
  for (int B : {1, 3}) {
    Fp8Weight g(E * inter, hidden, 11), u(E * inter, hidden, 12), d(E * hidden, inter, 13);
    std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k), out(size_t(B) * hidden), act(size_t(B) * k * inter);
    std::vector<int32_t> ids(size_t(B) * k);
    for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(31, B, i);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(splitmix64(i + 100 * B) % E);
    for (size_t i = 0; i < tw.size(); ++i) tw[i] = rng_uniform(32, B, i);
    MoeExpertsParams hp{x.data(), ids.data(), tw.data(), g.codes.data(), u.codes.data(), d.codes.data(), DType::F8_E4M3,
                        g.scales.data(), u.scales.data(), d.scales.data(), act.data(), out.data(), B, E, k, hidden, inter};
    moe_experts_cpu(hp);
    Buffer dx(Where::Device, x.size() * 4, "x"), dids(Where::Device, ids.size() * 4, "ids"), dtw(Where::Device, tw.size() * 4, "tw");
    Buffer dout(Where::Device, out.size() * 4, "out"), dact(Where::Device, act.size() * 4, "act");
    dx.upload(x.data(), dx.bytes());
    dids.upload(ids.data(), dids.bytes());
    dtw.upload(tw.data(), dtw.bytes());
    MoeExpertsParams dp{dx.as<float>(), dids.as<int32_t>(), dtw.as<float>(), g.dcodes.data(), u.dcodes.data(), d.dcodes.data(),
                        DType::F8_E4M3, g.dscales.as<float>(), u.dscales.as<float>(), d.dscales.as<float>(),
                        dact.as<float>(), dout.as<float>(), B, E, k, hidden, inter};
    moe_experts_cuda(dp, nullptr);
    std::vector<float> got(out.size());
    dout.download(got.data(), dout.bytes());
    double max_abs = 0, max_ref = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(double(got[i]) - out[i]));
      max_ref = std::max(max_ref, std::fabs(double(out[i])));
    }
    std::printf("fp8 moe B=%d E=%d k=%d: max abs %.3g of max %.3g\n", B, E, k, max_abs, max_ref);
    EXPECT_LT(max_abs / max_ref, 1e-4);
    // With pair_out (moe_down_pair_fp8_kernel + the slot combine, the engine's batch-1 path), with and without the
    // down kernel's first weight loads before its PDL wait (down_early_loads), and as one persistent launch
    // (pair_sync, run twice: its sync words must come back to zero): the same bits.
    Buffer dpair(Where::Device, size_t(B) * k * hidden * 4, "pair_out");
    const std::vector<int32_t> sync0(moe_pair_sync_ints(B, k), 0);
    Buffer dsync = to_device(sync0, "pair_sync");
    for (int form = 0; form < 3; ++form)
      for (int rep = 0; rep < (form == 2 ? 2 : 1); ++rep) {
        MoeExpertsParams vp = dp;
        vp.pair_out = dpair.as<float>();
        vp.down_early_loads = form == 1 ? 0 : 1;
        vp.pair_sync = form == 2 ? dsync.as<int32_t>() : nullptr;
        CUDA_CHECK(cudaMemset(dout.data(), 0xff, dout.bytes()));
        moe_experts_cuda(vp, nullptr);
        std::vector<float> v(out.size());
        dout.download(v.data(), dout.bytes());
        EXPECT_EQ(std::memcmp(v.data(), got.data(), v.size() * 4), 0) << "B=" << B << " form " << form << " rep " << rep;
        if (form == 2) {
          EXPECT_EQ(to_host<int32_t>(dsync, sync0.size()), sync0) << "B=" << B << ": pair_sync not left at zero";
        }
      }
    // The combine with the next RMSNorm (MoeExpertsParams::next_norm_weight): out the same bits, and the normalized
    // rows the bits of rmsnorm_cuda on out (fresh random norm weights).
    {
      const uint64_t seed = fresh_seed();
      std::vector<float> nw(hidden);
      for (int i = 0; i < hidden; ++i) nw[size_t(i)] = 0.5f + rng_uniform(seed, 7, size_t(i));
      Buffer dnw = to_device(nw, "norm weight"), dnorm(Where::Device, dout.bytes(), "normed"),
             dref(Where::Device, dout.bytes(), "normed reference");
      MoeExpertsParams vp = dp;
      vp.pair_out = dpair.as<float>();
      vp.next_norm_weight = dnw.as<float>();
      vp.next_norm_out = dnorm.as<float>();
      vp.next_norm_eps = 1e-5f;
      const std::vector<int32_t> counters0(size_t(B), 0);
      Buffer dcounters = to_device(counters0, "combine counters");
      vp.combine_counters = dcounters.as<int32_t>();
      CUDA_CHECK(cudaMemset(dout.data(), 0xff, dout.bytes()));
      moe_experts_cuda(vp, nullptr);
      NormParams np{dout.as<float>(), dnw.as<float>(), nullptr, dref.as<float>(), B, hidden, hidden, hidden, 1e-5f};
      rmsnorm_cuda(np, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<float> combined = to_host<float>(dout, out.size());
      EXPECT_EQ(std::memcmp(combined.data(), got.data(), got.size() * 4), 0) << "B=" << B << ": the next norm changed out";
      const std::vector<float> normed = to_host<float>(dnorm, out.size()), ref = to_host<float>(dref, out.size());
      EXPECT_EQ(std::memcmp(normed.data(), ref.data(), normed.size() * 4), 0) << "B=" << B << " seed " << seed;
      EXPECT_EQ(to_host<int32_t>(dcounters, size_t(B)), counters0) << "B=" << B << ": combine counters not left at zero";
      vp.pair_out = nullptr;  // no combine launch: refused before anything runs
      EXPECT_THROW(moe_experts_cuda(vp, nullptr), Error);
    }
  }
}

}  // namespace
}  // namespace glm5
